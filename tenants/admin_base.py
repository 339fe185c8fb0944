"""Admin base classes that keep staff inside their own tenants.

A superuser sees every tenant (the RLS bypass is set for them by the
middleware). Any other staff user sees only rows of tenants they are a member
of; owners and admins may change them, agents may only look. Foreign-key
choices are limited the same way, so nobody can move a row into a tenant they
do not belong to, and so are the changelist's tenant filter's choices, which
would otherwise list every tenant's slug and id (:class:`MemberTenantFilter`).

A row's own page shows its times, and reads those typed into its form, in its
tenant's time zone (``tenants.local_time``); lists, which mix tenants, keep UTC.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.http import HttpRequest
from django.utils import timezone

from tenants.local_time import tenant_timezone
from tenants.models import Membership, Tenant

EDIT_ROLES = {Membership.Role.OWNER, Membership.Role.ADMIN}


def member_tenant_ids(user: Any, *, roles: set[str] | None = None) -> list[Any]:
    if not user.is_authenticated or not user.is_active:
        return []
    qs = Membership.objects.filter(user=user)
    if roles is not None:
        qs = qs.filter(role__in=roles)
    return list(qs.values_list("tenant_id", flat=True))


class MemberTenantFilter(admin.RelatedFieldListFilter):
    """A changelist filter on a foreign key to :class:`Tenant` that offers
    only the staff member's own tenants (a superuser: all of them)."""

    def field_choices(self, field: Any, request: HttpRequest, model_admin: Any) -> list[tuple[Any, str]]:
        ordering = self.field_admin_ordering(field, request, model_admin)
        if request.user.is_superuser:
            return field.get_choices(include_blank=False, ordering=ordering)
        ids = member_tenant_ids(request.user)
        return field.get_choices(include_blank=False, ordering=ordering, limit_choices_to={"pk__in": ids})


class TenantScopedAdmin(admin.ModelAdmin):
    #: path from this model to its tenant id, e.g. "tenant_id" or "id" for Tenant itself
    tenant_field = "tenant_id"

    def _scope_filter(self, ids: list[Any]) -> dict[str, Any]:
        return {f"{self.tenant_field}__in": ids}

    def get_list_filter(self, request: HttpRequest) -> Any:
        """``list_filter`` with every plain foreign key to Tenant (``"tenant"``)
        filtered by :class:`MemberTenantFilter`. Subclasses that override this
        must call it."""
        return tuple(self._member_filter(entry) for entry in super().get_list_filter(request))

    def _member_filter(self, entry: Any) -> Any:
        if not isinstance(entry, str):
            return entry
        try:
            field = self.model._meta.get_field(entry)
        except FieldDoesNotExist:  # a lookup path such as "session__tenant": left as written
            return entry
        return (entry, MemberTenantFilter) if getattr(field, "related_model", None) is Tenant else entry

    def changeform_view(
        self, request: HttpRequest, object_id: str | None = None, form_url: str = "", extra_context: Any = None
    ) -> Any:
        """One row's page in its tenant's time zone: the template renders inside the override, so the response
        is rendered here rather than after the view returns."""
        obj = self.get_object(request, unquote(object_id)) if object_id else None
        tenant = obj if isinstance(obj, Tenant) else getattr(obj, "tenant", None)
        if tenant is None:
            return super().changeform_view(request, object_id, form_url, extra_context)
        with timezone.override(tenant_timezone(tenant)):
            response = super().changeform_view(request, object_id, form_url, extra_context)
            if hasattr(response, "render") and not response.is_rendered:
                response.render()
        return response

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        qs = self.model._default_manager.get_queryset()
        ordering = self.get_ordering(request)
        if ordering:
            qs = qs.order_by(*ordering)
        if request.user.is_superuser:
            return qs
        return qs.filter(**self._scope_filter(member_tenant_ids(request.user)))

    def _allowed(self, request: HttpRequest, obj: Any, roles: set[str] | None) -> bool:
        if request.user.is_superuser:
            return True
        if not request.user.is_staff:
            return False
        ids = member_tenant_ids(request.user, roles=roles)
        if not ids:
            return False
        if obj is None:
            return True
        return self.model._default_manager.filter(pk=obj.pk, **self._scope_filter(ids)).exists()

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request, None, None)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allowed(request, obj, None)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allowed(request, obj, EDIT_ROLES)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request, None, EDIT_ROLES)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allowed(request, obj, EDIT_ROLES)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if not request.user.is_superuser:
            ids = member_tenant_ids(request.user, roles=EDIT_ROLES)
            related = db_field.related_model
            if related is Tenant:
                kwargs["queryset"] = Tenant.objects.filter(pk__in=ids)
            elif hasattr(related, "tenant_id") or any(f.name == "tenant" for f in related._meta.fields):
                kwargs["queryset"] = related._default_manager.filter(tenant_id__in=ids)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)
