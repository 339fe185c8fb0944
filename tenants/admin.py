from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils import timezone

from tenants.admin_base import TenantScopedAdmin
from tenants.models import ApiKey, EndUser, Membership, Tenant


@admin.register(Tenant)
class TenantAdmin(TenantScopedAdmin):
    tenant_field = "id"
    list_display = ("slug", "name", "language", "created_at")
    search_fields = ("slug", "name")
    readonly_fields = ("id", "signing_secret", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser


@admin.register(Membership)
class MembershipAdmin(TenantScopedAdmin):
    list_display = ("user", "tenant", "role", "created_at")
    list_filter = ("role", "tenant")


@admin.register(ApiKey)
class ApiKeyAdmin(TenantScopedAdmin):
    list_display = ("prefix", "name", "tenant", "created_at", "last_used_at", "revoked_at")
    list_filter = ("tenant",)
    readonly_fields = ("prefix", "created_at", "last_used_at")
    fields = ("tenant", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    actions = ("revoke",)

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if not change:
            plain = obj.new_secret()
            super().save_model(request, obj, form, change)
            self.message_user(
                request,
                f"New API key (shown once — copy it now): {plain}",
                level=messages.WARNING,
            )
            return
        super().save_model(request, obj, form, change)

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"{count} key(s) revoked.")


@admin.register(EndUser)
class EndUserAdmin(TenantScopedAdmin):
    list_display = ("external_id", "tenant", "created_at")
    list_filter = ("tenant",)
    search_fields = ("external_id",)
