"""Conversation memory: every message of a chat becomes recallable units.

The rules (``memory.extraction.rules``) recognise phones, orders, addresses and the like; most of what customers and
agents say is none of those ("my birthday is in March", 「您的积分还有两千三」, "I painted a sunset last week").
So after each turn, every user message and every reply is also stored as **conversation units**:

* the message, redacted and cleaned of fillers, split into semantic units of at most 150 characters —
  sentence boundaries first, then clause boundaries; a clause still too long is compressed
  (``memory.text.compression.compress`` keeps every entity, number and code), never cut with ``text[:n]``;
* type ``fact_reference`` (a statement of fact about the world the conversation refers to, the seed's
  semantic layer), scoped to the end user so a customer who comes back in a new session finds it; it lives
  ``conversation_memory_days`` (tenant setting, default 90: long enough for a customer who returns after a
  month);
* keyed by a hash of its text: the same sentence said again refreshes the unit (one live row per distinct
  text and end user) instead of storing a copy;
* linked to its source message and role, embedded and indexed like any memory, with lexical context: its own
  message and the one before it (the request it answers), and, a level lower, the turns before those
  (``AROUND_MESSAGES``: the route, the venue or the day a booking reference was for) — for finding only,
  never part of its content (``memory.store.indexing``);
* ``data["facts"]`` holds the current-state facts (``STATEFUL_KEYS``) the unit states, so recall can tell
  a unit that states a superseded or expired value (the old address) from one that is still true.

Units are written after the reply is complete (the reply never waits for them); a message is marked
``memory_indexed_at`` in the same transaction as its units, so a process that dies in between leaves the
message unmarked and :func:`index_pending` (run by the background worker at start and every minute) writes
what is missing. Nothing here calls a model: embeddings are the store's own.
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from config.db.sql import load_models
from conversations.access import require_session_id
from conversations.models import ChatSession, Message
from memory.conversation.claims import claim_of, states_criterion
from memory.conversation.supersede import about_data, supersede_older, validity_seconds
from memory.conversation.terms import states_choice, states_choice_zh
from memory.embeddings import models as embeddings
from memory.extraction.rules import extract_facts
from memory.models import MAX_CONTENT, MemoryType
from memory.store import audit
from memory.store import write as store
from memory.store.consent import memory_enabled_for_session
from memory.text.compression import clean, compress, is_filler
from memory.text.language import detect_language, has_cjk
from memory.text.phones import written_forms
from memory.text.redaction import redact
from tenants.models import Tenant
from tenants.rls import tenant_scope

logger = logging.getLogger(__name__)

UNIT_TYPE = MemoryType.FACT_REFERENCE.value
KEY_PREFIX = "conversation:"
DEFAULT_RETENTION_DAYS = 90
MAX_RETENTION_DAYS = 3650
#: Keyed facts whose newer value makes an older one untrue (a person has one current phone, address,
#: points balance …). A unit stating such a value is stale once the live keyed fact says otherwise or has
#: expired; an order number or a mentioned date is history, never stale.
STATEFUL_KEYS = frozenset(
    {
        "name", "phone", "email", "address", "birthday", "coupon", "points_balance", "membership", "account_id",
        "ship_date", "delivery_date", "pickup_time", "appointment", "renewal_date", "expiry_date", "callback",
        "batch_progress",
    }
)  # fmt: skip
# Marks the messages not yet indexed, and names them; rows another transaction is marking wait for it.
_MARK_SQL = """
UPDATE chat_message SET memory_indexed_at = %(now)s
WHERE tenant_id = %(tenant)s AND id = ANY(%(ids)s) AND memory_indexed_at IS NULL
RETURNING id
"""
#: The transaction that writes conversation units commits without waiting for its WAL to reach the disk
#: (PostgreSQL's asynchronous commit; the WAL writer flushes it within ``3 × wal_writer_delay``). A crash in
#: that window loses the transaction whole — the units and their messages' marks together, never one without
#: the other — and the sweep (``index_pending``) writes them again. Nothing is lost; the turns' own commits
#: (the messages, the keyed facts) stay synchronous, and stop sharing each fsync with the units' larger WAL.
_ASYNC_COMMIT_SQL = "SET LOCAL synchronous_commit TO off"


def _mark(tenant: Tenant, ids: Sequence[Any]) -> set[Any]:
    """Mark ``ids`` indexed (those not yet marked), the first write of the units' transaction, committed
    asynchronously (``_ASYNC_COMMIT_SQL``); returns the ids it marked. Call inside the tenant's scope."""
    with connection.cursor() as cursor:
        cursor.execute(_ASYNC_COMMIT_SQL)
        cursor.execute(_MARK_SQL, {"tenant": tenant.pk, "ids": list(ids), "now": timezone.now()})
        return {row[0] for row in cursor.fetchall()}


#: Stateful keys whose fact simply runs out of its lifetime without becoming untrue (a phone number not
#: repeated for a month): only a different current value makes a unit stating them stale. For the other
#: stateful keys (a coupon, a callback, a pickup slot) the fact's end is the value's end.
TIMELESS_KEYS = frozenset({"name", "phone", "email", "address", "birthday", "account_id", "membership"})
#: The words of a question about each stateful key's value (「电话」, 「积分」, "deliver"). A unit stating a
#: value that is no longer current is out of date for a question about that value — and only for one: the
#: work order number in the sentence that also gave the old phone is still the work order number. Keys of
#: events (dates, progress) are said of many things at once (a coupon's expiry and the points' expiry are
#: both ``expiry_date``), so their words are the event's.
KEY_TOPICS: dict[str, re.Pattern[str]] = {
    key: re.compile(pattern, re.IGNORECASE)
    for key, pattern in {
        "name": r"名字|姓名|叫什么|称呼|\bname\b|called",
        "phone": r"电话|手机|号码|联系方式|打给|\bphone|\bnumber\b|\bmobile\b|\bcall\b",
        "email": r"邮箱|邮件|e-?mail",
        "address": r"地址|寄到|寄往|送到|送往|收货|收件|住址|住在|\baddress|ship(?:ped|ping)? to|deliver(?:ed)? to",
        "birthday": r"生日|出生|birthday|\bborn\b",
        "coupon": r"券|优惠|coupon|voucher|promo",
        "points_balance": r"多少个?积分|积分(?:余额|还有|有多少|还剩|剩|够|是多少)|余额|how many points|balance",
        "membership": r"会员|membership|\bmember\b|\bplan\b",
        "account_id": r"账号|账户|帐号|\baccount",
        "ship_date": r"发货|发出|寄出|\bship",
        "delivery_date": r"到货|送达|到达|签收|什么时候到|几号到|哪天到|\bdeliver|\barriv",
        "pickup_time": r"取件|取货|自提|pick ?up",
        "appointment": r"预约|上门|约的|约在|appointment|\bvisit\b|technician",
        "renewal_date": r"续费|续约|续保|续订|\brenew",
        "expiry_date": r"到期|过期|有效期|能用到|用到什么时候|\bexpir|valid until|\bvalid\b",
        "callback": r"回电|回电话|回访|回复我|call (?:me )?back|callback",
        "batch_progress": r"进度|导入|导完|完成|处理到|\bbatch|progress|\bimport",
    }.items()
}


#: Stateful keys of events (a date, a callback, a batch's progress): the same key is said of several things
#: (the coupon's expiry, the membership's), so a newer value of the key may be another thing's. A unit's
#: value of one is out of date only for a question about the present (「后来改到哪天」, 「现在预计什么时候到」).
EVENT_KEYS = frozenset(
    {"ship_date", "delivery_date", "pickup_time", "appointment", "renewal_date", "expiry_date", "callback",
     "batch_progress"}
)  # fmt: skip


def asks_about(query: str, key: str, *, about_now: bool = True) -> bool:
    """Whether ``query`` asks about the value of the stateful ``key`` (its words are in it); for a key of
    ``EVENT_KEYS``, only when it asks how things stand now (``about_now``)."""
    topic = KEY_TOPICS.get(key)
    return bool(topic and topic.search(query)) and (about_now or key not in EVENT_KEYS)


#: A unit's wider context (``search_around``): the messages before the one its message answers, at most this
#: many (two exchanges). The reference of 「Booking was successful, reference number is I4012ZAZ」 is for the
#: train the customer named two or three turns earlier, not in the "yes, book it" just before it.
AROUND_MESSAGES = 4

#: Messages younger than this are left to the turn that is writing them (``index_pending``).
SETTLE = timedelta(seconds=60)

_SENTENCE = re.compile(r"(?<=[.!?…])\s+|(?<=[。！？；\n])")
_CLAUSE = re.compile(r"(?<=[,;:，；：、])\s*|\s+(?=[—–])")
_SPACE = re.compile(r"\s+")
#: Acknowledgements that state nothing (「已记下」, "noted"): a unit made only of these (and punctuation) is
#: not stored. ``is_filler`` covers greetings and thanks; these are the agent's receipts.
_ACKNOWLEDGEMENT = re.compile(
    r"好的|好|嗯+|收到|已?记下了?|记住了|已记录|明白了?|了解了?|没问题|可以的?|行|是的|对的?|"
    r"(?i:ok(?:ay)?|noted|got it|sure|understood|will do|all right|alright|yes|right|great|perfect|fine)",
)
_NOISE = re.compile(r"[\s\W_]+")


def _joiner(left: str, right: str) -> str:
    """Latin pieces are joined with a space, CJK ones directly."""
    return "" if detect_language(left[-1:] + right[:1]) == "zh" else " "


def _pack(pieces: list[str], limit: int) -> list[str]:
    """Greedily join consecutive pieces into units of at most ``limit`` characters."""
    units: list[str] = []
    current = ""
    for piece in pieces:
        candidate = f"{current}{_joiner(current, piece)}{piece}" if current else piece
        if len(candidate) <= limit:
            current = candidate
            continue
        if current:
            units.append(current)
        current = piece
    if current:
        units.append(current)
    return units


def _fit(sentence: str, limit: int) -> list[str]:
    """A sentence as pieces of at most ``limit`` characters: itself, its clauses, or a clause compressed."""
    if len(sentence) <= limit:
        return [sentence]
    pieces: list[str] = []
    for clause in (c.strip() for c in _CLAUSE.split(sentence)):
        if not clause:
            continue
        pieces.append(clause if len(clause) <= limit else compress(clause, limit=limit))
    return [p for p in pieces if p]


def split_units(text: str, *, limit: int = MAX_CONTENT) -> list[str]:
    """The semantic units of one message: redacted, fillers removed, split at sentence and then clause
    boundaries into units of at most ``limit`` characters (consecutive short sentences share a unit). A
    message that is only filler or politeness (「好的，谢谢」, "OK.") has none. Pure."""
    text = _SPACE.sub(" ", redact(text or "")).strip()
    if not text or is_filler(text):
        return []
    sentences: list[str] = []
    for raw in _SENTENCE.split(text):
        raw = raw.strip()
        if not raw or is_filler(raw):
            continue
        sentence = clean(raw)
        if sentence:
            sentences.extend(_fit(sentence, limit))
    return [u for u in _pack(sentences, limit) if u and len(u) <= limit and not _says_nothing(u)]


def _says_nothing(unit: str) -> bool:
    """A unit that is only acknowledgement and punctuation."""
    return not _NOISE.sub("", _ACKNOWLEDGEMENT.sub("", unit))


def unit_key(content: str) -> str:
    """The unit's key: one live unit per distinct text and end user (a repeat refreshes it)."""
    normalised = _SPACE.sub("", content).casefold()
    return KEY_PREFIX + hashlib.blake2b(normalised.encode(), digest_size=8).hexdigest()


def is_conversation_key(key: str | None) -> bool:
    return bool(key) and key.startswith(KEY_PREFIX)


def retention_seconds(tenant: Tenant) -> int:
    """How long a conversation unit lives: the tenant's ``conversation_memory_days`` (1 to 3650), else 90
    days. A bad setting falls back to the default rather than failing a turn (the admin validates it)."""
    raw = tenant.settings.get("conversation_memory_days") if isinstance(tenant.settings, dict) else None
    days = raw if isinstance(raw, int) and not isinstance(raw, bool) and 1 <= raw <= MAX_RETENTION_DAYS else None
    return (days or DEFAULT_RETENTION_DAYS) * 86400


def squash(value: str) -> str:
    """``value`` without spaces, dashes and brackets, case-folded: how a fact's value is compared with text."""
    return re.sub(r"[\s\-()（）]", "", value).casefold()


def _stated_facts(text: str, role: str, now: datetime) -> list[tuple[str, str, list[str]]]:
    """The current-state facts a message states, as ``(key, value, marks)``, by the same rules as
    extraction; ``marks`` are how the fact reads in the text (its value, the words of a date, a task id)."""
    try:
        facts = extract_facts(text, role=role, now=now)
    except Exception:  # a rule bug must not lose the message's units; extraction logs it too
        return []
    stated = []
    for fact in facts:
        if fact.key not in STATEFUL_KEYS:
            continue
        marks = [fact.value, *(str(fact.data.get(f, "")) for f in ("text", "task_id", "display"))]
        if fact.key == "phone":
            marks += written_forms(fact.value)  # "415-555-0132" says +14155550132
        stated.append((fact.key, fact.value, [m for m in (squash(m) for m in marks) if len(m) >= 2]))
    return stated


#: A unit that asks rather than states (「我的积分有多少了？」, "when does it ship?"): kept, for its words and
#: context, but recall ranks it below statements (``MEMDESK_RECALL["question_weight"]``) — the answer
#: is what the model needs.
_QUESTION = re.compile(
    r"[?？]\s*$|(?:[吗么呢啥]|哪了|了没|如何|咋样|怎样)[\s。！!]*$|(?:多少|几[点号天个次]|什么|哪[里儿个天]|怎么|是不是|有没有|能不能|可不可以)[^，。,.]{0,6}$"
    r"|^(?i:(?:\w+:\s*)?(?:what|when|where|who|whom|which|why|how|is|are|do|does|did|can|could|will|would|have|has)\b)"
)


def is_question(unit: str) -> bool:
    return bool(_QUESTION.search(unit.strip()))


#: A unit that changes or corrects something said before (「已更正为…」, 「不是东十二舍，是西十二舍」, "changed
#: to"): recall lets it overtake older units on the same matter (``memory.recall.currency.overtaken``).
_UPDATE = re.compile(
    r"更正|改为|改成|改到|更新为|更新成|调整为|调整到|换成|换到|变更为|变为|变成|涨为|涨到|涨至|降为|降到|降至|"
    r"推迟到|提前到|不再|说错|搞错|写错|不对|"
    r"升级[为至到]|已升级|已取消|取消了|作废|已结案|"
    r"(?i:\b(?:changed|updated|corrected|moved|rescheduled|postponed|instead|no longer|actually|cancel(?:l)?ed|"
    r"upgraded|switched)\b)"
)


#: "Keep you updated", "stay updated": to be told what happens, not a change of anything said.
_KEPT_INFORMED = re.compile(r"(?i)\b(?:keep|keeps|keeping|kept|stay|stays|staying)\s+(?:\w+\s+)?updated\b")


def is_update(unit: str) -> bool:
    return bool(_UPDATE.search(_KEPT_INFORMED.sub(" ", unit)))


@dataclass(frozen=True)
class _Unit:
    content: str
    facts: dict[str, str]
    question: bool = False
    update: bool = False


def _states_request(content: str, now: datetime) -> bool:
    """Whether a customer's question makes a request: in English it states a choice
    (``memory.conversation.terms.states_choice``), in Chinese it gives a criterion — a value's range or bound
    (「有没有4.5分以上的餐馆？」, 「最低价格700-800元的经济型酒店吗？」, 「有能玩3小时 - 4小时的地方吗」); a question
    that merely names a number (「又要等5天啊 那这几天我衣服怎么洗」) still asks."""
    if has_cjk(content):
        return (states_criterion(content) and bool(claim_of(content, now).values)) or states_choice_zh(content)
    return states_choice(content)


def message_units(text: str, role: str, now: datetime) -> list[_Unit]:
    """The units of one message with the stateful facts each states (a fact belongs to the unit whose text
    shows it) and whether it is a question."""
    units = split_units(text)
    if not units:
        return []
    stated = _stated_facts(text, role, now)
    out = []
    for content in units:
        squashed = squash(content)
        facts = {key: value for key, value, marks in stated if any(m in squashed for m in marks)}
        # The customer's request put as a question states what they want ("How about Spanish food?", 「有价格
        # 700-800元的经济型酒店吗？」): a choice or a criterion of theirs is not a question only its answer answers.
        question = is_question(content) and not facts and not (role == "user" and _states_request(content, now))
        out.append(_Unit(content, facts, question=question, update=is_update(content)))
    return out


#: The roles whose messages become conversation units. A staff member's reply (a person took over,
#: chat.handoff.state) is indexed like the AI's: what they promised is recalled once the AI answers again.
INDEXED_ROLES = (Message.Role.USER, Message.Role.ASSISTANT, Message.Role.STAFF)


#: The texts of the messages before a message in its session (tool results aside), newest first: its units'
#: lexical context. The one definition, read with the messages by the writer and on its own by
#: :func:`index_messages`.
_BEFORE = f"""
    SELECT p.text FROM chat_message p
    WHERE p.tenant_id = m.tenant_id AND p.session_id = m.session_id AND p.seq < m.seq AND p.role <> 'tool'
    ORDER BY p.seq DESC LIMIT {AROUND_MESSAGES + 1}
"""  # noqa: S608 - our own constants, no input
_HISTORY_SQL = f"SELECT ARRAY({_BEFORE}) FROM chat_message m WHERE m.tenant_id = %(tenant)s AND m.id = %(id)s"  # noqa: S608


def _history(tenant: Tenant, message: Message, previous_text: str) -> list[str]:
    """The texts before ``message`` in its session, newest first (``previous_text`` when none are stored: a
    caller's message that is not)."""
    with connection.cursor() as cursor:
        cursor.execute(_HISTORY_SQL, {"tenant": tenant.pk, "id": message.pk})
        row = cursor.fetchone()
    texts = list(row[0]) if row and row[0] else []
    return texts or ([previous_text] if previous_text else [])


@require_session_id
def index_messages(
    tenant: Tenant,
    session: ChatSession,
    messages: Sequence[Message],
    *,
    previous_text: str = "",
    history: Sequence[str] | None = None,
) -> int:
    """Write the conversation units of ``messages`` (of ``session``, in order) and mark each message
    indexed, in one transaction: either a message has all its units and its mark, or neither. Messages
    already marked are skipped, so calling it twice writes nothing twice. The messages before the first one
    (lexical context of its units) are read from the session unless ``history`` gives them (newest first, as
    ``texts_before`` reads them); ``previous_text``, the message before it, stands in when none is stored.
    Returns how many units were written or refreshed."""
    ttl = retention_seconds(tenant)
    # A staff message's caller indexes it; the sweep (``index_pending``) reads user and assistant messages only.
    ids = [m.pk for m in messages if m.role in INDEXED_ROLES]
    with tenant_scope(tenant):
        # Marked first, in the transaction that writes the units: a concurrent writer of the same messages
        # waits on the rows and then finds them marked; a failure below rolls the marks back with the units.
        pending = _mark(tenant, ids)
        if not memory_enabled_for_session(tenant, session):
            # Memory is off for this end user (memory.store.consent): the messages are marked with no units, so
            # what was said meanwhile is not remembered later either (nor retried by the sweep).
            return 0
        if history is None:
            history = _history(tenant, messages[0], previous_text) if messages else []
        items = _unit_items(messages, pending, history, ttl)
        # One batch for the turn: one embedding call and one INSERT for both messages' units.
        results = store.write_memories(tenant, session, items) if items else []
        supersede_older(tenant, _created(results))
        return len(results)


def _unit_items(
    messages: Sequence[Message], pending: set[Any], history: Sequence[str], ttl: int
) -> list[store.MemoryItem]:
    """The conversation units of ``messages`` (of one session, in order) that are in ``pending``, as items for
    ``store.write_memories``, each with its own source message, role, context and actor. ``history`` is the
    texts before the first message, newest first. A unit's context is its message and the one before it
    (the request it answers); the ``AROUND_MESSAGES`` before those are the turns around it."""
    items: list[store.MemoryItem] = []
    before = list(history)
    for message in messages:
        if message.pk in pending:
            actor = audit.END_USER if message.role == Message.Role.USER else audit.SYSTEM
            context = f"{before[0] if before else ''}\n{message.text}"
            around = "\n".join(before[1 : AROUND_MESSAGES + 1])
            for u in message_units(message.text, message.role, message.created_at):
                claim = claim_of(u.content, message.created_at)
                about = about_data(claim)
                items.append(
                    store.MemoryItem(
                        type=UNIT_TYPE, key=unit_key(u.content), content=u.content,
                        # A unit whose own words end its validity (「有效期到6月30日」) ends then.
                        expires_in=validity_seconds(claim, message.created_at, ttl),
                        data={
                            "source": "conversation", "role": message.role, "facts": u.facts,
                            **({"question": True} if u.question else {}),
                            **({"update": True} if u.update else {}),
                            **({"about": about} if about else {}),
                        },
                        source_message=message, source_role=message.role, context=context, around=around,
                        actor=actor, said_at=store.said_at_of(message),
                    )
                )  # fmt: skip
        before.insert(0, message.text)
    return items


def index_pending(tenant: Tenant, *, settle: timedelta = SETTLE, limit: int = 500, now: datetime | None = None) -> int:
    """Index the tenant's messages that a turn stored but did not index (its process died, or the write
    failed), oldest first, at most ``limit`` messages; messages younger than ``settle`` are left to their
    turn. Returns how many messages were indexed."""
    cutoff = (now or timezone.now()) - settle
    with tenant_scope(tenant):
        params = {"tenant": tenant.pk, "cutoff": cutoff, "limit": limit}
        rows = _with_sessions(tenant, load_models(Message, _PENDING_SQL, params))
    return _index_by_session(tenant, rows)


def _index_by_session(tenant: Tenant, rows: Sequence[Message]) -> int:
    """Index ``rows`` (read with ``texts_before``, in session and ``seq`` order), each session's in a
    transaction of its own. Returns how many messages were indexed; one session's failure is logged and
    leaves its messages unmarked for the sweep, the others are written."""
    done = 0
    by_session: dict[Any, list[Message]] = {}
    for message in rows:
        by_session.setdefault(message.session_id, []).append(message)
    for batch in by_session.values():
        try:
            index_messages(tenant, batch[0].session, batch, history=batch[0].texts_before or [])
        except Exception:  # one session's failure must not stop the others; the next sweep retries it
            logger.exception("indexing %d message(s) of session %s failed", len(batch), batch[0].session_id)
            continue
        done += len(batch)
    return done


def index_turns(tenant: Tenant, turns: Sequence[tuple[Any, Sequence[Any]]]) -> int:
    """The background writer's batch (``memory.conversation.writer``): the conversation units of several turns of the
    tenant, each ``(session_id, message_ids)``, in one transaction — one read of their messages (with the text
    before each), one mark, one embedding call for the batch's distinct units, one write of every session's
    units (``store.write_sessions_memories``). Messages already indexed (by the sweep, an announcement heard
    twice) or gone (erased, kept no longer) are skipped; a message named under a session it is not in is too.
    Should the batch fail, each session is written on its own (``index_messages``), so one bad session costs
    the others nothing. Returns how many messages were indexed."""
    wanted = {(str(session_id), str(m)) for session_id, ids in turns for m in ids}
    if not wanted:
        return 0
    try:
        return _write_turns(tenant, wanted)
    except Exception:
        logger.exception(
            "a batch of %d turn(s) of tenant %s failed; writing it session by session", len(turns), tenant.pk
        )
    with tenant_scope(tenant):
        rows = _announced_messages(tenant, wanted)
    return _index_by_session(tenant, rows)


#: The texts before ``m`` in its session (``_BEFORE``), its units' lexical context, read with the messages. The
#: reads are SQL, not querysets — the writer reads messages for every batch, and compiling a queryset cost
#: more than the rest of the read.
_TEXT_BEFORE = f"ARRAY({_BEFORE}) AS texts_before"
#: The named messages not yet indexed, in session and ``seq`` order.
_ANNOUNCED_SQL = f"""
SELECT m.*, {_TEXT_BEFORE}
FROM chat_message m
WHERE m.tenant_id = %(tenant)s AND m.id = ANY(%(ids)s) AND m.memory_indexed_at IS NULL
ORDER BY m.session_id, m.seq
"""  # noqa: S608 - our own constants, no input
#: The sweep's: user messages and replies not yet indexed, older than the cutoff, failed turns aside.
_PENDING_SQL = f"""
SELECT m.*, {_TEXT_BEFORE}
FROM chat_message m
WHERE m.tenant_id = %(tenant)s AND m.memory_indexed_at IS NULL AND m.role IN ('user', 'assistant')
  AND m.status <> 'failed' AND m.created_at < %(cutoff)s
ORDER BY m.session_id, m.seq
LIMIT %(limit)s
"""  # noqa: S608 - our own constants, no input
_SESSIONS_SQL = "SELECT * FROM chat_chatsession WHERE tenant_id = %(tenant)s AND id = ANY(%(ids)s)"


def _announced_messages(tenant: Tenant, wanted: set[tuple[str, str]]) -> list[Message]:
    """The messages of ``wanted`` (``(session_id, message_id)``) not yet indexed, with ``texts_before`` and
    their session, in session and ``seq`` order. Call inside the tenant's scope."""
    ids = sorted({parsed for _, m in wanted if (parsed := _uuid(m)) is not None})
    rows = load_models(Message, _ANNOUNCED_SQL, {"tenant": tenant.pk, "ids": ids})
    return _with_sessions(tenant, [m for m in rows if (str(m.session_id), str(m.pk)) in wanted])


def _with_sessions(tenant: Tenant, rows: list[Message]) -> list[Message]:
    """``rows`` with their sessions attached, read in one statement. Call inside the tenant's scope."""
    if not rows:
        return []
    params = {"tenant": tenant.pk, "ids": list({m.session_id for m in rows})}
    sessions = {s.pk: s for s in load_models(ChatSession, _SESSIONS_SQL, params)}
    for message in rows:
        message.session = sessions[message.session_id]
    return rows


def _uuid(raw: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(raw)
    except ValueError:
        return None


def _write_turns(tenant: Tenant, wanted: set[tuple[str, str]]) -> int:
    ttl = retention_seconds(tenant)
    with tenant_scope(tenant):
        rows = _announced_messages(tenant, wanted)
        if not rows:
            return 0
        pending = _mark(tenant, [m.pk for m in rows if m.role in INDEXED_ROLES])
        by_session: dict[Any, list[Message]] = {}
        for message in rows:
            by_session.setdefault(message.session_id, []).append(message)
        writes = []
        for messages in by_session.values():
            session = messages[0].session
            if not memory_enabled_for_session(tenant, session):  # marked with no units, as index_messages does
                continue
            items = _unit_items(messages, pending, messages[0].texts_before or [], ttl)
            if items:
                writes.append((session, items))
        embedded = _embedded(tenant, [item for _, items in writes for item in items])
        results = store.write_sessions_memories(
            tenant, [(session, [replace(i, embedding=embedded[i.content]) for i in items]) for session, items in writes]
        )
        supersede_older(tenant, _created(results))
    return len(pending)


def _created(results: Sequence[store.WriteResult]) -> list[Any]:
    """The units a write stored anew (a refreshed unit said nothing new)."""
    return [r.memory for r in results if r.outcome != "refreshed"]


def _embedded(tenant: Tenant, items: Sequence[store.MemoryItem]) -> dict[str, Any]:
    """Each distinct content of ``items`` embedded, in one call (the agent's same sentence in ten turns is
    embedded once; a unit the store then only refreshes did not need its vector, which costs one more row of
    the call rather than a call of its own)."""
    contents = list(dict.fromkeys(item.content for item in items))
    if not contents:
        return {}
    vectors = embeddings.embed(contents, model=embeddings.model_for(tenant, UNIT_TYPE), kind="passage")
    return dict(zip(contents, vectors, strict=True))


def index_turn(tenant: Tenant, session_id: Any, message_ids: Sequence[Any]) -> int:
    """One turn's conversation units, named by id: a batch of one (:func:`index_turns`), for a job queued by an
    earlier release (``memory.tasks.index_turn_task``) and a staff message written inline. Returns how many
    messages were indexed."""
    return index_turns(tenant, [(session_id, message_ids)])
