"""One error shape for the whole API: ``{"error": {"code", "message"}}``.

Codes are stable snake_case strings that clients branch on; messages are for
people. Services raise ``ApiError`` (or a subclass); views never build error
bodies by hand.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import psycopg
from django.db import InterfaceError, OperationalError
from django.http import JsonResponse
from rest_framework import exceptions as drf_exc
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_default_handler

logger = logging.getLogger(__name__)

#: ``Retry-After`` of a 429 that names no wait of its own. API.md promises the header on every 429, and the
#: message limits count per minute, so after a minute a retry is always let through.
DEFAULT_RETRY_AFTER_S = 60


class ApiError(Exception):
    """A failure the client caused or can act on.

    ``retry_after`` (seconds) becomes the ``Retry-After`` header; a 429 always has one (``DEFAULT_RETRY_AFTER_S``
    unless the raiser knows better), other statuses only when set.
    """

    status = 400
    code = "bad_request"
    retry_after: float | None = None

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        extra: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        #: More fields for the error object (e.g. the ``index`` of a bad batch item).
        self.extra = extra or {}
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        if retry_after is not None:
            self.retry_after = retry_after


class NotFound(ApiError):
    status = 404
    code = "not_found"


#: The database went away (a restart, a failover) or no pooled connection came in time: the client may
#: retry, and gets a 503 ``database_unavailable`` that says so instead of a 500.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def retry_after_headers(status: int, seconds: float | None = None) -> dict[str, str]:
    """The ``Retry-After`` header for a response: whole seconds, rounded up (a client that waits exactly that
    long must not be refused again); on a 429 always, elsewhere only when ``seconds`` is known."""
    if seconds is None:
        if status != 429:
            return {}
        seconds = DEFAULT_RETRY_AFTER_S
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


def error_response(status: int, code: str, message: str, *, retry_after: float | None = None) -> JsonResponse:
    return JsonResponse(
        error_body(code, message),
        status=status,
        headers=retry_after_headers(status, retry_after),
        json_dumps_params={"ensure_ascii": False},
    )


#: Field-level validation codes that are part of the public contract: a
#: serializer raising ``ValidationError(msg, code=<one of these>)`` makes the
#: response carry that code. Every other validation failure is
#: ``invalid_request``. Add a code here when API.md names it.
FIELD_ERROR_CODES = {
    "metadata_too_large",
    "content_too_long",
    "unknown_type",
    "invalid_as_of",
    "invalid_k",
    "invalid_tool_name",
    "invalid_schema",
    "invalid_url",
    "invalid_timeout",
    "invalid_json",
    "invalid_text",
}


def _flatten(detail: Any, prefix: str = "") -> list[str]:
    if isinstance(detail, dict):
        out: list[str] = []
        for key, value in detail.items():
            name = key if key != "non_field_errors" else ""
            out.extend(_flatten(value, f"{prefix}{name}." if name else prefix))
        return out
    if isinstance(detail, list):
        out = []
        for item in detail:
            out.extend(_flatten(item, prefix))
        return out
    return [f"{prefix.rstrip('.')}: {detail}" if prefix else str(detail)]


def _first_code(detail: Any) -> str | None:
    """A field error raised with an explicit code (``ValidationError(msg,
    code="content_too_long")``) becomes the response code."""
    if isinstance(detail, dict):
        for value in detail.values():
            code = _first_code(value)
            if code:
                return code
    if isinstance(detail, list):
        for item in detail:
            code = _first_code(item)
            if code:
                return code
    code = getattr(detail, "code", None)
    if code in FIELD_ERROR_CODES:
        return str(code)
    return None


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, ApiError):
        body = error_body(exc.code, exc.message)
        body["error"].update({k: v for k, v in getattr(exc, "extra", {}).items() if k not in body["error"]})
        return Response(body, status=exc.status, headers=retry_after_headers(exc.status, exc.retry_after))
    if isinstance(exc, drf_exc.ParseError):
        return Response(error_body("malformed_json", f"The request body is not valid JSON: {exc.detail}"), status=400)
    if isinstance(exc, drf_exc.UnsupportedMediaType):
        return Response(error_body("unsupported_media_type", "Send JSON with Content-Type: application/json."), 415)
    if isinstance(exc, drf_exc.ValidationError):
        code = _first_code(exc.detail) or "invalid_request"
        return Response(error_body(code, "; ".join(_flatten(exc.detail))), status=400)
    if isinstance(exc, drf_exc.NotAuthenticated | drf_exc.AuthenticationFailed):
        return Response(error_body("authentication_required", "Send 'Authorization: Bearer <api key>'."), status=401)
    if isinstance(exc, drf_exc.PermissionDenied):
        return Response(error_body("permission_denied", str(exc.detail)), status=403)
    if isinstance(exc, drf_exc.NotFound):
        return Response(error_body("not_found", str(exc.detail)), status=404)
    if isinstance(exc, drf_exc.MethodNotAllowed):
        return Response(error_body("method_not_allowed", str(exc.detail)), status=405)
    if isinstance(exc, drf_exc.Throttled):
        return Response(
            error_body("rate_limited", str(exc.detail)), status=429, headers=retry_after_headers(429, exc.wait)
        )
    if isinstance(exc, DATABASE_UNAVAILABLE):
        logger.warning("database unavailable during %s: %s", context.get("view").__class__.__name__, exc)
        body = error_body("database_unavailable", "The database is unavailable for a moment; retry the request.")
        body["error"]["retryable"] = True
        return Response(body, status=503, headers={"Retry-After": "1"})
    response = drf_default_handler(exc, context)
    if response is not None:
        response.data = error_body("error", str(getattr(exc, "detail", exc)))
    return response


def handler404(request: Any, exception: Exception | None = None) -> JsonResponse:
    return error_response(404, "not_found", "No such resource.")


def handler500(request: Any) -> JsonResponse:
    return error_response(500, "internal_error", "Something went wrong on our side; it has been logged.")


def handler400(request: Any, exception: Exception | None = None) -> JsonResponse:
    return error_response(400, "bad_request", "The request could not be understood.")
