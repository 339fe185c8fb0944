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
from chat.prompt import dumps_compact
from chat.tools import ToolOutcome
from config.db.sql import unit_of_work
from conversations.access import require_session_id
from conversations.models import ChatSession, Message
from memory import services as memory_services
from memory.compression import compress_tool_result
from memory.models import MAX_CONTENT, MemoryType
from memory.redaction import PLACEHOLDER_RE, redact_obj
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
    context as written: the next prompt is built from exactly this."""
    redacted = redact_obj(outcome.result)
    content = memory_content(name, outcome.result) if outcome.ok else None
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
        context.version += 1
        context.updated_at = timezone.now()
        context.save(update_fields=["current_tool", "tool_args", "last_tool_result", "version", "updated_at"])

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
        if content is not None:
            memory_services.do_write_memory(
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
