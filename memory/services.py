"""The memory store: every write, edit, use and expiry goes through here.

Views, the admin, the chat runtime and the benchmarks all call these
functions; each mutation writes its ``MemoryEvent`` in the same transaction.
``tenant`` (and ``session`` where the scope needs it) are explicit arguments.
"""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.contrib.postgres.search import SearchVector
from django.db import IntegrityError, connection
from django.db.models import Q, QuerySet, Value
from django.utils import timezone
from pydantic import ValidationError

from config.db.sql import load_models
from config.errors import ApiError, NotFound
from conversations.access import require_session_id
from conversations.models import ChatSession, Message
from memory import embeddings
from memory.models import (
    MAX_CONTENT,
    MAX_SCORE,
    MIN_SCORE,
    SESSION_TYPES,
    MemoryEvent,
    MemoryUnit,
)
from memory.redaction import redact
from memory.schema import MemoryUnitIn
from memory.text import TS_CONFIG, document_text
from tenants.models import EndUser, Tenant
from tenants.rls import tenant_scope

Kind = MemoryEvent.Kind
FEEDBACK_DELTAS = {"used": 0.1, "ignored": -0.3, "misled": -0.3, "confirmed": 0.0}
FEEDBACK_KINDS = {"used": Kind.USE, "ignored": Kind.IGNORE, "misled": Kind.MISLEAD, "confirmed": Kind.CONFIRM}
_COUNTERS = {"used": "use_count", "ignored": "ignore_count", "misled": "mislead_count", "confirmed": "confirm_count"}
#: Columns recall and writes never read back: the embedding (384 floats to parse per row) and the search index.
HEAVY_FIELDS = ("embedding", "search_vector", "search_text", "search_context")


class MemoryNotFound(NotFound):
    code = "memory_not_found"


class InvalidMemory(ApiError):
    code = "invalid_memory"


@dataclass(frozen=True)
class Actor:
    kind: str = MemoryEvent.Actor.SYSTEM
    user: Any = None

    @classmethod
    def staff(cls, user: Any) -> Actor:
        return cls(MemoryEvent.Actor.STAFF, user)


SYSTEM = Actor()
TENANT_API = Actor(MemoryEvent.Actor.TENANT_API)
END_USER = Actor(MemoryEvent.Actor.END_USER)


@dataclass(frozen=True)
class WriteResult:
    memory: MemoryUnit
    outcome: str  # "created" | "replaced" | "refreshed"
    replaced: MemoryUnit | None = None


# --- validation -------------------------------------------------------------


def check_memory_input(**fields: Any) -> MemoryUnitIn:
    """Validate caller input; raises ``ApiError`` with a contract code."""
    try:
        return MemoryUnitIn(**{k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"]) or "body"
        if field == "content" and error["type"] == "string_too_long":
            raise ApiError(f"content must be at most {MAX_CONTENT} characters", code="content_too_long") from None
        if field == "type":
            raise ApiError(
                "type must be one of user_profile, session_state, tool_result, fact_reference, batch_operation",
                code="unknown_type",
            ) from None
        raise InvalidMemory(f"{field}: {error['msg']}") from None


# --- scope ------------------------------------------------------------------


def scope_q(session: ChatSession) -> Q:
    """Rows a session may see: its own session-scoped memories and its end
    user's other memories (API.md)."""
    return Q(type__in=SESSION_TYPES, session_id=session.pk) | (
        ~Q(type__in=SESSION_TYPES) & Q(end_user_id=session.end_user_id)
    )


def valid_q(as_of: datetime) -> Q:
    return Q(created_at__lte=as_of, expires_at__gt=as_of)


#: Memories visible to a session (``scope_q``) and valid at ``as_of`` (``valid_q``), in SQL, for the hot
#: reads of a chat turn that skip the ORM's query compiler (``fetch_memories``). ``end_user_id`` holds for
#: both branches (a session's memories are its end user's), so indexes led by (tenant, end user) serve it.
SCOPE_SQL = """m.tenant_id = %(tenant)s AND m.end_user_id = %(end_user)s
    AND ((m.type = ANY(%(session_types)s) AND m.session_id = %(session)s)
         OR (m.type <> ALL(%(session_types)s) AND m.end_user_id = %(end_user)s))
    AND m.created_at <= %(as_of)s AND m.expires_at > %(as_of)s"""


def scope_params(tenant: Tenant, session: ChatSession, as_of: datetime) -> dict[str, Any]:
    """The parameters of ``SCOPE_SQL``."""
    return {
        "tenant": tenant.pk, "session": session.pk, "end_user": session.end_user_id,
        "session_types": list(SESSION_TYPES), "as_of": as_of,
    }  # fmt: skip


# ``where`` and ``order`` are this code's own SQL; every value is a parameter.
_FETCH_SQL = """SELECT {columns}, u.external_id AS end_user_external_id
FROM memory_memoryunit m JOIN tenants_enduser u ON u.tenant_id = m.tenant_id AND u.id = m.end_user_id
WHERE m.tenant_id = %(tenant)s AND ({where}) ORDER BY {order}"""


@functools.cache
def _light_columns() -> str:
    return ", ".join(f"m.{f.column}" for f in MemoryUnit._meta.concrete_fields if f.name not in HEAVY_FIELDS)


def fetch_memories(
    tenant: Tenant,
    where: str,
    params: dict[str, Any],
    *,
    order: str = "m.id",
    limit: int | None = None,
    lock: bool = False,
) -> list[MemoryUnit]:
    """Memories of ``tenant`` matching the SQL condition ``where`` (on ``m``), ordered by ``order``, loaded
    without ``HEAVY_FIELDS`` and with their end user (its id and ``external_id``) attached: what
    ``select_related("end_user").defer(*HEAVY_FIELDS)`` gives, for a fraction of the CPU (a chat turn makes
    these reads every time, and the ORM spent more time compiling them than PostgreSQL did answering).
    ``lock`` locks the memories (not their end user) ``FOR UPDATE``. Call inside the tenant's scope."""
    sql = _FETCH_SQL.format(columns=_light_columns(), where=where, order=order)
    sql += (f" LIMIT {int(limit)}" if limit is not None else "") + (" FOR UPDATE OF m" if lock else "")
    rows = load_models(MemoryUnit, sql, {**params, "tenant": tenant.pk})  # the SQL names the tenant
    for memory in rows:
        _attach_end_user(memory)
    return rows


def _attach_end_user(memory: MemoryUnit) -> None:
    """Set ``memory.end_user`` from the ``end_user_external_id`` column a raw read selected with it, so
    serialising the memory needs no query."""
    memory.end_user = EndUser.from_db(
        connection.alias, ["id", "tenant_id", "external_id"],
        [memory.end_user_id, memory.tenant_id, memory.end_user_external_id],
    )  # fmt: skip


@require_session_id
def visible_memories(tenant: Tenant, session: ChatSession) -> QuerySet[MemoryUnit]:
    return MemoryUnit.objects.for_tenant(tenant).filter(scope_q(session))


@require_session_id
def get_visible_memory(tenant: Tenant, session: ChatSession, memory_id: Any) -> MemoryUnit:
    try:
        memory_id = uuid.UUID(str(memory_id))
    except ValueError:
        raise MemoryNotFound("No such memory.") from None
    with tenant_scope(tenant):
        memory = visible_memories(tenant, session).select_related("end_user").filter(pk=memory_id).first()
    if memory is None:
        raise MemoryNotFound("No such memory.")
    return memory


@require_session_id
def list_memories(
    tenant: Tenant,
    session: ChatSession,
    *,
    type: str | None = None,
    as_of: datetime | None = None,
    include_expired: bool = False,
    limit: int = 500,
) -> list[MemoryUnit]:
    qs = visible_memories(tenant, session)
    if type:
        qs = qs.filter(type=type)
    if not include_expired:
        qs = qs.filter(valid_q(as_of or timezone.now()))
    elif as_of is not None:
        qs = qs.filter(created_at__lte=as_of)
    with tenant_scope(tenant):
        return list(qs.select_related("end_user").order_by("-relevance_score", "-created_at")[:limit])


# --- serialization ----------------------------------------------------------


def snapshot(memory: MemoryUnit) -> dict[str, Any]:
    """What the audit trail keeps of a memory's state."""
    return {
        "content": memory.content,
        "key": memory.key,
        "type": memory.type,
        "data": memory.data,
        "expires_at": memory.expires_at.isoformat(),
        "relevance_score": round(memory.relevance_score, 4),
    }


def serialize_memory(memory: MemoryUnit, *, now: datetime | None = None) -> dict[str, Any]:
    """The MemoryUnit shape of API.md."""
    now = now or timezone.now()
    return {
        "id": str(memory.pk),
        "type": memory.type,
        "key": memory.key,
        "content": memory.content,
        "data": memory.data,
        "session_id": str(memory.session_id) if memory.session_id else None,
        "end_user_id": memory.end_user.external_id,
        "source_message_id": str(memory.source_message_id) if memory.source_message_id else None,
        "lifespan": {
            "created_at": _iso(memory.created_at),
            "expires_in": memory.expires_in,
            "expires_at": _iso(memory.expires_at),
            "relevance_score": round(memory.relevance_score, 4),
        },
        "expired": not memory.is_valid_at(now),
    }


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


# --- writes -----------------------------------------------------------------


def _event_row(
    memory: MemoryUnit, kind: str, actor: Actor, *, before: Any = None, after: Any = None, note: str = ""
) -> MemoryEvent:
    return MemoryEvent(
        tenant_id=memory.tenant_id,
        end_user_id=memory.end_user_id,
        memory_id=memory.pk,
        kind=kind,
        actor=actor.kind,
        actor_user_id=_actor_user_id(actor),
        before=before,
        after=after,
        note=note[:200],
    )


def _actor_user_id(actor: Actor) -> Any:
    return actor.user.pk if actor.user is not None and actor.user.is_authenticated else None


def _event(
    memory: MemoryUnit, kind: str, actor: Actor, *, before: Any = None, after: Any = None, note: str = ""
) -> None:
    _event_row(memory, kind, actor, before=before, after=after, note=note).save(force_insert=True)


def _lock_key(tenant_id: Any, end_user_id: Any, mtype: str, key: str, session_id: Any) -> int:
    raw = f"{tenant_id}|{end_user_id}|{mtype}|{key}|{session_id}".encode()
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big", signed=True)


def _search_fields(content: str, key: str | None, data: dict[str, Any]) -> str:
    values = [str(v) for v in data.values() if isinstance(v, str | int | float)]
    return document_text([content, (key or "").replace("_", " "), *values])


#: ``search_vector`` weight of a memory's conversational context. Its own text keeps PostgreSQL's default
#: weight D, so rows written before context existed read the same; recall's BM25 counts a term found only
#: in the context at half the weight of one in the memory's own text (memory/recall.py).
CONTEXT_WEIGHT = "C"
#: At most this many context words are indexed per memory (two chat messages' worth).
CONTEXT_WORDS = 200


def context_text(*messages: str) -> str:
    """Segmented, redacted words of the conversation around a memory, for ``search_context``. Secrets never
    reach the index (they would be searchable otherwise)."""
    words = document_text([redact(m) for m in messages if m]).split()
    return " ".join(words[:CONTEXT_WORDS])


def _search_vector(search_text: str, search_context: str = "") -> Any:
    """``search_vector`` computed by PostgreSQL in the statement that writes
    the row (INSERT or UPDATE): the memory's own words at the default weight,
    its context's at ``CONTEXT_WEIGHT``. The instance keeps the expression,
    not the tsvector: reading the value means loading the row."""
    own = SearchVector(Value(search_text), config=TS_CONFIG)
    if not search_context:
        return own
    return own + SearchVector(Value(search_context), config=TS_CONFIG, weight=CONTEXT_WEIGHT)


@dataclass(frozen=True)
class MemoryItem:
    """One memory for ``write_memories``; the fields mean what they mean for
    ``do_write_memory``. ``embedding`` is an optional precomputed vector of
    ``content`` by the tenant's model for this type. ``source_message``,
    ``source_role``, ``context`` and ``actor``, when given, replace the
    batch's own for this item: one batch can carry the memories of several
    messages (a turn's user message and reply: one embedding call, one
    INSERT)."""

    type: str
    content: str
    key: str | None = None
    data: dict[str, Any] | None = None
    expires_in: int | None = None
    embedding: Any = None
    source_message: Message | None = None
    source_role: str | None = None
    context: str | None = None
    actor: Actor | None = None


@dataclass
class _Planned:
    valid: MemoryUnitIn
    model: str
    embedding: Any
    session_id: Any
    item: MemoryItem | None = None  # its own source, context and actor, where it has them

    @property
    def slot(self) -> tuple[str, str, Any] | None:
        """The key's scope: one live memory per slot."""
        return None if self.valid.key is None else (self.valid.type, self.valid.key, self.session_id)


def _plan(tenant: Tenant, session: ChatSession, valid: MemoryUnitIn, embedding: Any) -> _Planned:
    return _Planned(
        valid=valid,
        model=embeddings.model_for(tenant, valid.type),
        embedding=embedding,
        session_id=session.pk if valid.type in SESSION_TYPES else None,
    )


@require_session_id
def do_write_memory(
    tenant: Tenant,
    session: ChatSession,
    *,
    type: str,
    content: str,
    key: str | None = None,
    data: dict[str, Any] | None = None,
    expires_in: int | None = None,
    source_message: Message | None = None,
    source_role: str = "",
    actor: Actor = SYSTEM,
    now: datetime | None = None,
    embedding: Any = None,
    context: str = "",
) -> WriteResult:
    """Store a memory; a memory with the same key in the same scope is
    replaced (the old one stays in history), an identical one is refreshed
    (a confirmation: no new row and no embedding).

    ``context`` is the conversation the memory came from (raw text: its
    source message and the one before it); it is redacted, segmented and
    indexed at a lower weight for recall's lexical leg, never shown.

    Concurrency: writers of one key are serialised by a transaction-scoped
    advisory lock, and a partial unique index allows one live row per key, so
    two concurrent writes leave exactly one live memory. One memory is a
    batch of one: see ``write_memories``.
    """
    valid = check_memory_input(type=type, content=content, key=key, data=data or {}, expires_in=expires_in)
    planned = [_plan(tenant, session, valid, embedding)]
    written = _store(
        tenant, session, planned, source_message=source_message, source_role=source_role, actor=actor, now=now,
        context=context,
    )  # fmt: skip
    return written[0]


@require_session_id
def write_memories(
    tenant: Tenant,
    session: ChatSession,
    items: Sequence[MemoryItem],
    *,
    source_message: Message | None = None,
    source_role: str = "",
    actor: Actor = SYSTEM,
    now: datetime | None = None,
    context: str = "",
) -> list[WriteResult]:
    """Store several memories of one session (e.g. the facts of one message)
    at once: one result per item, in order, each as ``do_write_memory``
    would give it, with items applied in order (a later item with the same
    key replaces or refreshes an earlier one).

    All or nothing: every item is validated before anything is embedded or
    written, and a bad one raises the ``do_write_memory`` error (same code)
    with ``items[i]:`` in the message and ``extra["index"]``; any failure
    while writing rolls the whole batch back. One ``embed()`` call per
    embedding model for the items that need a new row, one transaction,
    one ``INSERT`` for the rows and one for their events.
    """
    planned = []
    for index, item in enumerate(items):
        try:
            valid = check_memory_input(
                type=item.type, content=item.content, key=item.key, data=item.data or {}, expires_in=item.expires_in
            )
        except ApiError as exc:
            raise type(exc)(
                f"items[{index}]: {exc.message}", code=exc.code, status=exc.status, extra={"index": index}
            ) from None
        planned.append(_plan(tenant, session, valid, item.embedding))
        planned[-1].item = item
    return _store(
        tenant, session, planned, source_message=source_message, source_role=source_role, actor=actor, now=now,
        context=context,
    )  # fmt: skip


def _store(
    tenant: Tenant,
    session: ChatSession,
    planned: list[_Planned],
    *,
    source_message: Message | None,
    source_role: str,
    actor: Actor,
    now: datetime | None,
    context: str = "",
) -> list[WriteResult]:
    """Apply validated writes in one transaction (the work behind
    ``do_write_memory`` and ``write_memories``).

    The embeddings are computed inside the transaction, after the keyed
    lookup, so a repeated fact costs a lookup and no embedding; the keys'
    advisory locks are held meanwhile (a few ms per new memory).
    """
    if not planned:
        return []
    now = now or timezone.now()
    search_context = functools.cache(context_text)  # only new rows need it (jieba), once per context
    batch_actor = actor

    def origin(p: _Planned) -> tuple[Message | None, str, str, Actor]:
        item = p.item
        if item is None:
            return source_message, source_role, context, batch_actor
        return (
            item.source_message if item.source_message is not None else source_message,
            item.source_role if item.source_role is not None else source_role,
            item.context if item.context is not None else context,
            item.actor if item.actor is not None else batch_actor,
        )

    def build(p: _Planned) -> MemoryUnit:
        search_text = _search_fields(p.valid.content, p.valid.key, p.valid.data)
        message, role, around, _ = origin(p)
        return MemoryUnit(
            tenant=tenant,
            end_user_id=session.end_user_id,
            session_id=p.session_id,
            type=p.valid.type,
            key=p.valid.key,
            content=p.valid.content,
            data=p.valid.data,
            created_at=now,
            updated_at=now,
            expires_at=now + timedelta(seconds=p.valid.expires_in),
            source_message=message,
            source_role=role,
            embedding=p.embedding,
            embedding_model=p.model,
            search_text=search_text,
            search_context=search_context(around),
            search_vector=_search_vector(search_text, search_context(around)),
        )

    with tenant_scope(tenant):
        if len(planned) == 1 and planned[0].slot is not None:  # a message's one fact, often said before
            refreshed = _refresh_unchanged(tenant, session, planned[0], now, origin(planned[0])[3])
            if refreshed is not None:
                return [refreshed]
        current = _lock_live(tenant, session, [p.slot for p in planned if p.slot is not None])
        existing = {m.pk for m in current.values()}
        new_rows: list[MemoryUnit] = []
        changed: dict[Any, MemoryUnit] = {}  # rows already stored that this batch updates
        events: list[MemoryEvent] = []
        results: list[WriteResult] = []
        for p in planned:
            actor = origin(p)[3]
            live = current.get(p.slot) if p.slot is not None else None
            if (
                live is not None
                and live.content == p.valid.content
                and live.data == p.valid.data
                and live.expires_at > now
            ):
                before = snapshot(live)
                live.expires_at = max(live.expires_at, now + timedelta(seconds=p.valid.expires_in))
                live.updated_at = now
                live.confirm_count += 1
                if live.pk in existing:
                    changed[live.pk] = live
                after = snapshot(live)
                events.append(_event_row(live, Kind.CONFIRM, actor, before=before, after=after, note="repeated fact"))
                results.append(WriteResult(live, "refreshed"))
                continue
            memory = build(p)
            new_rows.append(memory)
            if p.slot is not None:
                current[p.slot] = memory
            if live is None:
                events.append(_event_row(memory, Kind.CREATE, actor, after=snapshot(memory)))
                results.append(WriteResult(memory, "created"))
                continue
            before = snapshot(live)
            live.superseded_at = now
            live.expires_at = max(min(live.expires_at, now), live.created_at)
            live.superseded_by = memory
            if live.pk in existing:
                changed[live.pk] = live
            after = snapshot(memory)
            note = f"replaced by {memory.pk}"
            events.append(_event_row(live, Kind.REPLACE, actor, before=before, after=after, note=note))
            events.append(_event_row(memory, Kind.CREATE, actor, after=after, note=f"replaces {live.pk}"))
            results.append(WriteResult(memory, "replaced", replaced=live))

        _embed_missing(new_rows)
        try:
            if changed:
                # Superseded rows leave the partial unique index before their
                # successors enter it. ``superseded_by`` may point at a row
                # inserted just below: foreign keys are checked at commit.
                _update_changed(tenant, list(changed.values()))
            if new_rows:
                _insert_rows(new_rows, events)
        except IntegrityError as exc:  # pragma: no cover - the advisory locks make this unreachable
            raise ApiError("a concurrent write to this memory won; retry", code="conflict", status=409) from exc
        if not new_rows:
            _insert_events(events)
    return results


@functools.cache
def _insert_rows_sql() -> str:
    """New memories and a batch's audit events in one statement: every stored column of the rows from one
    array per column, ``search_vector`` computed from ``search_text`` and ``search_context`` as
    ``_search_vector`` computes it (an empty context adds nothing to the tsvector)."""
    fields = [f for f in MemoryUnit._meta.concrete_fields if f.column != "search_vector"]
    columns = ", ".join(f.column for f in fields)
    arrays = ", ".join(f"%(row_{f.column})s::{_array_type(f)}" for f in fields)  # "row_": events use the rest
    own = f"to_tsvector('{TS_CONFIG}'::regconfig, COALESCE(r.search_text, ''))"
    context = f"setweight(to_tsvector('{TS_CONFIG}'::regconfig, COALESCE(r.search_context, '')), '{CONTEXT_WEIGHT}')"
    vector = f"{own} || {context}"
    return _INSERT_ROWS.format(columns=columns, arrays=arrays, search_vector=vector, events=_INSERT_EVENTS)


# The model's own column names and types; every value is a parameter.
_INSERT_ROWS = """
WITH new_rows AS (
    INSERT INTO memory_memoryunit ({columns}, search_vector)
    SELECT r.*, {search_vector} FROM unnest({arrays}) AS r({columns})
)
{events}"""


def _array_type(field: Any) -> str:
    db_type = field.db_type(connection)
    if db_type == "jsonb" or db_type.startswith("vector"):
        return f"text[]::{db_type}[]"  # sent as text: psycopg's own adapters for these do not take arrays
    return f"{db_type}[]"


def _insert_rows(rows: list[MemoryUnit], events: list[MemoryEvent]) -> None:
    """Insert ``rows`` (built, not saved) and ``events`` in one round trip (``bulk_create`` cost a chat turn's
    first message more CPU than everything PostgreSQL does for it)."""
    fields = [f for f in MemoryUnit._meta.concrete_fields if f.column != "search_vector"]
    params: dict[str, Any] = {}
    for field in fields:
        values = [getattr(m, field.attname) for m in rows]
        if field.column == "data":
            values = [json.dumps(v, ensure_ascii=False) for v in values]
        elif field.column == "embedding":
            values = [field.get_prep_value(v) for v in values]
        params[f"row_{field.column}"] = values
    params.update(_event_params(events))
    with connection.cursor() as cursor:
        cursor.execute(_insert_rows_sql(), params)
    for memory in rows:
        memory._state.adding = False
        memory._state.db = connection.alias


#: Audit events in one statement (``bulk_create`` cost a chat turn more CPU than the insert itself).
_INSERT_EVENTS = """
INSERT INTO memory_memoryevent (tenant_id, end_user_id, memory_id, kind, actor, actor_user_id, before, after, note,
                                created_at)
SELECT * FROM unnest(%(tenant)s::uuid[], %(end_user)s::uuid[], %(memory)s::uuid[], %(kind)s::text[],
                     %(actor)s::text[], %(actor_user)s::int[], %(before)s::text[]::jsonb[], %(after)s::text[]::jsonb[],
                     %(note)s::text[], %(created_at)s::timestamptz[])
"""


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _event_params(events: list[MemoryEvent]) -> dict[str, list[Any]]:
    return {
        "tenant": [e.tenant_id for e in events], "end_user": [e.end_user_id for e in events],
        "memory": [e.memory_id for e in events], "kind": [e.kind for e in events],
        "actor": [e.actor for e in events], "actor_user": [e.actor_user_id for e in events],
        "before": [_json_or_none(e.before) for e in events], "after": [_json_or_none(e.after) for e in events],
        "note": [e.note for e in events], "created_at": [e.created_at for e in events],
    }  # fmt: skip


def _insert_events(events: list[MemoryEvent]) -> None:
    if not events:
        return
    with connection.cursor() as cursor:
        cursor.execute(_INSERT_EVENTS, _event_params(events))


#: The rows a batch refreshes or supersedes, in one statement (``bulk_update`` builds a CASE per column and
#: row, which cost a chat turn more CPU than the write itself).
_UPDATE_CHANGED = """
UPDATE memory_memoryunit m
SET superseded_at = v.superseded_at, superseded_by_id = v.superseded_by_id, expires_at = v.expires_at,
    updated_at = v.updated_at, confirm_count = v.confirm_count
FROM unnest(%(ids)s::uuid[], %(superseded_at)s::timestamptz[], %(superseded_by)s::uuid[], %(expires_at)s::timestamptz[],
            %(updated_at)s::timestamptz[], %(confirm_count)s::int[])
     AS v(id, superseded_at, superseded_by_id, expires_at, updated_at, confirm_count)
WHERE m.tenant_id = %(tenant)s AND m.id = v.id
"""


def _update_changed(tenant: Tenant, rows: list[MemoryUnit]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            _UPDATE_CHANGED,
            {
                "tenant": tenant.pk,
                "ids": [m.pk for m in rows],
                "superseded_at": [m.superseded_at for m in rows],
                "superseded_by": [m.superseded_by_id for m in rows],
                "expires_at": [m.expires_at for m in rows],
                "updated_at": [m.updated_at for m in rows],
                "confirm_count": [m.confirm_count for m in rows],
            },
        )


#: The audit trail's ``snapshot`` of row ``{r}``, built by PostgreSQL (``{expires}`` is its expiry), as
#: ``snapshot`` builds it: ``expires_at`` in ``datetime.isoformat()``'s form (UTC, microseconds only when
#: not zero), the score rounded to 4 places.
_SNAPSHOT_SQL = """jsonb_build_object(
    'content', {r}.content, 'key', {r}.key, 'type', {r}.type, 'data', {r}.data,
    'expires_at', to_char({expires} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
                  || CASE WHEN extract(microseconds FROM {expires}) %% 1000000 = 0 THEN ''
                          ELSE to_char({expires} AT TIME ZONE 'UTC', '.US') END || '+00:00',
    'relevance_score', round({r}.relevance_score::numeric, 4))"""

#: A repeated fact's refresh in one statement: the live row of the slot, if its content and data are the
#: ones written again and it has not expired, locked and refreshed, and its ``confirm`` event written. No
#: advisory lock is needed: a concurrent replacement locks the same row, and once it commits the re-check
#: under the lock finds the row superseded, so nothing is refreshed and the caller takes the full path
#: (which sees the replacement).
_REFRESH_SQL = """
WITH old AS (
    SELECT id, expires_at FROM memory_memoryunit
    WHERE tenant_id = %(tenant)s AND end_user_id = %(end_user)s AND type = %(type)s AND key = %(key)s
      AND session_id IS NOT DISTINCT FROM %(session)s AND superseded_at IS NULL
      AND content = %(content)s AND data = %(data)s AND expires_at > %(now)s
    FOR UPDATE
), refreshed AS (
    UPDATE memory_memoryunit m
    SET expires_at = GREATEST(m.expires_at, %(expires_at)s), updated_at = %(now)s, confirm_count = m.confirm_count + 1
    FROM old, tenants_enduser u
    WHERE m.tenant_id = %(tenant)s AND m.id = old.id AND u.tenant_id = m.tenant_id AND u.id = m.end_user_id
    RETURNING {columns}, u.external_id AS end_user_external_id, old.expires_at AS old_expires_at
), event AS (
    INSERT INTO memory_memoryevent (tenant_id, end_user_id, memory_id, kind, actor, actor_user_id, before, after,
                                    note, created_at)
    SELECT r.tenant_id, r.end_user_id, r.id, %(kind)s, %(actor)s, %(actor_user)s, {before}, {after}, %(note)s,
           %(now)s
    FROM refreshed r
)
SELECT * FROM refreshed
"""


def _refresh_unchanged(
    tenant: Tenant, session: ChatSession, planned: _Planned, now: datetime, actor: Actor
) -> WriteResult | None:
    """Refresh the slot's live memory if it already says exactly this (a confirmation: its expiry extended,
    ``confirm_count`` + 1, a ``confirm`` event), in one statement; None when it does not (nothing changed)."""
    valid = planned.valid
    type_, key, session_id = planned.slot  # type: ignore[misc]
    params = {
        "tenant": tenant.pk, "end_user": session.end_user_id, "type": type_, "key": key, "session": session_id,
        "content": valid.content, "data": connection.ops.adapt_json_value(valid.data, None), "now": now,
        "expires_at": now + timedelta(seconds=valid.expires_in), "kind": Kind.CONFIRM, "actor": actor.kind,
        "actor_user": _actor_user_id(actor), "note": "repeated fact",
    }  # fmt: skip
    rows = load_models(MemoryUnit, _refresh_sql(), params)
    if not rows:
        return None
    (memory,) = rows
    _attach_end_user(memory)
    return WriteResult(memory, "refreshed")


@functools.cache
def _refresh_sql() -> str:
    return _REFRESH_SQL.format(
        columns=_light_columns(),
        before=_SNAPSHOT_SQL.format(r="r", expires="r.old_expires_at"),
        after=_SNAPSHOT_SQL.format(r="r", expires="r.expires_at"),
    )


def _lock_live(tenant: Tenant, session: ChatSession, slots: list[tuple[str, str, Any]]) -> dict[Any, MemoryUnit]:
    """Take the keys' advisory locks (in one global order, so two batches
    never deadlock) and return their live rows, locked ``FOR UPDATE``."""
    if not slots:
        return {}
    keys = sorted({_lock_key(tenant.pk, session.end_user_id, t, k, sid) for t, k, sid in slots})
    with connection.cursor() as cursor:
        # A volatile function in the select list runs after the ORDER BY, so the locks are taken in key order.
        cursor.execute("SELECT pg_advisory_xact_lock(k) FROM unnest(%s::bigint[]) AS k ORDER BY k", [keys])
    wanted = sorted(set(slots), key=str)
    rows = fetch_memories(
        tenant,
        "m.end_user_id = %(end_user)s AND m.superseded_at IS NULL AND EXISTS ("
        " SELECT 1 FROM unnest(%(types)s::text[], %(keys)s::text[], %(sessions)s::uuid[]) AS w(type, key, session_id)"
        " WHERE m.type = w.type AND m.key = w.key AND m.session_id IS NOT DISTINCT FROM w.session_id)",
        {
            "end_user": session.end_user_id, "types": [t for t, _, _ in wanted], "keys": [k for _, k, _ in wanted],
            "sessions": [sid for _, _, sid in wanted],
        },
        lock=True,  # a refresh or a replacement never reads the embedding: none is loaded
    )  # fmt: skip
    return {(m.type, m.key, m.session_id): m for m in rows}


def _embed_missing(rows: list[MemoryUnit]) -> None:
    """One ``embed()`` call per model for the rows without a vector."""
    by_model: dict[str, list[MemoryUnit]] = {}
    for memory in rows:
        if memory.embedding is None:
            by_model.setdefault(memory.embedding_model, []).append(memory)
    for model, group in by_model.items():
        vectors = embeddings.embed([m.content for m in group], model=model, kind="passage")
        for memory, vector in zip(group, vectors, strict=True):
            memory.embedding = vector


def do_edit_memory(
    tenant: Tenant,
    memory: MemoryUnit,
    *,
    content: str | None = None,
    data: dict[str, Any] | None = None,
    expires_in: int | None = None,
    actor: Actor = TENANT_API,
) -> MemoryUnit:
    """Edit in place (staff and API corrections); the event keeps before/after."""
    merged = check_memory_input(
        type=memory.type,
        content=content if content is not None else memory.content,
        key=memory.key,
        data=data if data is not None else memory.data,
        expires_in=expires_in if expires_in is not None else max(memory.expires_in, 1),
    )
    with tenant_scope(tenant):
        locked = MemoryUnit.objects.for_tenant(tenant).select_for_update().get(pk=memory.pk)
        before = snapshot(locked)
        fields = ["updated_at"]
        if merged.content != locked.content or merged.data != locked.data:
            locked.content, locked.data = merged.content, merged.data
            locked.search_text = _search_fields(locked.content, locked.key, locked.data)
            locked.embedding_model = embeddings.model_for(tenant, locked.type)
            locked.embedding = embeddings.embed_one(locked.content, model=locked.embedding_model, kind="passage")
            locked.search_vector = _search_vector(locked.search_text, locked.search_context)
            fields += ["content", "data", "search_text", "search_vector", "embedding", "embedding_model"]
        if expires_in is not None:
            locked.expires_at = locked.created_at + timedelta(seconds=merged.expires_in)
            fields.append("expires_at")
        locked.updated_at = timezone.now()
        locked.save(update_fields=fields)
        _event(locked, Kind.EDIT, actor, before=before, after=snapshot(locked))
    return locked


def do_expire_memory(tenant: Tenant, memory: MemoryUnit, *, actor: Actor = TENANT_API, note: str = "") -> MemoryUnit:
    """Stop recalling a memory from now on (kept for history and restore)."""
    with tenant_scope(tenant):
        locked = MemoryUnit.objects.for_tenant(tenant).select_for_update().get(pk=memory.pk)
        now = timezone.now()
        if locked.expires_at <= now:
            return locked
        before = snapshot(locked)
        locked.expires_at = max(now, locked.created_at)
        locked.updated_at = now
        locked.save(update_fields=["expires_at", "updated_at"])
        _event(locked, Kind.EXPIRE, actor, before=before, after=snapshot(locked), note=note)
    return locked


def do_extend_memory(tenant: Tenant, memory: MemoryUnit, seconds: int, *, actor: Actor = TENANT_API) -> MemoryUnit:
    """Keep a memory ``seconds`` longer (from now if it already expired)."""
    if seconds <= 0:
        raise InvalidMemory("extension must be positive")
    with tenant_scope(tenant):
        locked = MemoryUnit.objects.for_tenant(tenant).select_for_update().get(pk=memory.pk)
        if locked.superseded_at is not None:
            raise InvalidMemory("a replaced memory cannot be extended; edit the live one")
        before = snapshot(locked)
        now = timezone.now()
        locked.expires_at = max(locked.expires_at, now) + timedelta(seconds=seconds)
        locked.updated_at = now
        locked.save(update_fields=["expires_at", "updated_at"])
        _event(locked, Kind.EXTEND, actor, before=before, after=snapshot(locked))
    return locked


def do_delete_memory(tenant: Tenant, memory: MemoryUnit, *, actor: Actor = TENANT_API) -> None:
    """Delete the row; its event history stays for the audit trail."""
    with tenant_scope(tenant):
        before = snapshot(memory)
        _event(memory, Kind.DELETE, actor, before=before)
        MemoryUnit.objects.for_tenant(tenant).filter(pk=memory.pk).delete()


#: One relevance event for several memories in one statement: the rows are locked and their scores read
#: (``old``), updated with the arithmetic in SQL (so concurrent events add up), and each gets its audit
#: event with the score before and after. Two WITH items (``feedback_updated``, ``feedback_events``) that
#: ``apply_feedback`` runs on their own and a chat turn inside the statement that stores its reply
#: (``feedback_sql``). ``{counter}`` is one of ``_COUNTERS``' column names.
_FEEDBACK_ITEMS = """
feedback_updated AS (
    UPDATE memory_memoryunit m
    SET relevance_score = LEAST(%(fb_max)s, GREATEST(%(fb_min)s, m.relevance_score + %(fb_delta)s)),
        {counter} = m.{counter} + 1
    FROM (SELECT id, relevance_score FROM memory_memoryunit
          WHERE tenant_id = %(tenant)s AND id = ANY(%(fb_ids)s) FOR UPDATE) old
    WHERE m.tenant_id = %(tenant)s AND m.id = old.id
    RETURNING m.id, m.end_user_id, old.relevance_score AS before, m.relevance_score AS after
), feedback_events AS (
    INSERT INTO memory_memoryevent (tenant_id, end_user_id, memory_id, kind, actor, actor_user_id, before, after,
                                    note, created_at)
    SELECT %(tenant)s, end_user_id, id, %(fb_kind)s, %(fb_actor)s, %(fb_actor_user)s,
           jsonb_build_object('relevance_score', round(before::numeric, 4)),
           jsonb_build_object('relevance_score', round(after::numeric, 4)), %(fb_note)s, %(fb_now)s
    FROM feedback_updated
    RETURNING memory_id, (after->>'relevance_score')::float8
)"""


def feedback_sql(
    tenant: Tenant, memory_ids: Sequence[Any], event: str, *, actor: Actor = SYSTEM, note: str = ""
) -> tuple[str, dict[str, Any]] | None:
    """``apply_feedback``'s work as WITH items and their parameters, for a caller that runs it inside a
    statement of its own (a data-modifying WITH runs exactly once whether or not it is read); None when
    there is nothing to apply. The parameters are named ``fb_*``, and ``tenant`` (``tenant.pk``)."""
    if event not in FEEDBACK_DELTAS:
        raise ApiError("event must be one of used, ignored, misled, confirmed", code="unknown_event")
    ids = list(dict.fromkeys(uuid.UUID(str(i)) for i in memory_ids))
    if not ids:
        return None
    params = {
        "tenant": tenant.pk, "fb_ids": ids, "fb_delta": FEEDBACK_DELTAS[event], "fb_min": MIN_SCORE,
        "fb_max": MAX_SCORE, "fb_kind": FEEDBACK_KINDS[event], "fb_actor": actor.kind, "fb_now": timezone.now(),
        "fb_note": note[:200], "fb_actor_user": _actor_user_id(actor),
    }  # fmt: skip
    return _FEEDBACK_ITEMS.format(counter=_COUNTERS[event]).strip(), params


def apply_feedback(
    tenant: Tenant, memory_ids: Sequence[Any], event: str, *, actor: Actor = SYSTEM, note: str = ""
) -> dict[uuid.UUID, float]:
    """Apply one relevance event (S5/S13) to several memories of ``tenant`` at once: used +0.1 (max 2.0),
    ignored/misled −0.3 (min 0.1), confirmed never lowers the score; one audit event each. Returns the new
    score of each memory found (ids that are gone, or another tenant's, are skipped). One statement,
    atomic under concurrency: the arithmetic runs in the UPDATE, on rows it locks first."""
    work = feedback_sql(tenant, memory_ids, event, actor=actor, note=note)
    if work is None:
        return {}
    items, params = work
    with tenant_scope(tenant), connection.cursor() as cursor:
        cursor.execute(f"WITH {items} SELECT * FROM feedback_events", params)  # noqa: S608 - values are parameters
        return dict(cursor.fetchall())


def do_feedback(tenant: Tenant, memory: MemoryUnit, event: str, *, actor: Actor = SYSTEM, note: str = "") -> MemoryUnit:
    """Apply a relevance event to one memory (see ``apply_feedback``); returns it as it is now."""
    with tenant_scope(tenant):
        if not apply_feedback(tenant, [memory.pk], event, actor=actor, note=note):
            raise MemoryNotFound("No such memory.")
        return MemoryUnit.objects.for_tenant(tenant).select_related("end_user").get(pk=memory.pk)


def mark_recalled(tenant: Tenant, memory_ids: list[Any]) -> None:
    if memory_ids:
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE memory_memoryunit SET recall_count = recall_count + 1 WHERE tenant_id = %s AND id = ANY(%s)",
                [tenant.pk, list(memory_ids)],
            )


# --- cleanup ----------------------------------------------------------------


def do_cleanup_expired(tenant: Tenant, *, older_than: timedelta = timedelta(0), now: datetime | None = None) -> int:
    """Delete memories that expired more than ``older_than`` ago, writing a
    ``delete`` event for each (the audit trail keeps their content). Safe to
    run while the service runs: a memory is only removed once no recall can
    return it. Returns how many were removed."""
    now = now or timezone.now()
    cutoff = now - older_than
    removed = 0
    while True:
        with tenant_scope(tenant):
            batch = list(
                MemoryUnit.objects.for_tenant(tenant)
                .select_for_update(skip_locked=True)
                .filter(expires_at__lte=cutoff)
                .order_by("expires_at")[:500]
            )
            if not batch:
                return removed
            MemoryEvent.objects.bulk_create(
                [
                    MemoryEvent(
                        tenant_id=m.tenant_id,
                        end_user_id=m.end_user_id,
                        memory_id=m.pk,
                        kind=Kind.DELETE,
                        actor=MemoryEvent.Actor.SYSTEM,
                        before=snapshot(m),
                        note="cleanup of expired memory",
                    )
                    for m in batch
                ]
            )
            MemoryUnit.objects.for_tenant(tenant).filter(pk__in=[m.pk for m in batch]).delete()
            removed += len(batch)
