"""One chat turn, the same for the WebSocket consumer and the REST endpoint (``run_turn``).

Following "One chat turn" in DESIGN.md, in named steps:

1. ``_store`` — the user message, committed first, idempotent by ``client_msg_id`` (``chat.sessions.messages``), with
   the handoff's read in the same transaction; a retry of a turn still running waits for its reply; then the
   handoff (``chat.handoff.triggers``): while a person has the conversation the turn ends here, unanswered; a
   trigger that hands it off makes the reply;
2. ``_prepare`` — extraction, feedback, recall beside the knowledge search, and the two-channel prompt within
   the model's exact token budget (``chat.turn.prepare``); in grounded mode a question the knowledge does not
   answer gets "I do not know" and the offer of a person instead of a model call (``chat.turn.knowledge``);
3. ``_generate`` — the reply streamed from Ollama, deltas relayed, with up to ``MAX_TOOL_ROUNDS`` rounds of
   tool calls (``chat.turn.tool_rounds``);
4. ``_finish`` — the reply stored with the passages it cited, the facts the agent stated extracted, feedback
   (``chat.turn.finish``); then the caller's ``on_done``;
5. ``_after_reply`` — upkeep once the reply is out: the turn's conversation units written by the web
   process (``MEMORY_WRITER`` "inline"; with "worker", the default, ``_finish`` announced them to the
   background writer), the periodic health check.

Each database step is its own short transaction (``config.db.sql.unit_of_work``
units of work); nothing is held open while the model generates. If the model
fails, the user message stays stored and the same ``client_msg_id`` can be
retried; a disconnect cancels generation and keeps what was produced.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.conf import settings

from chat import metrics
from chat.handoff.triggers import HandoffCheck, HandoffTurn, TurnHandoff, handoff_turn, model_handoff, read_turn
from chat.llm import LLMError, OllamaChat, get_llm
from chat.prompt.prepared import PreparedTurn
from chat.sessions import messages
from chat.turn.finish import finish_turn
from chat.turn.forget import forget_turn
from chat.turn.knowledge import EarlySearch, search_early
from chat.turn.prepare import REPLY_RESERVE, prepare_turn
from chat.turn.tool_rounds import rebuild_prompt, run_tool_call
from config.db.sql import unit_of_work
from config.errors import DATABASE_UNAVAILABLE, ApiError
from conversations.models import ChatSession, Message
from memory.conversation import index_messages
from memory.store import check_after_turn, check_due
from tenants.models import Tenant

logger = logging.getLogger(__name__)

#: At most this many rounds of tool calls per turn; the model call after the
#: last round is offered no tools, so it must answer in words.
MAX_TOOL_ROUNDS = 3
#: A retry of a turn that is still running waits this long for its reply before 409 ``turn_in_progress``.
TURN_WAIT_S = 20.0
#: How often a waiting retry looks for the running turn's reply.
TURN_POLL_S = 0.25

Delta = Callable[[str, str], Awaitable[None]]  # (reply_id, text)
Ack = Callable[[str], Awaitable[None]]  # (message_id)
Done = Callable[["TurnResult"], Awaitable[None]]
T = TypeVar("T")


class TurnFailed(ApiError):
    """The model (or the database) could not answer; ``message_id`` is the
    stored user message, empty when the failure came before it was stored."""

    status = 503
    code = "llm_unavailable"

    def __init__(self, message: str, *, code: str = "llm_unavailable", retryable: bool = True, message_id: str = ""):
        super().__init__(message, code=code)
        self.retryable = retryable
        self.message_id = message_id


class TurnInProgress(ApiError):
    """A retry whose ``client_msg_id`` belongs to a turn still running past ``TURN_WAIT_S``."""

    status = 409
    code = "turn_in_progress"

    def __init__(self, message_id: str, retry_after: int) -> None:
        super().__init__("This message is still being answered; retry after a moment for its reply.")
        self.message_id = message_id
        self.retry_after = retry_after


@dataclass
class TurnResult:
    message_id: str
    reply_id: str
    reply: str
    recalled: list[str]
    needs_confirmation: bool
    usage: dict[str, int]
    replayed: bool = False
    trimmed: list[str] = field(default_factory=list)
    #: A person has the conversation (``chat.handoff.triggers``): the message is stored, nothing answers it here.
    deferred: bool = False
    state: str = ChatSession.State.AI
    position: int | None = None
    leave_message: bool = False
    #: The passages the reply cited that were in its prompt (API.md: ``citations``), in the order first cited.
    citations: list[dict[str, Any]] = field(default_factory=list)
    #: Grounded mode answered "I do not know" and offered a person (``chat.turn.knowledge``).
    offer_handoff: bool = False

    @classmethod
    def of_deferred(cls, message: Message, handoff: TurnHandoff) -> TurnResult:
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        return cls(
            message_id=str(message.pk), reply_id="", reply="", recalled=[], needs_confirmation=False, usage=usage,
            deferred=True, state=handoff.state, position=handoff.position, leave_message=handoff.leave_message,
        )  # fmt: skip

    def as_api(self) -> dict[str, Any]:
        if self.deferred:  # API.md: 202 {"message_id", "state"}; the queue position and the offer are extensions
            extra = {"position": self.position} if self.position is not None else {}
            return {"message_id": self.message_id, "state": self.state, **extra,
                    **({"leave_message": True} if self.leave_message else {})}  # fmt: skip
        return {
            "message_id": self.message_id,
            "reply_id": self.reply_id,
            "reply": self.reply,
            "recalled": self.recalled,
            "needs_confirmation": self.needs_confirmation,
            "usage": self.usage,
            "citations": self.citations,
            **({"offer_handoff": True} if self.offer_handoff else {}),
        }


@dataclass
class _Reply:
    """The reply while the model writes it. Kept current through every model call and tool round, so a
    cancelled turn stores exactly what was produced, built on the prompt as it last was."""

    id: str
    prepared: PreparedTurn  # rebuilt after each round of tool calls
    pieces: list[str] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    generation_s: float = 0.0  # model calls and the tool calls between them

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def replay(tenant: Tenant, message: Message, reply: Message) -> TurnResult:
    data = reply.data or {}
    return TurnResult(
        message_id=str(message.pk),
        reply_id=str(reply.pk),
        reply=reply.text,
        recalled=list(data.get("recalled", [])),
        needs_confirmation=bool(data.get("needs_confirmation", False)),
        usage=dict(data.get("usage", {"prompt_tokens": 0, "completion_tokens": 0})),
        replayed=True,
        citations=list(data.get("citations", [])),
        offer_handoff=bool(data.get("offer_handoff", False)),
    )


async def _timed(stage: str, work: Awaitable[T]) -> T:
    """``work`` awaited, its wall time (waiting for a database thread included) in ``memdesk_turn_stage_seconds``."""
    started = time.perf_counter()
    try:
        return await work
    finally:
        metrics.TURN_STAGE.labels(stage=stage).observe(time.perf_counter() - started)


def _failed(exc: LLMError, message: Message) -> TurnFailed:
    return TurnFailed(exc.public_message, code=exc.code, retryable=exc.retryable, message_id=str(message.pk))


def _database_failed(exc: BaseException, message: Message | None) -> TurnFailed:
    logger.warning("turn %s: the database failed: %s", message.pk if message else "(not stored)", exc)
    return TurnFailed(
        "The database is unavailable for a moment; retry the message.",
        code="database_unavailable",
        retryable=True,
        message_id=str(message.pk) if message is not None else "",
    )


# --- step 1: store ---------------------------------------------------------------


def _store_and_read(
    tenant: Tenant, session: ChatSession, text: str, client_msg_id: str | None
) -> tuple[Message, Message | None, HandoffCheck | None]:
    """``store_user_message`` with the handoff's read (``read_turn``) in its transaction, when the turn runs."""
    checks: list[HandoffCheck] = []
    message, reply = messages.store_user_message(
        tenant, session, text, client_msg_id, then=lambda stored: checks.append(read_turn(tenant, session, stored))
    )
    return message, reply, checks[0] if checks else None


async def _store(
    tenant: Tenant, session: ChatSession, text: str, client_msg_id: str | None
) -> tuple[Message, Message | None, HandoffCheck | None]:
    """Step 1; a retry of a turn still running waits for it (``TURN_WAIT_S``, polling without holding a
    connection) and then gets its stored reply, or runs the turn itself if the first one failed or died."""
    store = unit_of_work(_store_and_read)
    deadline = time.monotonic() + TURN_WAIT_S
    while True:
        try:
            return await _timed("store", store(tenant, session, text, client_msg_id))
        except messages.TurnRunning as running:
            if time.monotonic() >= deadline:
                raise TurnInProgress(running.message_id, retry_after=max(1, round(messages.TURN_LEASE_S / 3))) from None
        except DATABASE_UNAVAILABLE as exc:
            raise _database_failed(exc, None) from exc
        await asyncio.sleep(TURN_POLL_S)


async def _keep_lease(tenant: Tenant, message: Message) -> None:
    """Renew the turn's lease on its message three times per ``TURN_LEASE_S`` until cancelled."""
    renew = unit_of_work(messages.renew_lease)
    while True:
        await asyncio.sleep(messages.TURN_LEASE_S / 3)
        try:
            await renew(tenant, message.pk)
        except Exception:  # a missed renewal only shortens the claim; the turn goes on
            logger.warning("could not renew the lease of turn %s", message.pk, exc_info=True)


# --- step 2: prepare ---------------------------------------------------------------


async def _prepare(
    tenant: Tenant, session: ChatSession, message: Message, llm: OllamaChat, early: EarlySearch | None = None
) -> PreparedTurn:
    """Step 2: the model's context size (``TurnFailed`` when the model cannot tell it), then
    ``prepare_turn`` in a unit of work of its own (``early``: the knowledge search the turn already started)."""
    try:
        context_size = await llm.context_size()
    except LLMError as exc:
        raise _failed(exc, message) from exc
    return await _timed("prepare", unit_of_work(prepare_turn)(tenant, session, message, context_size, early))


# --- step 3: generate, with tool rounds ---------------------------------------------


async def _model_call(
    llm: OllamaChat, reply: _Reply, offered: list[dict[str, Any]] | None, on_delta: Delta | None, started: float
) -> tuple[str, list[dict[str, Any]]]:
    """One model call on ``reply.prepared``'s prompt: its deltas relayed and added to the reply, its tokens
    counted in ``reply.usage``. Returns the call's own text and the tool calls the model asked for."""
    prompt = reply.prepared.prompt
    reply.usage["prompt_tokens"] += prompt.prompt_tokens
    metrics.PROMPT_TOKENS.observe(prompt.prompt_tokens)
    round_pieces: list[str] = []
    calls: list[dict[str, Any]] = []
    stream = llm.stream(prompt.messages, num_ctx=reply.prepared.context_size, tools=offered)
    async with aclosing(stream) as chunks:
        async for chunk in chunks:
            if chunk.text:
                if not reply.pieces:
                    metrics.OLLAMA_TTFT.observe(time.perf_counter() - started)
                reply.pieces.append(chunk.text)
                round_pieces.append(chunk.text)
                if on_delta is not None:
                    await on_delta(reply.id, chunk.text)
            calls.extend(chunk.tool_calls)
            if chunk.done:
                reply.usage["completion_tokens"] += chunk.completion_tokens or 0
    return "".join(round_pieces), calls


async def _tool_round(
    tenant: Tenant,
    session: ChatSession,
    message: Message,
    reply: _Reply,
    text: str,
    calls: list[dict[str, Any]],
    exchange: list[dict[str, Any]],
    round_no: int,
) -> PreparedTurn:
    """One round of tool calls: the model's message and each call's answer added to ``exchange``, the calls
    run one after the other; returns the prompt of the next model call, rebuilt around the execution context
    as the last call left it (no tools offered after round ``MAX_TOOL_ROUNDS``)."""
    exchange.append({"role": "assistant", "content": text, "tool_calls": calls})
    context = None
    for index, call in enumerate(calls):
        # Shielded: a client that goes away mid-call does not leave the
        # execution context half-updated; the call's answer is recorded.
        context, answer = await asyncio.shield(
            run_tool_call(tenant, session, message, reply.prepared, call, round_no=round_no, index=index)
        )
        exchange.append(answer)
    assert context is not None
    return rebuild_prompt(
        reply.prepared, context, exchange, reply_reserve=REPLY_RESERVE, offer_tools=round_no < MAX_TOOL_ROUNDS
    )


async def _generate(
    tenant: Tenant, session: ChatSession, message: Message, llm: OllamaChat, reply: _Reply, on_delta: Delta | None
) -> None:
    """Step 3: the reply, written into ``reply``. The tenant's tools are offered; after each round of tool
    calls the model is called again with the answers, at most ``MAX_TOOL_ROUNDS`` rounds. A failed model
    call raises ``TurnFailed``; a cancelled turn stores what was produced as ``partial`` and re-raises."""
    exchange: list[dict[str, Any]] = []
    rounds = 0
    started = time.perf_counter()
    try:
        while True:
            offered = reply.prepared.tool_definitions() if rounds < MAX_TOOL_ROUNDS else None
            text, calls = await _model_call(llm, reply, offered, on_delta, started)
            if not calls or offered is None:
                break  # calls for tools that were not offered are ignored
            # The model's handoff_to_human (chat.handoff.triggers): a person takes over, and the reply says so.
            notice = await model_handoff(tenant, session, message, reply.prepared, calls)
            if notice is not None:
                notice = ("\n\n" if reply.pieces else "") + notice
                reply.pieces.append(notice)
                if on_delta is not None:
                    await on_delta(reply.id, notice)
                break
            rounds += 1
            reply.prepared = await _tool_round(tenant, session, message, reply, text, calls, exchange, rounds)
    except LLMError as exc:
        logger.warning("turn %s: model failed: %s", message.pk, exc)
        raise _failed(exc, message) from exc
    except asyncio.CancelledError:
        # The client went away: generation stops (the stream is closed by
        # aclosing) and what was produced is kept, marked partial.
        partial = reply.text
        if partial:
            await asyncio.shield(
                unit_of_work(finish_turn)(
                    tenant,
                    session,
                    message,
                    reply.id,
                    partial,
                    reply.prepared,
                    reply.usage,
                    status=Message.Status.PARTIAL,
                )  # fmt: skip
            )
        raise
    reply.generation_s = time.perf_counter() - started
    metrics.OLLAMA_LATENCY.observe(reply.generation_s)


# --- step 4: finish ------------------------------------------------------------------


async def _finish(
    tenant: Tenant, session: ChatSession, message: Message, reply: _Reply, arrived: float
) -> tuple[TurnResult, Message]:
    """Step 4: the reply stored (``finish_turn``, a unit of work of its own) and the turn's result; the time
    memdesk added to the model's since the message arrived goes to ``memdesk_turn_overhead_seconds``."""
    stored = await _timed(
        "finish",
        unit_of_work(finish_turn)(tenant, session, message, reply.id, reply.text, reply.prepared, reply.usage),
    )
    metrics.TURN_OVERHEAD.observe(time.perf_counter() - arrived - reply.generation_s)
    result = TurnResult(
        message_id=str(message.pk),
        reply_id=reply.id,
        reply=reply.text,
        recalled=reply.prepared.recalled,
        needs_confirmation=reply.prepared.needs_confirmation,
        usage=reply.usage,
        trimmed=reply.prepared.prompt.trimmed,
        citations=list((stored.data or {}).get("citations", [])),
        offer_handoff=reply.prepared.offer_handoff,
    )
    return result, stored


async def _answer(
    tenant: Tenant,
    session: ChatSession,
    message: Message,
    llm: OllamaChat | None,
    on_delta: Delta | None,
    arrived: float,
    handed: HandoffTurn | None = None,
) -> tuple[TurnResult, Message, PreparedTurn]:
    """Steps 2–4 for a stored user message, under its lease (renewed while the turn runs, released when it
    ends without a reply, so a retry may run it at once): the result, the stored reply and what the prompt
    was last built from. A database failure raises ``TurnFailed`` (``database_unavailable``)."""
    leased = message.client_msg_id is not None
    renewer = asyncio.create_task(_keep_lease(tenant, message)) if leased else None
    answered = False
    try:
        llm = llm or get_llm()
        # The knowledge search starts now, beside everything that follows (chat.turn.knowledge.search_early).
        early = search_early(tenant, session, message.text) if handed is None else None
        # 「忘掉我的地址」 is answered without the model (chat.turn.forget); any other message is prepared for it.
        forgot = handed or await forget_turn(tenant, session, message)  # handed: a handoff's notice
        reply = _Reply(id=str(uuid.uuid4()), prepared=forgot or await _prepare(tenant, session, message, llm, early))
        # Grounded mode's "I do not know" (chat.turn.knowledge) is, like a forget request's answer, not the model's.
        fixed = forgot.reply_text if forgot is not None else reply.prepared.fixed_reply
        if fixed is None:
            await _generate(tenant, session, message, llm, reply, on_delta)
        else:
            reply.pieces.append(fixed)
            if on_delta is not None:
                await on_delta(reply.id, fixed)
        result, stored = await _finish(tenant, session, message, reply, arrived)
        answered = True
    except DATABASE_UNAVAILABLE as exc:
        raise _database_failed(exc, message) from exc
    finally:
        if renewer is not None:
            renewer.cancel()
        if leased and not answered:
            try:  # shielded: a client that went away still frees its message for a retry
                await asyncio.shield(unit_of_work(messages.release_lease)(tenant, message.pk))
            except Exception:  # the database is down too: the lease lapses by itself
                logger.warning("could not release the lease of turn %s", message.pk, exc_info=True)
    return result, stored, reply.prepared


# --- step 5: after the reply -----------------------------------------------------------


async def _after_reply(
    tenant: Tenant, session: ChatSession, message: Message, reply: Message, previous_text: str
) -> None:
    """Step 5, once the reply is out: with ``MEMORY_WRITER`` "inline" the turn's messages become conversation
    memory here ("worker", the default: ``finish_turn`` announced them to the background writer, nothing is
    left to do); then (at most once a minute per process) the tenant's health check. Failures are logged; the
    turn has succeeded."""
    # A failure here (or a process that dies here) leaves the messages unmarked, and the worker's sweep
    # (memory.conversation.units.index_pending) writes them.
    if settings.MEMORY_WRITER == "inline":
        try:
            index = unit_of_work(index_messages)
            await _timed("index", index(tenant, session, [message, reply], previous_text=previous_text))
        except Exception:
            logger.exception("indexing the messages of turn %s failed; the worker's sweep retries", message.pk)
    if check_due(tenant):
        try:
            await unit_of_work(check_after_turn)(tenant)
        except Exception:  # the turn itself succeeded and its reply is out
            logger.exception("memory health check after a turn of tenant %s failed", tenant.slug)


# --- the whole turn ----------------------------------------------------------------------


async def run_turn(
    tenant: Tenant,
    session: ChatSession,
    text: Any,
    client_msg_id: Any = None,
    *,
    llm: OllamaChat | None = None,
    on_ack: Ack | None = None,
    on_delta: Delta | None = None,
    on_done: Done | None = None,
) -> TurnResult:
    """Run one turn. Raises ``InvalidMessage``, ``RateLimited``,
    ``TurnFailed`` (model or database down; ``message_id`` says whether the
    message is stored), ``TurnInProgress`` (a retry of a turn still running
    past ``TURN_WAIT_S``) or ``prompt.ContextOverflow``; a cancelled turn
    stores the partial reply.

    ``on_done`` gets the result once the reply is stored; the turn then
    writes the turn's conversation units and runs the tenant's periodic
    health check (``memory.store.health``, at most once a minute per process)
    before it returns, so a WebSocket's ``done`` frame never waits for them.

    When the tenant has tools, the model is offered them; each round of tool
    calls it makes is run (:func:`run_tool_call`) and the model is called
    again with the answers, at most ``MAX_TOOL_ROUNDS`` rounds. ``usage``
    adds up every model call of the turn.

    While a person has the conversation (``chat.handoff.triggers``) the turn ends once the message is stored: the
    result is ``deferred`` (no reply, no model call, no recall) and ``on_done`` is not called."""
    arrived = time.perf_counter()
    text, client_msg_id = messages.check_message(text, client_msg_id)
    message, stored_reply, check = await _store(tenant, session, text, client_msg_id)
    if on_ack is not None:
        await on_ack(str(message.pk))
    if stored_reply is not None:
        result = replay(tenant, message, stored_reply)
        if on_delta is not None:
            await on_delta(result.reply_id, result.reply)
        if on_done is not None:
            await on_done(result)
        return result

    # A person has the conversation: stored, not answered here; or a trigger hands it off, and the reply says so.
    assert check is not None  # store_user_message ran ``then`` for the turn it lets run
    try:
        handoff = await handoff_turn(tenant, session, message, check)
    except DATABASE_UNAVAILABLE as exc:
        raise _database_failed(exc, message) from exc
    if handoff.deferred:
        return TurnResult.of_deferred(message, handoff)
    result, reply, prepared = await _answer(tenant, session, message, llm, on_delta, arrived, handoff.notice)
    if on_done is not None:
        await on_done(result)
    await _after_reply(tenant, session, message, reply, prepared.previous_text)
    return result
