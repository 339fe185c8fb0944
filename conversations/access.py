"""Resolving and guarding ``session_id`` (seed S18: the session is explicit).

``resolve_session`` is the one place that turns a raw session id from a path,
header or query string into a live ``ChatSession`` of a given tenant, with the
error codes of API.md. ``require_session_id`` guards service functions: they
take ``tenant`` and ``session`` as arguments and refuse to run on a missing or
foreign session, so no code path can fall back to a global "current session".
"""

from __future__ import annotations

import functools
import inspect
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from django.utils import timezone

from config.errors import ApiError
from config.ids import parse_uuid
from conversations.models import ChatSession
from tenants.models import Tenant
from tenants.rls import tenant_scope


class SessionError(ApiError):
    """A session id that cannot be used; ``close_code`` is its WebSocket twin."""

    close_code = 4400


class SessionIdRequired(SessionError):
    status, code, close_code = 400, "session_id_required", 4400


class SessionIdInvalid(SessionError):
    status, code, close_code = 400, "session_id_invalid", 4400


class SessionNotFound(SessionError):
    status, code, close_code = 404, "session_not_found", 4404


class SessionClosed(SessionError):
    status, code, close_code = 410, "session_closed", 4410


def parse_session_id(raw: str | None) -> uuid.UUID:
    if raw is None or str(raw).strip() == "":
        raise SessionIdRequired("session_id is required for this request.")
    return parse_uuid(str(raw).strip(), SessionIdInvalid(f"session_id must be a UUID, got {str(raw)[:60]!r}."))


def resolve_session(tenant: Tenant, raw: str | None, *, allow_closed: bool = False) -> ChatSession:
    """The tenant's live session with this id. Another tenant's session is
    reported exactly like a missing one: existence is not revealed."""
    session_id = parse_session_id(raw)
    with tenant_scope(tenant):
        session = (
            ChatSession.objects.for_tenant(tenant).select_related("end_user", "tenant").filter(id=session_id).first()
        )
    if session is None:
        raise SessionNotFound("No such session.")
    if not allow_closed and not session.is_live(timezone.now()):
        raise SessionClosed("This session is closed or expired; start a new one.")
    return session


F = TypeVar("F", bound=Callable[..., Any])


def require_session_id(func: F) -> F:
    """Guard a service function taking ``tenant`` and ``session`` arguments:
    both must be given, and the session must belong to the tenant."""
    signature = inspect.signature(func)
    names = list(signature.parameters)
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)

    def position(name: str) -> int | None:
        parameter = signature.parameters.get(name)
        return names.index(name) if parameter is not None and parameter.kind in positional else None

    # Where the two arguments sit, worked out once: binding the signature on every call would repeat
    # inspect's work for every unit of work of every chat turn.
    tenant_at, session_at = position("tenant"), position("session")

    def argument(name: str, at: int | None, args: tuple, kwargs: dict) -> Any:
        return args[at] if at is not None and at < len(args) else kwargs.get(name)

    def check(args: tuple, kwargs: dict) -> None:
        tenant = argument("tenant", tenant_at, args, kwargs)
        session = argument("session", session_at, args, kwargs)
        if tenant is None:
            raise TypeError(f"{func.__qualname__}: tenant is required")
        if not isinstance(session, ChatSession):
            raise SessionIdRequired(f"{func.__qualname__} needs an explicit session.")
        if session.tenant_id != tenant.pk:
            # A programming error that would leak data: refuse loudly.
            raise SessionNotFound("No such session.")

    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            check(args, kwargs)
            return await func(*args, **kwargs)

        return async_wrapper  # type: ignore[return-value]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        check(args, kwargs)
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
