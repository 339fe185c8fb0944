"""Tool calls inside a chat turn (S1, S16).

``chat.turn.run.run_turn`` offers the tenant's tools to the model. When the
model answers with tool calls, each is run by :func:`run_tool_call` (execution
context, the signed call, audit message and memory: ``chat.tools.context``), and the
next model call gets the prompt :func:`rebuild_prompt` makes: the system
prompt rebuilt around the updated execution context, then the user input,
then the turn's exchange — the assistant's ``tool_calls`` message and one
``tool`` message per answer.

The model sees phone numbers, e-mail addresses and identity numbers masked
(the anchor's 「138****1234」) and may call a tool with that form. Before the
call, :func:`_unmasked` puts back the stored value a masked one stands for
when exactly one of the session's memories holds a value with that mask; the
tool's schema checks what is sent. The execution context and the audit
message keep the arguments as the model wrote them: both are shown to the
model and to staff.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from django.utils import timezone

from chat import metrics
from chat.models import ExecutionContext
from chat.prompt import build as prompt_mod
from chat.prompt.prepared import PreparedTurn
from chat.prompt.tokens import count_tokens, render_message
from chat.tools import registry as tools_mod
from chat.tools.call import call_tool, tool_error
from chat.tools.compact import dumps_compact
from chat.tools.context import ToolBusy, do_finish_tool_call, do_start_tool_call, execution_context, session_tool_lock
from config.db.sql import unit_of_work
from conversations.models import ChatSession, Message
from memory.store import session_values
from memory.text import MASK_CHAR, compress_tool_result, mask_text, masked_pairs, redact_obj, unmask_obj
from tenants.models import Tenant
from tenants.rls import tenant_scope

logger = logging.getLogger(__name__)

#: A tool answer longer than this (as compact JSON) reaches the model as a
#: compressed summary in the tool message; the execution context keeps it whole.
MAX_TOOL_MESSAGE_CHARS = 4000


def exchange_tokens(exchange: list[dict[str, Any]]) -> int:
    """Prompt tokens of the turn's tool exchange, as the template renders it
    (an assistant message with both words and calls: both counted)."""
    total = 0
    for message in exchange:
        if message["role"] == "assistant" and message.get("tool_calls") and message.get("content"):
            total += count_tokens(render_message({**message, "content": ""})) + count_tokens(message["content"])
        else:
            total += count_tokens(render_message(message))
    return total


def tool_message(name: str, result: Any) -> dict[str, Any]:
    """The ``tool`` message that reports a call's answer to the model:
    compact JSON (S15), secrets redacted, marker-like markup defused (the
    answer is untrusted text)."""
    text = dumps_compact(redact_obj(result))
    if len(text) > MAX_TOOL_MESSAGE_CHARS:
        text = dumps_compact({"summary": compress_tool_result(result), "truncated": True})
    return {"role": "tool", "content": prompt_mod.defuse_markup(text), "tool_name": name}


def rebuild_prompt(
    prepared: PreparedTurn,
    context: ExecutionContext,
    exchange: list[dict[str, Any]],
    *,
    reply_reserve: int,
    offer_tools: bool,
) -> PreparedTurn:
    """The prompt of the next model call of a turn that called tools.

    The system prompt is rebuilt around the execution context as the last
    call left it (S1: the answer travels as JSON in ``<|execution_context|>``
    and in the tool message, never as assistant chat text). The exchange is
    budgeted like everything else: it is reserved out of the context window
    first, then the other parts are fitted (and trimmed in S19's order).
    Raises ``ContextOverflow`` when the exchange alone leaves no room."""
    assert prepared.parts is not None, "prepare_turn sets parts"
    parts = replace(prepared.parts, execution_context=context.as_dict())
    extra = exchange_tokens(exchange)
    if reply_reserve + extra >= prepared.context_size:
        raise prompt_mod.ContextOverflow(reply_reserve + extra, prepared.context_size - reply_reserve)
    built = prompt_mod.build_prompt(
        parts,
        context_size=prepared.context_size,
        reply_reserve=reply_reserve + extra,
        tools=prepared.tool_definitions() if offer_tools else None,
    )
    prompt = prompt_mod.BuiltPrompt(
        messages=[*built.messages, *exchange],
        prompt_tokens=built.prompt_tokens + extra,
        budget=prepared.context_size - reply_reserve,
        trimmed=built.trimmed,
    )
    return replace(prepared, parts=parts, prompt=prompt)


async def run_tool_call(
    tenant: Tenant,
    session: ChatSession,
    message: Message,
    prepared: PreparedTurn,
    call: dict[str, Any],
    *,
    round_no: int,
    index: int,
) -> tuple[ExecutionContext, dict[str, Any]]:
    """Run one tool call the model asked for: update the execution context,
    call the tenant (arguments checked against the tool's schema first),
    record the answer. Returns the context as written and the tool message
    for the model. A tool that is unknown, gets bad arguments, fails or times
    out yields a structured error; the turn goes on."""
    function = call.get("function") or {}
    name = str(function.get("name") or "")[:100]
    arguments = function.get("arguments")
    arguments = dict(arguments) if isinstance(arguments, dict) else arguments
    tool = prepared.tools.get(name)
    sent = await _unmasked(tenant, session, arguments) if tool is not None else arguments
    try:
        async with session_tool_lock(session):
            started = await unit_of_work(do_start_tool_call)(tenant, session, name=name, arguments=arguments)
            if tool is None:
                outcome = tool_error("unknown_tool", f"there is no tool named {name!r}")
            elif (problem := tools_mod.validate_arguments(tool.parameters, sent)) is not None:
                # The problem may quote a value put back from its mask: the model gets it masked again.
                outcome = tool_error("invalid_arguments", mask_text(problem))
            else:
                outcome = await call_tool(
                    tenant,
                    tool,
                    sent,
                    session_id=session.pk,
                    end_user_id=prepared.end_user_id,
                    call_id=f"turn:{message.pk}:{round_no}.{index}",
                )
            context = await unit_of_work(do_finish_tool_call)(
                tenant,
                session,
                message,
                name=name,
                arguments=arguments,
                outcome=outcome,
                expected_version=started.version,
                round_no=round_no,
            )
    except ToolBusy as exc:
        logger.warning("turn %s: %s", message.pk, exc)
        outcome = tool_error("tool_busy", "another tool call of this session is still running")
        context = await unit_of_work(execution_context)(tenant, session)
    # Only registered names become label values: the model can invent any name.
    metrics.TOOL_CALLS.labels(tenant=tenant.slug, tool=name if tool else "unknown", outcome=outcome.metric).inc()
    if not outcome.ok:
        logger.info("turn %s: tool %r failed: %s", message.pk, name, outcome.error_code)
    return context, tool_message(name, outcome.result)


def _session_values(tenant: Tenant, session: ChatSession) -> dict[str, str]:
    """``{masked: full}`` for the personal values the session's memories hold (``memory.text.masking.masked_pairs``)."""
    with tenant_scope(tenant):
        return masked_pairs(session_values(tenant, session, as_of=timezone.now()))


def _has_mask(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_mask(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_mask(v) for v in value)
    return isinstance(value, str) and MASK_CHAR in value


async def _unmasked(tenant: Tenant, session: ChatSession, arguments: Any) -> Any:
    """``arguments`` with each masked value the session's memories resolve to one stored value replaced by it
    (「138****1234」 → 13812341234); a mask that matches none, or more than one, is sent as written. Reads the
    memories only when an argument carries a ``*``."""
    if not _has_mask(arguments):
        return arguments
    return unmask_obj(arguments, await unit_of_work(_session_values)(tenant, session))
