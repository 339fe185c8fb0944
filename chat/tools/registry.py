"""Tenant tools: the registry and the signed call (API.md "Tools").

A tenant registers the actions its agent may take; the model asks for one
through Ollama's tool calling and memdesk POSTs

    {"tool": name, "arguments": {...}, "session_id": "…", "end_user_id": "…"}

to the tenant's URL, signed with the tenant's signing secret
(``tenants.signing``: ``X-Memdesk-Timestamp`` and ``X-Memdesk-Signature-V2``,
and the body-only ``X-Memdesk-Signature`` unless the tenant turned it off).
Whatever happens — an answer, a timeout, a 500, HTML instead of JSON — the
caller gets a :class:`ToolOutcome` whose ``result`` is JSON for the model: the
tenant's answer, or ``{"error": {"code", "status"?, "message"}}``. Nothing
here raises for a misbehaving back end: a failing tool must never end the turn.

The chat turn calls :func:`call_tool` (async, in the event loop); the batch
worker calls :func:`call_tool_sync` (in its own thread). Both share the
request building and the answer interpretation below.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import httpx
from django.db import IntegrityError, transaction
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from chat.models import Tool
from config.errors import ApiError, NotFound
from tenants.models import Tenant
from tenants.rls import tenant_scope
from tenants.signing import signed_headers

NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")
MIN_TIMEOUT_S, MAX_TIMEOUT_S, DEFAULT_TIMEOUT_S = 1, 60, 10
#: A schema this big is a mistake, and every turn sends it to the model.
MAX_SCHEMA_BYTES = 16 * 1024
#: The most of a tenant's answer that is read; a bigger one is a bad response.
MAX_RESPONSE_BYTES = 256 * 1024
#: Same value for every attempt of one logical call (a batch item retried
#: after a worker crash), so the tenant can de-duplicate. Not signed.
CALL_ID_HEADER = "X-Memdesk-Call-Id"


class ToolNotFound(NotFound):
    code = "tool_not_found"


class ToolExists(ApiError):
    status = 409
    code = "tool_exists"


# --- validation ------------------------------------------------------------------


def check_name(value: Any) -> str | None:
    """The problem with a tool name, or None."""
    if not isinstance(value, str) or not NAME_RE.match(value):
        return "name must match ^[a-zA-Z_][a-zA-Z0-9_]{0,63}$ (a letter or _, then up to 63 letters, digits or _)"
    return None


def check_parameters(value: Any) -> str | None:
    """The problem with a tool's ``parameters``, or None: it must be a valid
    JSON Schema (draft 2020-12) describing an object, as Ollama's function
    calling expects."""
    if not isinstance(value, dict):
        return "parameters must be a JSON Schema object"
    if len(json.dumps(value, ensure_ascii=False).encode()) > MAX_SCHEMA_BYTES:
        return f"parameters must be at most {MAX_SCHEMA_BYTES} bytes of JSON"
    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as exc:
        path = "/".join(str(p) for p in exc.path) or "(root)"
        return f"parameters is not a valid JSON Schema at {path}: {exc.message}"
    if value.get("type") != "object":
        return 'parameters must describe the arguments object: {"type": "object", "properties": {...}}'
    return None


def check_url(value: Any) -> str | None:
    """The problem with a tool's URL, or None: absolute http(s), a host, a
    port from 1 to 65535, no whitespace or control characters. ``urlparse``
    raises on some malformed URLs (an unclosed ``[`` IPv6 host, a port out of
    range), so those are caught here rather than at the first call."""
    if not isinstance(value, str) or len(value) > 2000:
        return "url must be a string of at most 2000 characters"
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        return "url must not contain whitespace or control characters"
    try:
        parsed = urlparse(value)
        port = parsed.port
    except ValueError as exc:
        return f"url is malformed ({exc})"
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return "url must be an absolute http:// or https:// URL"
    if port == 0:
        return "url port must be from 1 to 65535"
    return None


def check_timeout(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_TIMEOUT_S <= value <= MAX_TIMEOUT_S:
        return f"timeout_s must be a whole number of seconds from {MIN_TIMEOUT_S} to {MAX_TIMEOUT_S}"
    return None


def validate_arguments(schema: dict[str, Any], arguments: Any) -> str | None:
    """The first reason ``arguments`` do not satisfy ``schema``, or None."""
    try:
        error = next(iter(Draft202012Validator(schema).iter_errors(arguments)), None)
    except Exception as exc:  # noqa: BLE001 - an unresolvable $ref and the like: the schema cannot vouch for them
        return f"the arguments cannot be checked against the tool's schema: {type(exc).__name__}"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


# --- the registry ----------------------------------------------------------------


def do_register_tool(
    tenant: Tenant, *, name: str, description: str, parameters: dict[str, Any], url: str, timeout_s: int
) -> Tool:
    """Register a tool (input already checked by the view's serializer).
    A second tool with the same name → 409 ``tool_exists``."""
    with tenant_scope(tenant):
        tools = Tool.objects.for_tenant(tenant)
        if tools.filter(name=name).exists():
            raise ToolExists(f"A tool named {name!r} already exists; delete it first to replace it.")
        try:
            with transaction.atomic():
                return tools.create(
                    tenant=tenant, name=name, description=description, parameters=parameters, url=url,
                    timeout_s=timeout_s,
                )  # fmt: skip
        except IntegrityError:  # a concurrent registration of the same name won
            raise ToolExists(f"A tool named {name!r} already exists; delete it first to replace it.") from None


def list_tools(tenant: Tenant) -> list[Tool]:
    with tenant_scope(tenant):
        return list(Tool.objects.for_tenant(tenant).order_by("name"))


def get_tool(tenant: Tenant, name: str) -> Tool | None:
    with tenant_scope(tenant):
        return Tool.objects.for_tenant(tenant).filter(name=name).first()


def do_delete_tool(tenant: Tenant, name: str) -> None:
    with tenant_scope(tenant):
        deleted, _ = Tool.objects.for_tenant(tenant).filter(name=name).delete()
    if not deleted:
        raise ToolNotFound(f"No tool named {name!r}.")


def serialize_tool(tool: Tool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "url": tool.url,
        "timeout_s": tool.timeout_s,
        "created_at": tool.created_at.isoformat().replace("+00:00", "Z"),
    }


def ollama_tools(tools: list[Tool]) -> list[dict[str, Any]]:
    """The ``tools`` field of an Ollama chat request. The URL and timeout are
    memdesk's business, never the model's."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


# --- the call --------------------------------------------------------------------


@dataclass(frozen=True)
class ToolOutcome:
    """``result`` is what the model and the execution context see; ``metric``
    is the ``memdesk_tool_calls`` outcome label (ok | error | timeout)."""

    result: Any
    metric: str
    status: int | None = None
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.metric == "ok"

    @property
    def error_code(self) -> str | None:
        if self.ok or not isinstance(self.result, dict):
            return None
        return str(self.result.get("error", {}).get("code", "tool_error"))


def tool_error(code: str, message: str, *, status: int | None = None, metric: str = "error") -> ToolOutcome:
    error: dict[str, Any] = {"code": code, "message": message}
    if status is not None:
        error["status"] = status
    return ToolOutcome(result={"error": error}, metric=metric, status=status)


def _request(
    tenant: Tenant, tool: Tool, arguments: dict[str, Any], session_id: Any, end_user_id: str, call_id: str | None
) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(
        {"tool": tool.name, "arguments": arguments, "session_id": str(session_id), "end_user_id": end_user_id},
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode()
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "Accept": "application/json",
        "User-Agent": "memdesk-tools/1",
        **signed_headers(tenant.signing_secret, body, legacy=tenant.send_legacy_signature),
    }
    if call_id:
        headers[CALL_ID_HEADER] = call_id
    return body, headers


def _interpret(status: int, raw: bytes, started: float) -> ToolOutcome:
    duration = round((time.perf_counter() - started) * 1000, 1)
    if not 200 <= status < 300:
        outcome = tool_error("tool_http_error", f"the tool answered HTTP {status}", status=status)
    elif len(raw) > MAX_RESPONSE_BYTES:
        outcome = tool_error(
            "tool_bad_response", f"the answer is larger than {MAX_RESPONSE_BYTES} bytes", status=status
        )
    else:
        try:
            result = json.loads(raw)
        except ValueError:  # UnicodeDecodeError included
            outcome = tool_error("tool_bad_response", "the answer is not JSON", status=status)
        else:
            outcome = ToolOutcome(result=result, metric="ok", status=status)
    return ToolOutcome(outcome.result, outcome.metric, outcome.status, duration)


def _timeout(tool: Tool, started: float) -> ToolOutcome:
    outcome = tool_error("tool_timeout", f"the tool did not answer within {tool.timeout_s}s", metric="timeout")
    return ToolOutcome(outcome.result, outcome.metric, None, round((time.perf_counter() - started) * 1000, 1))


def _unreachable(exc: Exception, started: float) -> ToolOutcome:
    outcome = tool_error("tool_http_error", f"the tool could not be reached ({type(exc).__name__})")
    return ToolOutcome(outcome.result, outcome.metric, None, round((time.perf_counter() - started) * 1000, 1))


async def call_tool(
    tenant: Tenant,
    tool: Tool,
    arguments: dict[str, Any],
    *,
    session_id: Any,
    end_user_id: str,
    call_id: str | None = None,
) -> ToolOutcome:
    """POST the call to the tenant; never raises for the tenant's failures.
    The whole exchange, body included, must end within ``tool.timeout_s``."""
    body, headers = _request(tenant, tool, arguments, session_id, end_user_id, call_id)
    started = time.perf_counter()
    try:
        async with asyncio.timeout(tool.timeout_s):
            async with httpx.AsyncClient(timeout=tool.timeout_s, follow_redirects=False) as client:
                async with client.stream("POST", tool.url, content=body, headers=headers) as response:
                    raw = b""
                    async for piece in response.aiter_bytes():
                        raw += piece
                        if len(raw) > MAX_RESPONSE_BYTES:
                            break
                    return _interpret(response.status_code, raw, started)
    except (TimeoutError, httpx.TimeoutException):
        return _timeout(tool, started)
    except httpx.HTTPError as exc:
        return _unreachable(exc, started)


def call_tool_sync(
    tenant: Tenant,
    tool: Tool,
    arguments: dict[str, Any],
    *,
    session_id: Any,
    end_user_id: str,
    call_id: str | None = None,
) -> ToolOutcome:
    """:func:`call_tool` for synchronous callers (the batch worker)."""
    body, headers = _request(tenant, tool, arguments, session_id, end_user_id, call_id)
    started = time.perf_counter()
    deadline = started + tool.timeout_s
    try:
        with httpx.Client(timeout=tool.timeout_s, follow_redirects=False) as client:
            with client.stream("POST", tool.url, content=body, headers=headers) as response:
                raw = b""
                for piece in response.iter_bytes():
                    raw += piece
                    if len(raw) > MAX_RESPONSE_BYTES:
                        break
                    if time.perf_counter() > deadline:  # a body that trickles in forever
                        return _timeout(tool, started)
                return _interpret(response.status_code, raw, started)
    except httpx.TimeoutException:
        return _timeout(tool, started)
    except httpx.HTTPError as exc:
        return _unreachable(exc, started)
