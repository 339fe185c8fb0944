"""DRF glue: the tenant was authenticated by ``TenantMiddleware``; DRF only
reads it. Keeping one authentication path means the REST API, the admin and
the socket can never disagree on who is calling."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission


class TenantApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        tenant = getattr(request._request, "tenant", None)
        if tenant is None:
            return None
        return (None, tenant)

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="memdesk"'


class IsTenant(BasePermission):
    """The caller presented a valid tenant API key."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return getattr(request._request, "tenant", None) is not None


class TenantApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "tenants.auth.TenantApiKeyAuthentication"
    name = "tenantApiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "http", "scheme": "bearer", "description": "Tenant API key (mdk_live_…)"}
