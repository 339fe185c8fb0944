"""Request context: who the tenant is, which session, and the RLS scope.

One place sets ``request.tenant`` (from ``Authorization: Bearer <api key>``)
and ``request.api_key``; ``conversations.middleware`` then resolves the
session a view declares (``request.chat_session``).

The whole request runs inside ``tenant_db_scope``: PostgreSQL row-level
security then shows only the caller's tenant (an API key), the staff user's
tenants (admin pages), everything for a superuser, and nothing otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve
from django.utils import timezone

from config.errors import DATABASE_UNAVAILABLE, error_response
from tenants.models import ApiKey, Membership
from tenants.rls import tenant_db_scope

logger = logging.getLogger(__name__)

_TOUCH_EVERY = timedelta(seconds=60)


class TenantMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            return self._handle(request)
        except DATABASE_UNAVAILABLE as exc:  # a restart or failover: say so, and that a retry may succeed
            logger.warning("database unavailable for %s %s: %s", request.method, request.path, exc)
            response = error_response(
                503, "database_unavailable", "The database is unavailable for a moment; retry the request."
            )
            response["Retry-After"] = "1"
            return response

    def _handle(self, request: HttpRequest) -> HttpResponse:
        request.tenant = None
        request.api_key = None

        length = request.META.get("CONTENT_LENGTH") or "0"
        if length.isdigit() and int(length) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            return error_response(
                413,
                "request_too_large",
                f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.",
            )

        header = request.headers.get("Authorization")
        if header:
            scheme, _, credential = header.partition(" ")
            if scheme.lower() != "bearer" or not credential.strip():
                return error_response(401, "invalid_authorization", "Use 'Authorization: Bearer <api key>'.")
            key = ApiKey.authenticate(credential.strip())
            if key is None:
                return error_response(401, "invalid_api_key", "The API key is unknown or revoked.")
            request.tenant = key.tenant
            request.api_key = key
            self._touch(key)

        if self._self_scoped(request):
            # Views such as the chat turn manage their own short transactions
            # (the user message must be committed before the model is called).
            return self.get_response(request)
        tenants, bypass = self._rls_scope(request)
        with tenant_db_scope(tenants, bypass=bypass):
            return self.get_response(request)

    @staticmethod
    def _self_scoped(request: HttpRequest) -> bool:
        try:
            match = resolve(request.path_info)
        except Resolver404:
            return False
        view_class = getattr(match.func, "cls", None) or getattr(match.func, "view_class", None)
        return bool(getattr(match.func, "self_scoped", False) or getattr(view_class, "self_scoped", False))

    @staticmethod
    def _touch(key: ApiKey) -> None:
        now = timezone.now()
        if key.last_used_at is None or now - key.last_used_at > _TOUCH_EVERY:
            ApiKey.objects.for_tenant(key.tenant_id).filter(pk=key.pk).update(last_used_at=now)

    @staticmethod
    def _rls_scope(request: HttpRequest) -> tuple[list[Any], bool]:
        if request.tenant is not None:
            return [request.tenant.pk], False
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated or not user.is_active or not user.is_staff:
            return [], False
        if user.is_superuser:
            return [], True
        ids = list(Membership.objects.filter(user=user).values_list("tenant_id", flat=True))
        return ids, False
