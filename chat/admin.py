from __future__ import annotations

from django.contrib import admin

from chat.models import ChatSession, Message
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
