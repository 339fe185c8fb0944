"""Liveness and readiness probes."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from config.errors import error_response
from memory.store import combine, publish_stored, tenant_health
from tenants.admin_base import member_tenant_ids
from tenants.models import Tenant
from tenants.rls import operator_scope


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


# Liveness touches no database: tenants.middleware opens no RLS transaction for a self-scoped view, so the
# probe answers while every pooled connection is busy (a probe that waited would get a busy pod killed).
healthz.self_scoped = True  # type: ignore[attr-defined]


def _check_database() -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    if row is None:
        return {"ok": False, "error": "the vector extension is not installed"}
    return {"ok": True, "pgvector": row[0]}


async def _layer_roundtrip() -> None:
    layer = get_channel_layer()
    name = await layer.new_channel("readyz.")
    token = uuid.uuid4().hex
    await layer.send(name, {"type": "readyz", "token": token})
    message = await asyncio.wait_for(layer.receive(name), timeout=2.0)
    if message.get("token") != token:
        raise RuntimeError("channel layer returned a different message")


def _check_channel_layer() -> dict[str, Any]:
    async_to_sync(_layer_roundtrip)()
    backend = settings.CHANNEL_LAYERS["default"]["BACKEND"].rsplit(".", 1)[-1]
    return {"ok": True, "backend": backend}


def _check_ollama() -> dict[str, Any]:
    response = httpx.get(f"{settings.OLLAMA_HOST.rstrip('/')}/api/tags", timeout=2.0)
    response.raise_for_status()
    models = [m.get("name") or m.get("model") for m in response.json().get("models", [])]
    wanted = settings.OLLAMA_MODEL
    has_model = any(m == wanted or (m or "").split(":")[0] == wanted for m in models)
    result: dict[str, Any] = {"ok": has_model, "host": settings.OLLAMA_HOST, "model": wanted}
    if not has_model:
        result["error"] = f"model {wanted!r} is not pulled on {settings.OLLAMA_HOST}"
    return result


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Each dependency reported separately; 200 only when all are ready."""
    checks: dict[str, Any] = {}
    probes = (("database", _check_database), ("channel_layer", _check_channel_layer), ("ollama", _check_ollama))
    for name, check in probes:
        started = time.perf_counter()
        try:
            checks[name] = check()
        except Exception as exc:  # noqa: BLE001 - a probe reports every failure
            checks[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
        checks[name]["ms"] = round((time.perf_counter() - started) * 1000, 1)
    ready = all(c["ok"] for c in checks.values())
    return JsonResponse({"status": "ok" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)


def memory_health(request: HttpRequest) -> JsonResponse:
    """``GET /memory/health``: a tenant API key sees its own tenant; a staff
    user sees every tenant they belong to (all, for a superuser)."""
    if request.method != "GET":
        return error_response(405, "method_not_allowed", "Use GET.")
    if request.tenant is not None:
        return JsonResponse(tenant_health(request.tenant).as_api())
    user = request.user
    if not (user.is_authenticated and user.is_active and user.is_staff):
        return error_response(
            401, "authentication_required", "Send 'Authorization: Bearer <api key>' or log in as staff."
        )
    tenants = Tenant.objects.order_by("slug")
    if not user.is_superuser:
        tenants = tenants.filter(pk__in=member_tenant_ids(user))
    return JsonResponse(combine([tenant_health(t) for t in tenants]))


def metrics_view(request: HttpRequest) -> Any:
    """django-prometheus' exporter, with the memory-health gauges set from the figures the worker's periodic
    job stored (``memory.tasks``). Unauthenticated, so it only reads: it computes nothing and never cleans up."""
    from django_prometheus.exports import ExportToDjangoView

    with operator_scope():  # the exporter speaks for every tenant, visibly
        publish_stored()
    return ExportToDjangoView(request)
