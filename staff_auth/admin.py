"""Invitations and the staff identity audit trail in the admin: a tenant's owners (and superusers) only. The
tenant's admins and agents do not see either: inviting decides who works for the tenant."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.urls import reverse
from django.utils import formats, timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from staff_auth.invitations import InvitationError, do_invite
from staff_auth.models import Invitation, StaffAuthEvent
from tenants.admin_base import TenantScopedAdmin, member_tenant_ids
from tenants.local_time import tenant_timezone
from tenants.models import Membership

OWNERS = {Membership.Role.OWNER}


class OwnersOnlyAdmin(TenantScopedAdmin):
    """Seen by the tenant's owners and superusers; nobody changes a row (an audit trail, a sent invitation)."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request, None, OWNERS)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allowed(request, obj, OWNERS)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Invitation)
class InvitationAdmin(OwnersOnlyAdmin):
    list_display = ("email", "tenant", "role", "status", "invited_by", "created_at", "expires_at")
    list_filter = ("tenant", "role")
    search_fields = ("email",)
    readonly_fields = ("invited_by", "created_at", "expires_at", "accepted_at", "accepted_by")

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("tenant", "email", "role") if obj is None else ("tenant", "email", "role", *self.readonly_fields)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request, None, OWNERS)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Deleting a pending invitation withdraws it: its link then says "not valid".
        return self._allowed(request, obj, OWNERS)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if db_field.name == "tenant" and not request.user.is_superuser:
            field.queryset = field.queryset.filter(pk__in=member_tenant_ids(request.user, roles=OWNERS))
        return field

    def save_model(self, request: HttpRequest, obj: Invitation, form: Any, change: bool) -> None:
        def link(token: str) -> str:
            return request.build_absolute_uri(reverse("staff-invitation", args=[token]))

        try:
            do_invite(obj, invited_by=request.user, link=link)
        except InvitationError as error:
            raise PermissionDenied(error.message) from error
        zone = tenant_timezone(obj.tenant)
        until = formats.date_format(timezone.localtime(obj.expires_at, zone), "DATETIME_FORMAT")
        self.message_user(
            request,
            gettext("The invitation e-mail goes to %(email)s; its link works once, until %(until)s (%(zone)s).")
            % {"email": obj.email, "until": until, "zone": zone},
            level=messages.INFO,
        )

    @admin.display(description=_("status"))
    def status(self, obj: Invitation) -> str:
        if obj.accepted_at is not None:
            return gettext("accepted")
        return gettext("expired") if obj.expires_at <= timezone.now() else gettext("pending")


@admin.register(StaffAuthEvent)
class StaffAuthEventAdmin(OwnersOnlyAdmin):
    list_display = ("created_at", "kind", "tenant", "user", "actor", "detail")
    list_filter = ("kind", "tenant")
