"""Staff reads in the admin (``conversations.staff_access``): who opened which end user's data. Sessions and
messages are in ``chat.admin``, with the runtime's records."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models
from django.http import HttpRequest

from conversations.models import StaffAccess
from tenants.admin_base import TenantScopedAdmin, member_tenant_ids
from tenants.models import Membership

OWNER = {Membership.Role.OWNER}


@admin.register(StaffAccess)
class StaffAccessAdmin(TenantScopedAdmin):
    """Read-only, and only for the owners of a tenant (and superusers): the record answers "who looked at my
    customers' data", which includes the tenant's admins and agents, who therefore may not see or browse it."""

    list_display = ("created_at", "user", "what", "end_user", "session", "path", "tenant")
    list_filter = ("tenant", "what")
    search_fields = ("end_user__external_id", "user__username", "=session__id")
    list_select_related = ("user", "end_user", "tenant")
    readonly_fields = ("tenant", "end_user", "session", "user", "what", "path", "created_at")

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        return qs.filter(tenant_id__in=member_tenant_ids(request.user, roles=OWNER))

    def _allowed(self, request: HttpRequest, obj: Any, roles: set[str] | None) -> bool:
        return super()._allowed(request, obj, OWNER)  # every permission, even to look, is the owners'

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
