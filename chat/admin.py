from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Avg, Count
from django.http import HttpRequest

from chat.models import Batch, Tool
from conversations.models import ChatSession, Message, SessionRating
from conversations.staff_access import AuditedReadsAdmin, StaffRead, What
from tenants.admin_base import TenantScopedAdmin


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    fields = ("seq", "role", "text", "status", "author", "created_at")
    readonly_fields = fields
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None) -> bool:  # noqa: ANN001
        return False


@admin.register(ChatSession)
class ChatSessionAdmin(AuditedReadsAdmin, TenantScopedAdmin):
    """A session's page shows its conversation (the messages inline): opening it is recorded, as is a list of
    sessions, once per end user on the page (``conversations.staff_access``)."""

    read_what = list_read_what = What.CONVERSATION
    list_display = ("id", "tenant", "end_user", "status", "state", "created_at", "last_activity_at", "expires_at")
    list_filter = ("tenant", "status", "state")
    search_fields = ("id", "end_user__external_id")
    readonly_fields = ("id", "created_at")
    inlines = (MessageInline,)


@admin.register(Tool)
class ToolAdmin(TenantScopedAdmin):
    """Read-only here: tools are registered through the API, which validates
    the JSON Schema and the URL (docs/tools.md)."""

    list_display = ("name", "tenant", "url", "timeout_s", "created_at")
    list_filter = ("tenant",)
    search_fields = ("name", "description")
    readonly_fields = ("tenant", "name", "description", "parameters", "url", "timeout_s", "created_at")

    def has_add_permission(self, request) -> bool:  # noqa: ANN001
        return False


@admin.register(Batch)
class BatchAdmin(TenantScopedAdmin):
    list_display = ("id", "tenant", "session", "tool_name", "status", "completed", "failed", "total")
    list_filter = ("tenant", "status")
    search_fields = ("=id", "tool_name")
    readonly_fields = [f.name for f in Batch._meta.fields]

    def has_add_permission(self, request) -> bool:  # noqa: ANN001
        return False

    def has_change_permission(self, request, obj=None) -> bool:  # noqa: ANN001
        return False


@admin.register(SessionRating)
class SessionRatingAdmin(AuditedReadsAdmin, TenantScopedAdmin):
    """End users' ratings (chat.handoff.state.do_rate), per tenant and staff member: the list above the ratings sums
    them up (count and average score by tenant, by who answered and by staff member) for the rows filtered.
    Read-only: a rating is the end user's word. A comment is the end user's data, so reading it is recorded."""

    read_what = list_read_what = What.CONVERSATION
    list_display = ("session", "tenant", "score", "handled_by", "staff", "comment", "updated_at")
    list_filter = ("tenant", "handled_by", "score")
    search_fields = ("=session__id", "staff__username", "comment")
    readonly_fields = ("tenant", "session", "score", "comment", "handled_by", "staff", "created_at", "updated_at")
    change_list_template = "admin/conversations/sessionrating/change_list.html"

    def staff_read(self, obj: Any, what: str) -> StaffRead:
        return StaffRead(obj.tenant_id, obj.session.end_user_id, what, obj.session_id)

    def get_queryset(self, request: HttpRequest) -> Any:
        return super().get_queryset(request).select_related("tenant", "session", "staff")

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        response = super().changelist_view(request, extra_context)
        changelist = (getattr(response, "context_data", None) or {}).get("cl")
        if changelist is not None:
            rows = (
                changelist.queryset.order_by()
                .values("tenant__slug", "handled_by", "staff__username")
                .annotate(ratings=Count("id"), average=Avg("score"))
                .order_by("tenant__slug", "handled_by", "staff__username")
            )
            labels = dict(SessionRating.HandledBy.choices)
            response.context_data["rating_summary"] = [
                {**row, "handled_by_label": labels.get(row["handled_by"], row["handled_by"])} for row in rows
            ]
        return response

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
