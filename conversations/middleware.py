"""The session a view works on: ``request.chat_session``.

Views declare what they need with ``session_scope`` (``"path"``: the
``session_id`` URL argument; ``"header"``: ``X-Session-ID``); this middleware,
after ``tenants.middleware.TenantMiddleware`` has set ``request.tenant``,
enforces ``session_id`` with API.md's error codes before the view runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse

from config.errors import error_response
from conversations.access import SessionError, resolve_session


def _view_session_scope(view_func: Any) -> str | None:
    scope = getattr(view_func, "session_scope", None)
    if scope is None:
        view_class = getattr(view_func, "cls", None) or getattr(view_func, "view_class", None)
        scope = getattr(view_class, "session_scope", None)
    return scope


class SessionScopeMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.chat_session = None
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Any, view_args: tuple, view_kwargs: dict[str, Any]
    ) -> HttpResponse | None:
        scope = _view_session_scope(view_func)
        if scope is None:
            return None
        if request.tenant is None:
            return error_response(401, "authentication_required", "Send 'Authorization: Bearer <api key>'.")
        raw = view_kwargs.get("session_id") if scope == "path" else request.headers.get("X-Session-ID")
        try:
            request.chat_session = resolve_session(request.tenant, raw)
        except SessionError as exc:
            return error_response(exc.status, exc.code, exc.message)
        return None
