"""The end user's browser as a REST caller: ``X-Session-ID`` and ``X-Session-Token`` (API.md, "End users").

A tenant's back end calls with its API key (``tenants.middleware``); the end user's browser holds only the
session token that ``POST /api/v1/sessions`` returned (``conversations.session_tokens``), and until now only the
WebSocket took it. :func:`session_from_token` is the REST twin of the socket's check: the session id must be
the token's, the token valid and unexpired, the session the token's tenant's and live. The tenant comes from
the token, so views that take it are ``self_scoped`` (no request-wide RLS scope: there is no API key to scope
by) and the services they call open the tenant's scope from the session's tenant, as every service does.

Why an authentication class rather than a middleware like ``SessionScopeMiddleware``: the token concerns only
the few views that declare it, DRF already runs authentication, permission and throttling per view, and the
OpenAPI schema then says which credential each endpoint takes.

The browser may be a widget on the tenant's own site (another origin): a request whose ``Origin`` is neither
memdesk's own nor one of the tenant's ``allowed_origins`` is refused (403 ``origin_not_allowed``), as the
socket refuses it (close code 4403).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission

from config.errors import ApiError
from conversations.access import SessionError, SessionNotFound, parse_session_id, resolve_session
from conversations.models import ChatSession
from conversations.session_tokens import InvalidToken, read_token
from tenants.models import Tenant

SESSION_HEADER = "X-Session-ID"
TOKEN_HEADER = "X-Session-Token"  # noqa: S105 - a header's name, not a secret


class InvalidSessionToken(SessionError):
    """The token is missing, malformed, expired or for another session."""

    status, code, close_code = 401, "invalid_session_token", 4401


class OriginNotAllowed(ApiError):
    status, code = 403, "origin_not_allowed"


def session_from_token(raw_session_id: str | None, token: str | None) -> ChatSession:
    """The live session that ``token`` opens, with its tenant and end user loaded. Raises, with API.md's codes:
    ``session_id_required`` / ``session_id_invalid`` (400) for the id, :class:`InvalidSessionToken` (401) for
    a missing, bad or expired token or one for another session, ``session_not_found`` (404) for a session that
    is not the token's tenant's, ``session_closed`` (410)."""
    session_id = parse_session_id(raw_session_id)
    try:
        claims = read_token(token or "")
    except InvalidToken as exc:
        raise InvalidSessionToken(f"The session token is missing, invalid or expired ({exc}).") from None
    if claims.session_id != session_id:
        raise InvalidSessionToken("The session token is for another session.")
    tenant = Tenant.objects.filter(pk=claims.tenant_id).first()
    if tenant is None:  # a tenant deleted since: its sessions are gone with it
        raise SessionNotFound("No such session.")
    return resolve_session(tenant, str(session_id))


def origin_allowed(origin: str | None, host: str, tenant: Tenant) -> bool:
    """Whether a browser request from ``origin`` may act for ``tenant``: no ``Origin`` (not a browser's
    cross-site request), memdesk's own (``host``), or one of the tenant's ``allowed_origins`` (``"*"``: any)."""
    if not origin:
        return True
    if urlparse(origin).netloc == host:
        return True
    allowed = {o.rstrip("/") for o in (tenant.allowed_origins or []) if isinstance(o, str)}
    return origin.rstrip("/") in allowed or "*" in allowed


class SessionTokenAuthentication(BaseAuthentication):
    """DRF authentication by the end user's session token: ``request.auth`` is the ``ChatSession`` (its
    ``tenant`` and ``end_user`` loaded); ``request.user`` stays None. A CORS preflight (``OPTIONS``) carries no
    credentials and is let through to the view, which only answers it."""

    def authenticate(self, request: Any) -> tuple[None, ChatSession] | None:
        if request.method == "OPTIONS":
            return None
        session = session_from_token(request.headers.get(SESSION_HEADER), request.headers.get(TOKEN_HEADER))
        if not origin_allowed(request.headers.get("Origin"), request.get_host(), session.tenant):
            raise OriginNotAllowed("This site may not act for this conversation.")
        return None, session

    def authenticate_header(self, request: Any) -> str:
        return 'Session-Token realm="memdesk"'


class HasSessionToken(BasePermission):
    """The caller presented a valid session token (or this is a CORS preflight)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        return request.method == "OPTIONS" or isinstance(request.auth, ChatSession)


class SessionTokenScheme(OpenApiAuthenticationExtension):
    target_class = "conversations.session_auth.SessionTokenAuthentication"
    name = "sessionToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": TOKEN_HEADER,
            "description": f"The session token of POST /api/v1/sessions, with the session's id in {SESSION_HEADER}",
        }
