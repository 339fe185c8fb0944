"""A tenant tool called: the signed POST and what came back (API.md "Tools").

The model asks for a tool through Ollama's tool calling and memdesk POSTs

    {"tool": name, "arguments": {...}, "session_id": "…", "end_user_id": "…"}

to the tenant's URL, signed with the tenant's signing secret
(``tenants.signing``: ``X-Memdesk-Timestamp`` and ``X-Memdesk-Signature-V2``,
and the body-only ``X-Memdesk-Signature`` unless the tenant turned it off).
Whatever happens — an answer, a timeout, a 500, HTML instead of JSON — the
caller gets a :class:`ToolOutcome` whose ``result`` is JSON for the model: the
tenant's answer, or ``{"error": {"code", "status"?, "message"}}``. Nothing
here raises for a misbehaving back end: a failing tool must never end the turn.

One streaming loop: the chat turn awaits :func:`call_tool` in its event loop; the batch worker, which is
synchronous, runs the same coroutine to its end with :func:`call_tool_sync`. The whole exchange, a body that
trickles in included, ends within the tool's timeout either way.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import httpx
from asgiref.sync import async_to_sync

from chat.models import Tool
from tenants.models import Tenant
from tenants.signing import signed_headers

#: The most of a tenant's answer that is read; a bigger one is a bad response.
MAX_RESPONSE_BYTES = 256 * 1024
#: Same value for every attempt of one logical call (a batch item retried
#: after a worker crash), so the tenant can de-duplicate. Not signed.
CALL_ID_HEADER = "X-Memdesk-Call-Id"


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


#: :func:`call_tool` for a synchronous caller (the batch worker, outside any event loop): the same coroutine run to
#: its end — the same request, the same streaming read, the same deadline.
call_tool_sync = async_to_sync(call_tool)
