"""The execution context of a session during tool calls (S1, S16).

One tool call changes the context twice:

1. :func:`do_start_tool_call` — ``current_tool`` and ``tool_args`` name the
   call, ``last_tool_result`` is cleared (no answer yet);
2. :func:`do_finish_tool_call` — ``last_tool_result`` is the answer (or the
   structured error); in the same transaction the call is stored as a
   ``tool`` message (audit) and a successful answer as a ``tool_result``
   memory.

Each update takes the context row with ``SELECT … FOR UPDATE`` and bumps
``version``. Between the two updates the tenant's URL is called, which can
take up to a minute, so no transaction stays open across it; instead the whole
call runs under :func:`session_tool_lock`, a PostgreSQL advisory lock on the
session held on a connection of its own. Two turns of one session — in one
process or in many — therefore run their tool calls one after the other, and
the context always describes one call: ``current_tool``/``tool_args`` are
those of the call whose answer ``last_tool_result`` is (API.md).

Secrets in an answer (tokens, API keys, passwords) are redacted before the
answer enters the context, the prompt, the audit message or memory.

``session_variables`` (S1: 「当前会话的临时变量（如{"cart_items": 3,
"discount_applied": True}）」) are written two ways, both merged the same
(:func:`merge_session_variables`: keys replace, ``null`` removes, at most
``MAX_SESSION_VARIABLES_BYTES`` of JSON): by the tenant's back end
(``PATCH /api/v1/sessions/<id>/context``, :func:`do_update_session_variables`)
and by a tool's answer ``{"result": …, "session_variables": {…}}`` in the
same update as the answer. Each write bumps ``version`` like a tool call.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from django.db import connections
from django.db.models import Max
from django.utils import timezone

from chat.models import ExecutionContext
from chat.tools.call import ToolOutcome
from chat.tools.compact import dumps_compact
from config.db.sql import unit_of_work
from config.errors import ApiError
from conversations.access import require_session_id
from conversations.models import ChatSession, Message
from memory.models import MAX_CONTENT, MemoryType
from memory.store import do_write_memory, memory_enabled_for_session
from memory.text import PLACEHOLDER_RE, compress_tool_result, redact_obj
from tenants.models import Tenant
from tenants.rls import tenant_scope

logger = logging.getLogger(__name__)

#: How long a turn waits for another turn's tool call in the same session
#: (a tool may take 60 s; a few may be queued).
LOCK_WAIT_S = 150
MAX_DATA_FIELDS = 20
MAX_DATA_VALUE = 200


class ToolBusy(Exception):
    """Another turn of the session held the tool lock for too long."""


def _lock_key(session: ChatSession) -> int:
    raw = f"memdesk|tool-call|{session.pk}".encode()
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big", signed=True)


def _connection_params() -> dict[str, Any]:
    params = dict(connections["default"].get_connection_params())
    # Django's own psycopg plumbing, meaningless to a bare connection.
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return params


@asynccontextmanager
async def session_tool_lock(session: ChatSession, *, wait_s: float = LOCK_WAIT_S) -> AsyncIterator[None]:
    """Hold the session's tool-call lock for the block (see the module
    docstring). A connection of its own, because Django's connections live in
    short units of work on other threads; closing it releases the lock, and a
    crashed process releases it too. Raises :class:`ToolBusy` after
    ``wait_s`` seconds of waiting."""
    params = await unit_of_work(_connection_params)()
    conn = await psycopg.AsyncConnection.connect(autocommit=True, **params)
    try:
        await conn.execute(f"SET lock_timeout = '{int(wait_s * 1000)}ms'")
        try:
            await conn.execute("SELECT pg_advisory_lock(%s)", [_lock_key(session)])
        except psycopg.errors.LockNotAvailable as exc:
            raise ToolBusy(f"session {session.pk}: another tool call ran for over {wait_s:g}s") from exc
        yield
    finally:
        await conn.close()


def _locked_context(tenant: Tenant, session: ChatSession) -> ExecutionContext:
    contexts = ExecutionContext.objects.for_tenant(tenant)
    contexts.get_or_create(session=session, defaults={"tenant": tenant})
    return contexts.select_for_update().get(session=session)


@require_session_id
def do_start_tool_call(tenant: Tenant, session: ChatSession, *, name: str, arguments: Any) -> ExecutionContext:
    """Update 1 of a tool call; returns the context as written."""
    with tenant_scope(tenant):
        context = _locked_context(tenant, session)
        context.current_tool = name
        context.tool_args = redact_obj(arguments)
        context.last_tool_result = None
        context.version += 1
        context.updated_at = timezone.now()
        context.save(update_fields=["current_tool", "tool_args", "last_tool_result", "version", "updated_at"])
    return context


#: Session variables as compact JSON may take at most this many bytes (API.md: 4 KiB).
MAX_SESSION_VARIABLES_BYTES = 4096
#: A variable's name: what a prompt can show and a back end can name.
MAX_VARIABLE_NAME = 64


class ContextTooLarge(ApiError):
    status = 400
    code = "context_too_large"


class InvalidSessionVariables(ApiError):
    status = 400
    code = "invalid_request"


def merge_session_variables(current: dict[str, Any], changes: Any) -> dict[str, Any]:
    """``current`` with ``changes`` merged: each key replaces, a ``None`` value removes it. Values are
    redacted like a tool's answer (they enter the prompt). Raises ``InvalidSessionVariables`` for
    anything but an object of named values, ``ContextTooLarge`` past ``MAX_SESSION_VARIABLES_BYTES``;
    ``current`` is never changed."""
    if not isinstance(changes, dict):
        raise InvalidSessionVariables("session_variables must be a JSON object of variables")
    for key in changes:
        if not isinstance(key, str) or not 0 < len(key) <= MAX_VARIABLE_NAME:
            raise InvalidSessionVariables(f"each session variable needs a name of 1 to {MAX_VARIABLE_NAME} characters")
    merged = dict(current)
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = redact_obj(value)
    size = len(dumps_compact(merged).encode())
    if size > MAX_SESSION_VARIABLES_BYTES:
        raise ContextTooLarge(
            f"session_variables would take {size} bytes of JSON; at most {MAX_SESSION_VARIABLES_BYTES} are kept"
        )
    return merged


@require_session_id
def do_update_session_variables(tenant: Tenant, session: ChatSession, changes: Any) -> ExecutionContext:
    """The tenant's back end sets (or, with ``null``, removes) session variables; returns the context as
    written. A refused change leaves the context as it was."""
    with tenant_scope(tenant):
        context = _locked_context(tenant, session)
        context.session_variables = merge_session_variables(context.session_variables or {}, changes)
        context.version += 1
        context.updated_at = timezone.now()
        context.save(update_fields=["session_variables", "version", "updated_at"])
    return context


def _answer_and_variables(result: Any) -> tuple[Any, Any]:
    """A tool's answer and the session variables it sets, if it set any (``{"result": …,
    "session_variables": {…}}``): the variables go to the context's own field, not its last result."""
    if isinstance(result, dict) and "session_variables" in result:
        rest = {key: value for key, value in result.items() if key != "session_variables"}
        return rest, result["session_variables"]
    return result, None


def memory_content(name: str, result: Any) -> str:
    """The ``tool_result`` memory's text: the tool's name and its answer
    compressed (secrets removed) to fit 150 characters."""
    prefix = f"{name}: "
    body = compress_tool_result(redact_obj(result), limit=MAX_CONTENT - len(prefix)) or "{}"
    return prefix + body


def memory_data(name: str, redacted: Any) -> dict[str, Any]:
    """The answer's key fields (top-level scalars, redacted ones left out)."""
    data: dict[str, Any] = {"tool": name}
    if not isinstance(redacted, dict):
        return data
    for key, value in redacted.items():
        if len(data) > MAX_DATA_FIELDS or key == "tool" or not isinstance(key, str):
            continue
        if isinstance(value, bool | int | float) or (
            isinstance(value, str) and value and len(value) <= MAX_DATA_VALUE and not PLACEHOLDER_RE.search(value)
        ):
            data[key] = value
    return data


@require_session_id
def do_finish_tool_call(
    tenant: Tenant,
    session: ChatSession,
    message: Message,
    *,
    name: str,
    arguments: Any,
    outcome: ToolOutcome,
    expected_version: int,
    round_no: int,
) -> ExecutionContext:
    """Update 2 of a tool call, with its audit message and (when the call
    succeeded) its ``tool_result`` memory, in one transaction. Returns the
    context as written: the next prompt is built from exactly this. A
    successful answer may set session variables (``{"result": …,
    "session_variables": {…}}``); variables that are refused (not an object,
    too large) are logged and left as they were — the answer still counts."""
    answer, variables = _answer_and_variables(outcome.result) if outcome.ok else (outcome.result, None)
    redacted = redact_obj(answer)
    content = memory_content(name, answer) if outcome.ok else None
    safe_args = redact_obj(arguments)
    with tenant_scope(tenant):
        ChatSession.objects.for_tenant(tenant).select_for_update().filter(pk=session.pk).first()
        context = _locked_context(tenant, session)
        if context.version != expected_version:
            # Cannot happen while every tool call holds session_tool_lock; if
            # it does, the write below still leaves one call's tool, arguments
            # and answer together.
            logger.error(
                "session %s: execution context moved from version %s to %s during a tool call",
                session.pk, expected_version, context.version,
            )  # fmt: skip
        context.current_tool = name
        context.tool_args = safe_args
        context.last_tool_result = redacted
        if variables is not None:
            try:
                context.session_variables = merge_session_variables(context.session_variables or {}, variables)
            except ApiError as exc:
                logger.warning("session %s: tool %s set no session variables: %s", session.pk, name, exc.message)
        context.version += 1
        context.updated_at = timezone.now()
        context.save(
            update_fields=[
                "current_tool",
                "tool_args",
                "last_tool_result",
                "session_variables",
                "version",
                "updated_at",
            ]
        )

        messages = Message.objects.for_tenant(tenant)
        seq = (messages.filter(session=session).aggregate(m=Max("seq"))["m"] or 0) + 1
        audit = messages.create(
            tenant=tenant, session=session, role=Message.Role.TOOL, seq=seq, reply_to=message,
            text=dumps_compact({"tool": name, "arguments": safe_args, "result": redacted}),
            data={
                "tool": name, "outcome": outcome.metric, "status": outcome.status,
                "duration_ms": outcome.duration_ms, "round": round_no, "context_version": context.version,
            },
        )  # fmt: skip
        # Memory off for this end user (memory.store.consent): the answer stays in the execution context only.
        if content is not None and memory_enabled_for_session(tenant, session):
            do_write_memory(
                tenant, session, type=MemoryType.TOOL_RESULT, content=content, key=f"tool:{name}",
                data=memory_data(name, redacted), source_message=audit, source_role=Message.Role.TOOL,
            )  # fmt: skip
    return context


def execution_context(tenant: Tenant, session: ChatSession) -> ExecutionContext:
    with tenant_scope(tenant):
        context, _ = ExecutionContext.objects.for_tenant(tenant).get_or_create(
            session=session, defaults={"tenant": tenant}
        )
    return context
