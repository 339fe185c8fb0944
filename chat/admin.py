from __future__ import annotations

from django.contrib import admin

from chat.models import Batch, Tool
from conversations.models import ChatSession, Message
from tenants.admin_base import TenantScopedAdmin


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    fields = ("seq", "role", "text", "status", "created_at")
    readonly_fields = fields
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None) -> bool:  # noqa: ANN001
        return False


@admin.register(ChatSession)
class ChatSessionAdmin(TenantScopedAdmin):
    list_display = ("id", "tenant", "end_user", "status", "created_at", "last_activity_at", "expires_at")
    list_filter = ("tenant", "status")
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
