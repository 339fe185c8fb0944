"""Tenant provisioning."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from tenants.models import ApiKey, Tenant


@dataclass(frozen=True)
class ProvisionedTenant:
    tenant: Tenant
    api_key: str


def do_create_tenant(slug: str, name: str | None = None, *, language: str = "zh") -> ProvisionedTenant:
    """Create a tenant with its first API key; the plain key is returned once."""
    with transaction.atomic():
        tenant = Tenant.objects.create(slug=slug, name=name or slug, language=language)
        _, plain = ApiKey.issue(tenant, name="default")
    return ProvisionedTenant(tenant=tenant, api_key=plain)
