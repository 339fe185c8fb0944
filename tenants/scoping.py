"""Tenant isolation by construction: the first wall (the ORM).

A tenant-owned model's ``objects`` manager refuses to build a query until it
is told the tenant: ``Model.objects.for_tenant(tenant)``. Code that really
means to cross tenants (operator commands, the staff admin for a superuser)
says so visibly with ``Model.objects.unscoped(reason=...)``.

The second wall is PostgreSQL row-level security (``tenants.rls``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django.db import models

M = TypeVar("M", bound=models.Model)


class UnscopedQueryError(RuntimeError):
    """A tenant-owned model was queried without naming its tenant."""


class TenantManager(models.Manager):
    """Default manager of tenant-owned models; every query names its tenant."""

    def get_queryset(self) -> models.QuerySet:
        raise UnscopedQueryError(
            f"{self.model.__name__}.objects needs a tenant: use .for_tenant(tenant) "
            "or, for deliberate cross-tenant work, .unscoped(reason=...)"
        )

    def _base(self) -> models.QuerySet:
        return models.QuerySet(self.model, using=self._db)

    def for_tenant(self, tenant: Any) -> models.QuerySet:
        if tenant is None:
            raise UnscopedQueryError(f"{self.model.__name__}: tenant must not be None")
        tenant_id = getattr(tenant, "pk", tenant)
        return self._base().filter(tenant_id=tenant_id)

    def for_tenants(self, tenants: Iterable[Any]) -> models.QuerySet:
        ids = [getattr(t, "pk", t) for t in tenants]
        return self._base().filter(tenant_id__in=ids)

    def unscoped(self, *, reason: str) -> models.QuerySet:
        if not reason:
            raise UnscopedQueryError("unscoped() needs a reason")
        return self._base()

    def create(self, **kwargs: Any) -> Any:
        if kwargs.get("tenant") is None and kwargs.get("tenant_id") is None:
            raise UnscopedQueryError(f"{self.model.__name__}.objects.create needs a tenant")
        return self._base().create(**kwargs)

    def bulk_create(self, objs: Iterable[Any], **kwargs: Any) -> list[Any]:
        objs = list(objs)
        if any(getattr(obj, "tenant_id", None) is None for obj in objs):
            raise UnscopedQueryError(f"{self.model.__name__}.objects.bulk_create: every row needs a tenant")
        return self._base().bulk_create(objs, **kwargs)


class TenantOwned(models.Model):
    """Base of every tenant-owned model: ``objects`` is the scoped manager
    (every query names its tenant); ``all_objects`` is Django's plain manager,
    used for related lookups and by code that already holds a scoped parent,
    and by the admin, which filters by membership itself."""

    objects = TenantManager()
    all_objects = models.Manager()

    class Meta:
        abstract = True
        default_manager_name = "all_objects"
        base_manager_name = "all_objects"
