"""One chat turn, the same for the WebSocket consumer and the REST endpoint.

Following "One chat turn" in DESIGN.md:

1. store the user message first, committed, idempotent by ``client_msg_id``;
2. extract memories from it (and react to a topic switch, a confirmation or
   a correction of what the agent said last turn);
3. recall (rule → hybrid → TTL and rerank);
4. build the two-channel prompt within the model's exact token budget;
5. stream the reply from Ollama, relaying deltas;
6. store the reply, extract the facts the agent stated, apply feedback.

Each database step is its own short transaction (``config.db.sql.unit_of_work``
units of work); nothing is held open while the model generates. If the model
fails, the user message stays stored and the same ``client_msg_id`` can be
retried; a disconnect cancels generation and keeps what was produced.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from django.db import connection
from django.utils import timezone
from psycopg import sql

from chat import prompt as prompt_mod
from chat import tools as tools_mod
from chat.context import execution_context
from chat.llm import LLMError, OllamaChat, get_llm, structured_answer
from chat.models import ExecutionContext, Tool
from chat.prepared import PreparedTurn
from chat.summary import summarize
from chat.tool_calls import rebuild_prompt, run_tool_call
from config.db.sql import execute, fetch_row, fetch_rows, load_models, unit_of_work
from config.errors import DATABASE_UNAVAILABLE, ApiError
from config.text_input import InvalidText, clean_text
from conversations.access import SessionNotFound, require_session_id
from conversations.models import ChatSession, Message
from memory import metrics
from memory import services as memory_services
from memory.conversation import index_messages
from memory.extraction import extract_and_store
from memory.health import amnesia_phrase, check_after_turn, check_due
from memory.models import AmnesiaAlert, MemoryUnit
from memory.recall import embed_query_soon, recall
from memory.redaction import redact
from tenants.models import Tenant
from tenants.rls import tenant_scope

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 4000
RECENT_MESSAGES = 10  # the last 5 turns: 5 user messages and 5 replies (S2)
SUMMARY_MESSAGES = 20  # the last 10 turns feed the summary channel (S6)
RECALL_K = 5
DEFAULT_RATE_PER_SESSION = 60
DEFAULT_RATE_PER_TENANT = 600

#: Tokens kept free for the reply in every prompt.
REPLY_RESERVE = 1024
#: At most this many rounds of tool calls per turn; the model call after the
#: last round is offered no tools, so it must answer in words.
MAX_TOOL_ROUNDS = 3

#: A running turn's claim on its user message (``Message.turn_lease_until``) lasts this long and is renewed
#: three times as often: a turn whose process died stops blocking retries of its message within it.
TURN_LEASE_S = 15.0
#: A retry of a turn that is still running waits this long for its reply before 409 ``turn_in_progress``.
TURN_WAIT_S = 20.0
#: How often a waiting retry looks for the running turn's reply.
TURN_POLL_S = 0.25

#: Keys whose memories anchor the prompt, in this order (seed §4.2).
ANCHOR_KEYS = ("name", "phone", "email", "order_id", "address", "current_topic")

Delta = Callable[[str, str], Awaitable[None]]  # (reply_id, text)
Ack = Callable[[str], Awaitable[None]]  # (message_id)
Done = Callable[["TurnResult"], Awaitable[None]]
T = TypeVar("T")


class InvalidMessage(ApiError):
    code = "invalid_message"


class RateLimited(ApiError):
    status = 429
    code = "rate_limited"


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


class TurnRunning(Exception):
    """Raised by ``store_user_message``: this ``client_msg_id``'s turn holds its lease (it is running)."""

    def __init__(self, message_id: str) -> None:
        super().__init__(message_id)
        self.message_id = message_id


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

    def as_api(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "reply_id": self.reply_id,
            "reply": self.reply,
            "recalled": self.recalled,
            "needs_confirmation": self.needs_confirmation,
            "usage": self.usage,
        }


# --- step 1: the user message --------------------------------------------------


def check_message(text: Any, client_msg_id: Any) -> tuple[str, str | None]:
    """The message's text and ``client_msg_id`` as they are stored (NFC,
    full-width letters and digits folded), or ``InvalidMessage``: code
    ``invalid_text`` for characters PostgreSQL cannot store (NUL, lone
    surrogates) and other control characters. Both transports call it
    before anything is written."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidMessage("text must be a non-empty string")
    if client_msg_id is not None and (not isinstance(client_msg_id, str) or not 0 < len(client_msg_id) <= 100):
        raise InvalidMessage("client_msg_id must be a string of 1 to 100 characters")
    try:
        text = clean_text(text, field="text")
        if client_msg_id is not None:
            client_msg_id = clean_text(client_msg_id, field="client_msg_id")
    except InvalidText as exc:
        raise InvalidMessage(exc.message, code=exc.code) from None
    if len(text) > MAX_MESSAGE_CHARS:
        raise InvalidMessage(f"text must be at most {MAX_MESSAGE_CHARS} characters", code="message_too_long")
    return text.strip(), client_msg_id


def _limits(tenant: Tenant) -> tuple[int, int]:
    conf = tenant.settings.get("rate_limits", {}) if isinstance(tenant.settings, dict) else {}
    return (
        int(conf.get("per_session_per_minute", DEFAULT_RATE_PER_SESSION)),
        int(conf.get("per_tenant_per_minute", DEFAULT_RATE_PER_TENANT)),
    )


# The statements every turn runs, in SQL (config/db/sql.py explains why). Each names
# its tenant, as the scoped managers do, and row-level security holds anyway.
_LOCK_SESSION = "SELECT 1 FROM chat_chatsession WHERE tenant_id = {tenant} AND id = {session} FOR UPDATE"

# What store_user_message checks, in one read. A rate limit is reached when
# the n-th most recent user message of the last minute exists: the scans stop
# at n (the tenant's on the message_user_recent index) instead of counting.
_MESSAGE_CHECKS = """
SELECT
    (SELECT max(seq) FROM chat_message
     WHERE tenant_id = %(tenant)s AND session_id = %(session)s) AS last_seq,
    (SELECT id FROM chat_message
     WHERE tenant_id = %(tenant)s AND session_id = %(session)s AND role = 'user' AND client_msg_id = %(client_msg_id)s
     ORDER BY seq LIMIT 1) AS replayed,
    (SELECT created_at FROM chat_message
     WHERE tenant_id = %(tenant)s AND session_id = %(session)s AND role = 'user' AND created_at >= %(since)s
     ORDER BY created_at DESC OFFSET %(session_skip)s LIMIT 1) AS session_full,
    (SELECT created_at FROM chat_message
     WHERE tenant_id = %(tenant)s AND role = 'user' AND created_at >= %(since)s
     ORDER BY created_at DESC OFFSET %(tenant_skip)s LIMIT 1) AS tenant_full
"""

_TOUCH_SESSION = """
UPDATE chat_chatsession SET last_activity_at = %(now)s WHERE tenant_id = %(tenant)s AND id = %(session)s
"""

# The anchor's facts: the session's live memories with an anchor key, best first (rows, not models). The
# same round trip counts the turn's recalled memories as recalled (what ``recall(record=True)`` does in a
# statement of its own): a data-modifying WITH runs whether or not it is read, and the anchor reads only
# ``key`` and ``content``, which it does not change.
_ANCHOR_TEMPLATE = """
WITH recalled AS (
    UPDATE memory_memoryunit SET recall_count = recall_count + 1 WHERE tenant_id = %(tenant)s AND id = ANY(%(recalled)s)
)
SELECT m.key, m.content FROM memory_memoryunit m
WHERE {scope} AND m.key = ANY(%(keys)s)
ORDER BY m.relevance_score DESC, m.created_at DESC
"""
_ANCHOR_SQL = _ANCHOR_TEMPLATE.format(scope=memory_services.SCOPE_SQL)

# A message's INSERT and its session's UPDATE (``_TOUCH_SESSION`` or ``_FINISH_SESSION``) in one statement, with
# more WITH items where the caller has them (the reply's feedback): a data-modifying WITH runs exactly once
# whether or not it is referenced.
_INSERT_MESSAGE = """
WITH session_update AS ({session_update}){more}
INSERT INTO chat_message (id, tenant_id, session_id, role, text, client_msg_id, reply_to_id, status, data, created_at,
                          seq, turn_lease_until)
VALUES (%(id)s, %(tenant)s, %(session)s, %(role)s, %(text)s, %(client_msg_id)s, %(reply_to)s, %(status)s, %(data)s,
        %(now)s, %(seq)s, %(lease)s)
"""


def _insert_message(
    message: Message, session_update: str, params: dict[str, Any], more: tuple[str, dict[str, Any]] | None = None
) -> Message:
    """Insert ``message`` (built, not saved; ``created_at`` is ``params["now"]``) and run ``session_update``
    with ``params`` (and ``more``: WITH items and their parameters), in one round trip; returns the message,
    now stored."""
    items, more_params = more or ("", {})
    execute(
        _INSERT_MESSAGE.format(session_update=session_update.strip(), more=f", {items}" if items else ""),
        {
            **more_params,
            **params, "id": message.pk, "role": message.role, "text": message.text,
            "client_msg_id": message.client_msg_id, "reply_to": message.reply_to_id, "status": message.status,
            "data": connection.ops.adapt_json_value(message.data, None), "seq": message.seq,
            "lease": message.turn_lease_until,
        },
    )  # fmt: skip
    message._state.adding = False
    message._state.db = connection.alias
    return message


# What finish_turn reads under the session's lock, and what it writes back.
_REPLY_CHECKS = """
SELECT empty_recall_streak, amnesia_alerted,
       (SELECT max(seq) FROM chat_message WHERE tenant_id = %(tenant)s AND session_id = %(session)s) AS last_seq
FROM chat_chatsession WHERE tenant_id = %(tenant)s AND id = %(session)s
"""
_FINISH_SESSION = """
UPDATE chat_chatsession
SET last_activity_at = %(now)s, context_reset_pending = false,
    empty_recall_streak = %(streak)s, amnesia_alerted = %(alerted)s
WHERE tenant_id = %(tenant)s AND id = %(session)s
"""


@contextmanager
def _session_locked(tenant: Tenant, session: ChatSession) -> Iterator[None]:
    """The tenant's scope, its transaction starting with the session's row
    lock (sent with its ``BEGIN``, in one round trip): the turns of one
    session store their messages one at a time, so ``seq`` never repeats."""
    lock = sql.SQL(_LOCK_SESSION).format(tenant=sql.Literal(tenant.pk), session=sql.Literal(session.pk))
    with tenant_scope(tenant, first=lock) as locked:
        if not locked:
            raise SessionNotFound("No such session.")  # deleted (with its tenant) since the turn began
        yield


@require_session_id
def store_user_message(
    tenant: Tenant, session: ChatSession, text: str, client_msg_id: str | None
) -> tuple[Message, Message | None]:
    """Store (or find) the user message; returns it and its stored reply if
    this ``client_msg_id`` was already answered. Rate limits are counted from
    the stored messages, so they hold across every worker process; a replay
    is not counted.

    A message with a ``client_msg_id`` is stored with the turn's lease (see
    ``Message.turn_lease_until``). A retry of an unanswered message takes the
    lease over when it has lapsed or was released (the first turn failed)
    and runs the turn again; while another turn holds it, ``TurnRunning``.
    The session's lock makes the take-over one retry's alone.

    Three round trips: the transaction's ``BEGIN`` with the session's lock;
    one read of everything the checks need (a replay's id, both rate limits,
    the last ``seq``); the insert with the session's ``last_activity_at``;
    then ``COMMIT``. The read must be a statement of its own, after the lock:
    a statement that waits for a row lock keeps the snapshot it started
    with, so its subqueries would miss the message a concurrent turn of this
    session has just committed (a duplicate ``seq``)."""
    per_session, per_tenant = _limits(tenant)
    ids = {"tenant": tenant.pk, "session": session.pk}
    with _session_locked(tenant, session):
        messages = Message.objects.for_tenant(tenant)
        state = fetch_row(
            _MESSAGE_CHECKS,
            {
                **ids, "client_msg_id": client_msg_id, "since": timezone.now() - timedelta(minutes=1),
                "session_skip": max(per_session - 1, 0), "tenant_skip": max(per_tenant - 1, 0),
            },
        )  # fmt: skip
        assert state is not None  # a SELECT without FROM always answers one row
        if state["replayed"] is not None:
            existing = messages.get(pk=state["replayed"])
            reply = (
                messages.filter(reply_to=existing, role=Message.Role.ASSISTANT, status=Message.Status.COMPLETE)
                .order_by("-seq")
                .first()
            )
            if reply is None and not _take_lease(tenant, existing):
                raise TurnRunning(str(existing.pk))
            return existing, reply
        if per_session <= 0 or state["session_full"] is not None:  # a limit of 0 refuses everything
            raise RateLimited(f"More than {per_session} messages a minute in this session; slow down.")
        if per_tenant <= 0 or state["tenant_full"] is not None:
            raise RateLimited(f"More than {per_tenant} messages a minute for this tenant; slow down.")
        now = timezone.now()
        message = Message(
            tenant=tenant, session=session, role=Message.Role.USER, text=text, client_msg_id=client_msg_id,
            seq=(state["last_seq"] or 0) + 1, created_at=now,
            turn_lease_until=now + timedelta(seconds=TURN_LEASE_S) if client_msg_id is not None else None,
        )  # fmt: skip
        return _insert_message(message, _TOUCH_SESSION, {**ids, "now": now}), None


_TAKE_LEASE = """
UPDATE chat_message SET turn_lease_until = %(until)s
WHERE tenant_id = %(tenant)s AND id = %(id)s AND (turn_lease_until IS NULL OR turn_lease_until < %(now)s)
"""
# Renewing keeps a lease only while it is still set: a released one stays released.
_RENEW_LEASE = """
UPDATE chat_message SET turn_lease_until = %(until)s
WHERE tenant_id = %(tenant)s AND id = %(id)s AND turn_lease_until IS NOT NULL
"""
_RELEASE_LEASE = "UPDATE chat_message SET turn_lease_until = NULL WHERE tenant_id = %(tenant)s AND id = %(id)s"


def _take_lease(tenant: Tenant, message: Message) -> bool:
    now = timezone.now()
    until = now + timedelta(seconds=TURN_LEASE_S)
    return execute(_TAKE_LEASE, {"tenant": tenant.pk, "id": message.pk, "now": now, "until": until}) == 1


def renew_lease(tenant: Tenant, message_id: Any) -> None:
    """Extend the running turn's claim on its message by ``TURN_LEASE_S``."""
    until = timezone.now() + timedelta(seconds=TURN_LEASE_S)
    with tenant_scope(tenant):
        execute(_RENEW_LEASE, {"tenant": tenant.pk, "id": message_id, "until": until})


def release_lease(tenant: Tenant, message_id: Any) -> None:
    """The turn ended without a complete reply: a retry may run it again at once."""
    with tenant_scope(tenant):
        execute(_RELEASE_LEASE, {"tenant": tenant.pk, "id": message_id})


# --- step 2–4: memory and prompt -------------------------------------------------


def _anchor_facts(memories: list[tuple[str, str]]) -> list[str]:
    """The anchor's facts from ``(key, content)`` rows, in ``ANCHOR_KEYS`` order."""
    by_key = {key: content for key, content in memories if key}
    return [by_key[k] for k in ANCHOR_KEYS if k in by_key]


def _memory_line(memory: MemoryUnit) -> str:
    return f"[{memory.type}] {memory.content}"


def _previous_reply_memories(tenant: Tenant, session: ChatSession, before_seq: int) -> tuple[Message | None, list]:
    reply = (
        Message.objects.for_tenant(tenant)
        .filter(session=session, role=Message.Role.ASSISTANT, seq__lt=before_seq)
        .exclude(status=Message.Status.FAILED)
        .order_by("-seq")
        .first()
    )
    if reply is None:
        return None, []
    return reply, list(reply.data.get("used", []))


@dataclass(frozen=True)
class _TurnState:
    """What ``prepare_turn`` reads before extraction, in one query."""

    session: ChatSession  # re-read: the topic and the reset flag change between turns
    end_user_id: str  # the tenant's own id for the end user
    context: ExecutionContext | None  # None before the session's first turn
    history: list[dict[str, Any]]  # role, text, used: the last SUMMARY_MESSAGES before the message, oldest first
    has_tools: bool


# The session row with its end user's id, its execution context, its recent
# messages (not failed ones) and whether the tenant has tools.
_TURN_STATE = """
SELECT s.*, u.external_id AS end_user_external_id,
       (SELECT jsonb_build_object('current_tool', c.current_tool, 'tool_args', c.tool_args,
                                  'last_tool_result', c.last_tool_result, 'session_variables', c.session_variables)
        FROM chat_executioncontext c WHERE c.tenant_id = s.tenant_id AND c.session_id = s.id) AS context_fields,
       EXISTS (SELECT 1 FROM chat_tool t WHERE t.tenant_id = s.tenant_id) AS has_tools,
       ARRAY(SELECT jsonb_build_object('role', m.role, 'text', m.text, 'used', m.data -> 'used')
             FROM chat_message m
             WHERE m.tenant_id = s.tenant_id AND m.session_id = s.id AND m.seq < %(before)s AND m.status <> 'failed'
             ORDER BY m.seq DESC LIMIT %(limit)s) AS recent
FROM chat_chatsession s JOIN tenants_enduser u ON u.tenant_id = s.tenant_id AND u.id = s.end_user_id
WHERE s.tenant_id = %(tenant)s AND s.id = %(session)s
"""


def _json(value: Any) -> Any:
    """A jsonb value read outside a model field (Django's driver setup leaves it as text)."""
    return json.loads(value) if isinstance(value, str) else value


def _turn_state(tenant: Tenant, session: ChatSession, before_seq: int) -> _TurnState:
    """Everything ``prepare_turn`` needs before extraction, in one round trip
    instead of five (``load_models`` still converts the session's own fields)."""
    params = {"tenant": tenant.pk, "session": session.pk, "before": before_seq, "limit": SUMMARY_MESSAGES}
    rows = load_models(ChatSession, _TURN_STATE, params)  # not cross-tenant: the SQL names the tenant
    if not rows:
        raise SessionNotFound("No such session.")
    fresh = rows[0]
    fresh.tenant = tenant
    fields = _json(fresh.context_fields)
    context = None if fields is None else ExecutionContext(session=fresh, tenant=tenant, **fields)
    history = [_json(row) for row in reversed(fresh.recent)]
    return _TurnState(fresh, fresh.end_user_external_id, context, history, bool(fresh.has_tools))


def _previously_used(tenant: Tenant, state: _TurnState, before_seq: int) -> list[str]:
    """The memories the agent's previous reply used (their ids), for the
    user's reaction to it. That reply is nearly always among the recent
    messages; only a long run of tool messages or unanswered messages since
    needs a query of its own."""
    for row in reversed(state.history):
        if row["role"] == Message.Role.ASSISTANT:
            return _used_ids(row["used"])
    if len(state.history) < SUMMARY_MESSAGES:
        return []  # the whole session is in the history: no reply yet
    return _previous_reply_memories(tenant, state.session, before_seq)[1]


def _used_ids(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


@require_session_id
def prepare_turn(tenant: Tenant, session: ChatSession, message: Message, context_size: int) -> PreparedTurn:
    """Steps 2–4: extraction and feedback, recall, and the prompt."""
    with tenant_scope(tenant):
        query_embedding = embed_query_soon(tenant, message.text)  # overlaps the extraction below
        state = _turn_state(tenant, session, message.seq)
        session = state.session
        previously_used = _previously_used(tenant, state, message.seq)
        before = state.history[-1]["text"] if state.history else ""
        extraction = extract_and_store(tenant, session, message, previous_text=before, ask_model=structured_answer)
        _feedback_from_user(tenant, extraction, previously_used)

        result = recall(tenant, session, message.text, k=RECALL_K, embedding=query_embedding, record=False)
        profile = fetch_rows(
            _ANCHOR_SQL,
            {
                **memory_services.scope_params(tenant, session, timezone.now()), "keys": list(ANCHOR_KEYS),
                "recalled": [h.memory.pk for h in result.hits],
            },
        )  # fmt: skip
        # Secrets a user typed never travel on into later prompts (S6's red line).
        turns = [
            (m["role"], redact(m["text"]))
            for m in state.history
            if m["role"] in (Message.Role.USER, Message.Role.ASSISTANT)
        ]
        context = state.context or execution_context(tenant, session)  # for sessions opened before it was made at open
        parts = prompt_mod.PromptParts(
            role_text=tenant.agent_role,
            anchor_facts=_anchor_facts(profile),
            execution_context=context.as_dict(),
            summary=summarize(turns, language=tenant.language) if turns else "",
            memories=[_memory_line(h.memory) for h in result.hits],
            recent_turns=turns[-RECENT_MESSAGES:],
            user_input=message.text,
            context_reset=session.context_reset_pending,
            needs_confirmation=result.needs_confirmation,
            language=tenant.language,
            forgotten=extraction.forgotten,
        )
        tools = {t.name: t for t in Tool.objects.for_tenant(tenant).order_by("name")} if state.has_tools else {}
        built = prompt_mod.build_prompt(
            parts, context_size=context_size, reply_reserve=REPLY_RESERVE,
            tools=tools_mod.ollama_tools(list(tools.values())) or None,
        )  # fmt: skip
        rule_or_vector_empty = not result.hits
        return PreparedTurn(
            prompt=built,
            recalled=[str(h.memory.pk) for h in result.hits],
            needs_confirmation=result.needs_confirmation,
            recall_empty=rule_or_vector_empty,
            context_size=context_size,
            parts=parts,
            tools=tools,
            end_user_id=state.end_user_id,
            recalled_memories=[h.memory for h in result.hits],
            previous_text=before,
        )


def _feedback_from_user(tenant: Tenant, extraction: Any, previously_used: list[str]) -> None:
    """The user's reaction to what the agent said last turn (S13):
    a confirmation confirms the memories it used (never lowers a score); a
    correction of one of them counts as ``misled`` (−0.3)."""
    if not previously_used or not (extraction.changed_keys or extraction.confirmation):
        return  # neither a correction nor a confirmation: nothing to record
    used = MemoryUnit.objects.for_tenant(tenant).filter(pk__in=previously_used).values_list("pk", "key")
    changed = set(extraction.changed_keys)
    misled = [pk for pk, key in used if key and key in changed]
    memory_services.apply_feedback(tenant, misled, "misled", note="the user corrected it")
    if extraction.confirmation:
        confirmed = [pk for pk, key in used if not (key and key in changed)]
        memory_services.apply_feedback(tenant, confirmed, "confirmed", note="the user confirmed it")


def _used_memories(reply: str, memories: list[MemoryUnit]) -> list[MemoryUnit]:
    """A recalled memory counts as used when its value shows up in the reply:
    a structured value (``data``) or, for free-text memories, a distinctive
    token of its content (a code, a number, a name of 2+ characters)."""
    used = []
    folded = reply.casefold()
    for memory in memories:
        values = [str(v) for v in (memory.data or {}).values() if isinstance(v, str | int | float) and str(v).strip()]
        if not values:
            values = re.findall(r"[A-Za-z]*\d[\w-]{2,}|[A-Z][A-Z0-9-]{3,}", memory.content)
        if any(len(v) >= 2 and v.casefold() in folded for v in values):
            used.append(memory)
    return used


@require_session_id
def finish_turn(
    tenant: Tenant,
    session: ChatSession,
    message: Message,
    reply_id: str,
    text: str,
    prepared: PreparedTurn,
    usage: dict[str, int],
    *,
    status: str = Message.Status.COMPLETE,
) -> Message:
    """Step 6: store the reply, extract what the agent stated, feedback."""

    with _session_locked(tenant, session):
        ids = {"tenant": tenant.pk, "session": session.pk}
        current = fetch_row(_REPLY_CHECKS, ids)  # after the lock, in a statement of its own (see store_user_message)
        assert current is not None  # the row is locked
        recalled = prepared.recalled_memories
        if recalled is None:  # a PreparedTurn made by hand
            recalled = list(MemoryUnit.objects.for_tenant(tenant).filter(pk__in=prepared.recalled))
        used = _used_memories(text, recalled)
        reply = Message(
            id=uuid.UUID(reply_id), tenant=tenant, session=session, role=Message.Role.ASSISTANT, text=text,
            reply_to=message, status=status, seq=(current["last_seq"] or 0) + 1, created_at=timezone.now(),
            data={
                "recalled": prepared.recalled, "used": [str(m.pk) for m in used],
                "needs_confirmation": prepared.needs_confirmation, "usage": usage,
                "recall_empty": prepared.recall_empty, "trimmed": prepared.prompt.trimmed,
            },
        )  # fmt: skip
        streak, phrase = _amnesia_check(reply.text, prepared.recall_empty, current)
        alerted = phrase is not None or (streak > 0 and current["amnesia_alerted"])  # one alert per streak
        # The used memories' feedback goes in the same statement; a memory deleted since it was recalled is skipped.
        feedback = memory_services.feedback_sql(
            tenant, [m.pk for m in used], "used", note=f"value appears in reply {reply.pk}"
        )
        finish = {**ids, "now": reply.created_at, "streak": streak, "alerted": alerted}
        _insert_message(reply, _FINISH_SESSION, finish, feedback)
        if phrase:
            _amnesia_alert(tenant, session, reply, phrase)
        if status == Message.Status.COMPLETE and text:
            extract_and_store(tenant, session, reply, previous_text=message.text)
    return reply


def _amnesia_check(reply_text: str, recall_empty: bool, current: dict[str, Any]) -> tuple[int, str | None]:
    """Seed S8: the third consecutive turn where neither recall stage found
    anything, with a reply that admits forgetting, fires one alert (and only
    one per streak). ``current`` holds the session's ``empty_recall_streak``
    and ``amnesia_alerted``, read under its lock. Returns the new streak and
    the phrase that fires the alert (None: no alert this turn)."""
    if not recall_empty:
        return 0, None
    streak = current["empty_recall_streak"] + 1
    phrase = amnesia_phrase(reply_text) if streak >= 3 and not current["amnesia_alerted"] else None
    return streak, phrase or None


def _amnesia_alert(tenant: Tenant, session: ChatSession, reply: Message, phrase: str) -> None:
    AmnesiaAlert.objects.create(tenant=tenant, session=session, message=reply, phrase=phrase)
    metrics.AMNESIA_ALERTS.labels(tenant=tenant.slug).inc()
    logger.warning("amnesia alert in session %s (tenant %s): %r", session.pk, tenant.slug, phrase)


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
    )


# --- the whole turn -------------------------------------------------------------


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


async def _store(
    tenant: Tenant, session: ChatSession, text: str, client_msg_id: str | None
) -> tuple[Message, Message | None]:
    """Step 1; a retry of a turn still running waits for it (``TURN_WAIT_S``, polling without holding a
    connection) and then gets its stored reply, or runs the turn itself if the first one failed or died."""
    store = unit_of_work(store_user_message)
    deadline = time.monotonic() + TURN_WAIT_S
    while True:
        try:
            return await _timed("store", store(tenant, session, text, client_msg_id))
        except TurnRunning as running:
            if time.monotonic() >= deadline:
                raise TurnInProgress(running.message_id, retry_after=max(1, round(TURN_LEASE_S / 3))) from None
        except DATABASE_UNAVAILABLE as exc:
            raise _database_failed(exc, None) from exc
        await asyncio.sleep(TURN_POLL_S)


async def _keep_lease(tenant: Tenant, message: Message) -> None:
    renew = unit_of_work(renew_lease)
    while True:
        await asyncio.sleep(TURN_LEASE_S / 3)
        try:
            await renew(tenant, message.pk)
        except Exception:  # a missed renewal only shortens the claim; the turn goes on
            logger.warning("could not renew the lease of turn %s", message.pk, exc_info=True)


async def _answer(
    tenant: Tenant,
    session: ChatSession,
    message: Message,
    llm: OllamaChat,
    on_delta: Delta | None,
    arrived: float,
) -> tuple[TurnResult, Message, PreparedTurn]:
    """Steps 2–6 for a stored user message: the result, the stored reply and what the prompt was built from."""
    try:
        context_size = await llm.context_size()
    except LLMError as exc:
        raise _failed(exc, message) from exc
    prepared = await _timed("prepare", unit_of_work(prepare_turn)(tenant, session, message, context_size))

    reply_id = str(uuid.uuid4())
    pieces: list[str] = []
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    exchange: list[dict[str, Any]] = []
    rounds = 0
    started = time.perf_counter()
    try:
        while True:
            offered = prepared.tool_definitions() if rounds < MAX_TOOL_ROUNDS else None
            usage["prompt_tokens"] += prepared.prompt.prompt_tokens
            metrics.PROMPT_TOKENS.observe(prepared.prompt.prompt_tokens)
            round_pieces: list[str] = []
            calls: list[dict[str, Any]] = []
            async with aclosing(llm.stream(prepared.prompt.messages, num_ctx=context_size, tools=offered)) as stream:
                async for chunk in stream:
                    if chunk.text:
                        if not pieces:
                            metrics.OLLAMA_TTFT.observe(time.perf_counter() - started)
                        pieces.append(chunk.text)
                        round_pieces.append(chunk.text)
                        if on_delta is not None:
                            await on_delta(reply_id, chunk.text)
                    calls.extend(chunk.tool_calls)
                    if chunk.done:
                        usage["completion_tokens"] += chunk.completion_tokens or 0
            if not calls or offered is None:
                break  # calls for tools that were not offered are ignored
            rounds += 1
            exchange.append({"role": "assistant", "content": "".join(round_pieces), "tool_calls": calls})
            context = None
            for index, call in enumerate(calls):
                # Shielded: a client that goes away mid-call does not leave the
                # execution context half-updated; the call's answer is recorded.
                context, answer = await asyncio.shield(
                    run_tool_call(tenant, session, message, prepared, call, round_no=rounds, index=index)
                )
                exchange.append(answer)
            assert context is not None
            prepared = rebuild_prompt(
                prepared, context, exchange, reply_reserve=REPLY_RESERVE, offer_tools=rounds < MAX_TOOL_ROUNDS
            )
    except LLMError as exc:
        logger.warning("turn %s: model failed: %s", message.pk, exc)
        raise _failed(exc, message) from exc
    except asyncio.CancelledError:
        # The client went away: generation stops (the stream is closed by
        # aclosing) and what was produced is kept, marked partial.
        partial = "".join(pieces)
        if partial:
            await asyncio.shield(
                unit_of_work(finish_turn)(
                    tenant, session, message, reply_id, partial, prepared, usage, status=Message.Status.PARTIAL
                )
            )
        raise
    generation = time.perf_counter() - started
    metrics.OLLAMA_LATENCY.observe(generation)
    reply_text = "".join(pieces)
    reply = await _timed(
        "finish", unit_of_work(finish_turn)(tenant, session, message, reply_id, reply_text, prepared, usage)
    )
    metrics.TURN_OVERHEAD.observe(time.perf_counter() - arrived - generation)
    result = TurnResult(
        message_id=str(message.pk),
        reply_id=reply_id,
        reply=reply_text,
        recalled=prepared.recalled,
        needs_confirmation=prepared.needs_confirmation,
        usage=usage,
        trimmed=prepared.prompt.trimmed,
    )
    return result, reply, prepared


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
    health check (``memory.health``, at most once a minute per process)
    before it returns, so a WebSocket's ``done`` frame never waits for them.

    When the tenant has tools, the model is offered them; each round of tool
    calls it makes is run (:func:`run_tool_call`) and the model is called
    again with the answers, at most ``MAX_TOOL_ROUNDS`` rounds. ``usage``
    adds up every model call of the turn."""
    arrived = time.perf_counter()
    text, client_msg_id = check_message(text, client_msg_id)
    message, stored_reply = await _store(tenant, session, text, client_msg_id)
    if on_ack is not None:
        await on_ack(str(message.pk))
    if stored_reply is not None:
        result = replay(tenant, message, stored_reply)
        if on_delta is not None:
            await on_delta(result.reply_id, result.reply)
        if on_done is not None:
            await on_done(result)
        return result

    leased = message.client_msg_id is not None
    renewer = asyncio.create_task(_keep_lease(tenant, message)) if leased else None
    answered = False
    try:
        result, reply, prepared = await _answer(tenant, session, message, llm or get_llm(), on_delta, arrived)
        answered = True
    except DATABASE_UNAVAILABLE as exc:
        raise _database_failed(exc, message) from exc
    finally:
        if renewer is not None:
            renewer.cancel()
        if leased and not answered:
            try:  # shielded: a client that went away still frees its message for a retry
                await asyncio.shield(unit_of_work(release_lease)(tenant, message.pk))
            except Exception:  # the database is down too: the lease lapses by itself
                logger.warning("could not release the lease of turn %s", message.pk, exc_info=True)
    if on_done is not None:
        await on_done(result)
    # After the reply is out: the turn's messages become conversation memory. A failure (or a process that
    # dies here) leaves them unmarked, and the worker's sweep (memory.conversation.index_pending) writes them.
    try:
        index = unit_of_work(index_messages)
        await _timed("index", index(tenant, session, [message, reply], previous_text=prepared.previous_text))
    except Exception:
        logger.exception("indexing the messages of turn %s failed; the worker's sweep retries", message.pk)
    if check_due(tenant):
        try:
            await unit_of_work(check_after_turn)(tenant)
        except Exception:  # the turn itself succeeded and its reply is out
            logger.exception("memory health check after a turn of tenant %s failed", tenant.slug)
    return result


def list_messages(
    tenant: Tenant, session: ChatSession, *, before: Any = None, limit: int = 50, include_tool: bool = False
) -> tuple[list, bool]:
    """A page of the session's messages, newest page first, oldest first
    within the page; ``has_more`` when older messages exist. Tool-call audit
    messages only with ``include_tool`` (the tenant's API, not the end
    user's chat history)."""
    with tenant_scope(tenant):
        qs = Message.objects.for_tenant(tenant).filter(session=session)
        if not include_tool:
            qs = qs.exclude(role=Message.Role.TOOL)
        if before is not None:
            anchor = qs.filter(pk=before).first()
            if anchor is None:
                raise ApiError("before must be the id of a message of this session", code="invalid_request")
            qs = qs.filter(seq__lt=anchor.seq)
        page = list(qs.order_by("-seq")[: limit + 1])
    has_more = len(page) > limit
    return page[:limit][::-1], has_more


def serialize_message(message: Message) -> dict[str, Any]:
    return {
        "id": str(message.pk),
        "role": message.role,
        "text": message.text,
        "status": message.status,
        "client_msg_id": message.client_msg_id,
        "reply_to": str(message.reply_to_id) if message.reply_to_id else None,
        "created_at": message.created_at.isoformat().replace("+00:00", "Z"),
    }
