"""WebSocket authentication as ASGI middleware.

Reads ``session_id`` and ``token`` from the query string, checks the signed
token, the session and the Origin, and puts the result in
``scope["memdesk"]``. On failure it records the close code of API.md in
``scope["memdesk_reject"]``: the consumer accepts and closes at once with it,
because a close before accept reaches the browser as a bare HTTP 403 and the
code would be lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse

from config.db.sql import unit_of_work
from conversations.access import SessionError, parse_session_id, resolve_session
from conversations.models import ChatSession
from conversations.session_tokens import InvalidToken, read_token
from tenants.models import Tenant


@dataclass(frozen=True)
class WsIdentity:
    tenant: Tenant
    session: ChatSession


@dataclass(frozen=True)
class Reject:
    code: int
    reason: str


def _origin_allowed(scope: dict[str, Any], tenant: Tenant) -> bool:
    headers = {k.decode("latin1").lower(): v.decode("latin1") for k, v in scope.get("headers", [])}
    origin = headers.get("origin")
    if not origin:
        return True  # not a browser (server-to-server clients send no Origin)
    host = headers.get("host", "")
    parsed = urlparse(origin)
    if parsed.netloc and parsed.netloc == host:
        return True  # memdesk's own chat page
    allowed = {o.rstrip("/") for o in (tenant.allowed_origins or []) if isinstance(o, str)}
    return origin.rstrip("/") in allowed or "*" in allowed


def authenticate(scope: dict[str, Any]) -> WsIdentity | Reject:
    query = parse_qs(scope.get("query_string", b"").decode("latin1"))
    raw_session = (query.get("session_id") or [None])[0]
    token = (query.get("token") or [""])[0]
    try:
        session_id = parse_session_id(raw_session)
    except SessionError as exc:
        return Reject(4400, exc.message)
    try:
        claims = read_token(token)
    except InvalidToken as exc:
        return Reject(4401, f"bad or expired token ({exc})")
    if claims.session_id != session_id:
        return Reject(4401, "the token is for another session")
    tenant = Tenant.objects.filter(pk=claims.tenant_id).first()
    if tenant is None:
        return Reject(4401, "bad token")
    try:
        session = resolve_session(tenant, str(session_id))
    except SessionError as exc:
        return Reject(exc.close_code, exc.message)
    if not _origin_allowed(scope, tenant):
        return Reject(4403, "this origin may not embed this tenant's chat")
    return WsIdentity(tenant=tenant, session=session)


class TokenAuthMiddleware:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        scope = dict(scope)
        outcome = await unit_of_work(authenticate)(scope)
        if isinstance(outcome, Reject):
            scope["memdesk_reject"] = outcome
        else:
            scope["memdesk"] = outcome
        return await self.app(scope, receive, send)
