"""Writing memories: one or a batch, a keyed memory replacing the live one of its slot, a repeated fact
refreshing it (docs/memory.md). Each write's ``MemoryEvent`` rows go in the same transaction
(``memory.store.audit``); what a stored memory may change afterwards is in ``memory.store.lifecycle``.

``tenant`` and ``session`` are explicit arguments; a write's hot statements are hand-written SQL (a chat turn
writes every time, and the ORM's bulk helpers cost it more CPU than PostgreSQL took to answer).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from config.db.sql import load_models
from config.errors import ApiError
from conversations.access import require_session_id
from conversations.models import ChatSession, Message
from memory.embeddings import models as embeddings
from memory.models import SESSION_TYPES, MemoryEvent, MemoryUnit
from memory.store.audit import (
    INSERT_EVENTS_SQL,
    SYSTEM,
    Actor,
    Kind,
    actor_user_id,
    event_params,
    event_row,
    insert_events,
    snapshot,
    snapshot_sql,
)
from memory.store.indexing import context_text, search_fields, search_vector, search_vector_sql
from memory.store.read import attach_end_user, fetch_memories, is_valid_at, light_columns, valid_sql
from memory.store.schema import MemoryUnitIn, check_memory_input
from tenants.models import Tenant
from tenants.rls import tenant_scope


@dataclass(frozen=True)
class WriteResult:
    memory: MemoryUnit
    outcome: str  # "created" | "replaced" | "refreshed"
    replaced: MemoryUnit | None = None


def _lock_key(tenant_id: Any, end_user_id: Any, mtype: str, key: str, session_id: Any) -> int:
    raw = f"{tenant_id}|{end_user_id}|{mtype}|{key}|{session_id}".encode()
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big", signed=True)


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
    #: Raw text of the turns around a conversation unit beyond its context (the exchanges before it in its
    #: session): indexed for finding at ``memory.store.indexing.AROUND_WEIGHT``, never shown.
    around: str = ""
    actor: Actor | None = None
    #: When it was said, where that is not the batch's ``now``: an imported conversation's message time. The
    #: memory is created then and expires ``expires_in`` after it; an earlier value of its key is superseded
    #: then, and a later one already stored stays current (:func:`_into_history`).
    said_at: datetime | None = None


def said_at_of(message: Message | None) -> datetime | None:
    """When an imported message was said (its own time, ``Message.data["imported"]``), for the memories made
    from it; None for a live one, whose memories are written as of the write."""
    if message is None or not (message.data or {}).get("imported"):
        return None
    return message.created_at


#: A key's scope (end user, type, key, session or None): one live memory per slot.
Slot = tuple[Any, str, str, Any]


@dataclass
class _Planned:
    valid: MemoryUnitIn
    model: str
    embedding: Any
    session_id: Any
    end_user_id: Any
    item: MemoryItem | None = None  # its own source, context and actor, where it has them

    @property
    def slot(self) -> Slot | None:
        """The key's scope: one live memory per slot."""
        if self.valid.key is None:
            return None
        return (self.end_user_id, self.valid.type, self.valid.key, self.session_id)


def _plan(tenant: Tenant, session: ChatSession, valid: MemoryUnitIn, embedding: Any) -> _Planned:
    return _Planned(
        valid=valid,
        model=embeddings.model_for(tenant, valid.type),
        embedding=embedding,
        session_id=session.pk if valid.type in SESSION_TYPES else None,
        end_user_id=session.end_user_id,
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
        tenant, planned, source_message=source_message, source_role=source_role, actor=actor, now=now,
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
    planned = _plan_items(tenant, session, items)
    return _store(
        tenant, planned, source_message=source_message, source_role=source_role, actor=actor, now=now,
        context=context,
    )  # fmt: skip


def _plan_items(tenant: Tenant, session: ChatSession, items: Sequence[MemoryItem]) -> list[_Planned]:
    """``items`` validated (a bad one raises with ``items[i]:`` and ``extra["index"]``) and planned."""
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
    return planned


def write_sessions_memories(
    tenant: Tenant, batches: Sequence[tuple[ChatSession, Sequence[MemoryItem]]], *, now: datetime | None = None
) -> list[WriteResult]:
    """``write_memories`` for several sessions of the tenant at once (the background writer's batch of turns):
    one result per item, in order, each as ``write_memories`` would give it for its session; one transaction,
    one lock statement, one read of the live rows, one ``INSERT`` for all of them. Each item must carry its
    own source message, role and actor. All or nothing, as ``write_memories``."""
    for session, _ in batches:
        if not isinstance(session, ChatSession) or session.pk is None or session.tenant_id != tenant.pk:
            raise ValueError("write_sessions_memories needs stored sessions of the tenant")
    planned = [p for session, items in batches for p in _plan_items(tenant, session, items)]
    return _store(tenant, planned, source_message=None, source_role="", actor=SYSTEM, now=now)


def _store(
    tenant: Tenant,
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
    search_context = functools.cache(context_text)  # only new rows need it (segmentation), once per context
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

    def said_at(p: _Planned) -> datetime:
        return p.item.said_at if p.item is not None and p.item.said_at is not None else now

    def build(p: _Planned) -> MemoryUnit:
        at = said_at(p)
        search_text = search_fields(p.valid.content, p.valid.key, p.valid.data)
        message, role, around, _ = origin(p)
        wider = p.item.around if p.item is not None else ""
        return MemoryUnit(
            tenant=tenant,
            end_user_id=p.end_user_id,
            session_id=p.session_id,
            type=p.valid.type,
            key=p.valid.key,
            content=p.valid.content,
            data=p.valid.data,
            created_at=at,
            updated_at=at,
            expires_at=at + timedelta(seconds=p.valid.expires_in),
            source_message=message,
            source_role=role,
            embedding=p.embedding,
            embedding_model=p.model,
            search_text=search_text,
            search_context=search_context(around),
            search_around=search_context(wider),
            search_vector=search_vector(search_text, search_context(around), search_context(wider)),
        )

    with tenant_scope(tenant):
        if len(planned) == 1 and planned[0].slot is not None:  # a message's one fact, often said before
            # In a savepoint: an attempt that waited for the row and found it replaced may still hold the row's
            # lock; rolled back, it lets go before the full path takes the key's advisory lock, so it never holds
            # the row while waiting for a replacement that holds the advisory lock and waits for the row.
            savepoint = transaction.savepoint()
            refreshed = _refresh_unchanged(tenant, planned[0], said_at(planned[0]), origin(planned[0])[3])
            if refreshed is not None:
                transaction.savepoint_commit(savepoint)
                return [refreshed]
            transaction.savepoint_rollback(savepoint)
        current = _lock_live(tenant, [p.slot for p in planned if p.slot is not None])
        existing = {m.pk for m in current.values()}
        new_rows: list[MemoryUnit] = []
        changed: dict[Any, MemoryUnit] = {}  # rows already stored that this batch updates
        events: list[MemoryEvent] = []
        results: list[WriteResult] = []
        for p in planned:
            actor = origin(p)[3]
            at = said_at(p)
            live = current.get(p.slot) if p.slot is not None else None
            if live is not None and live.created_at > at:
                # Said before the key's current value was (an imported conversation): history, not a change.
                memory = build(p)
                new_rows.append(memory)
                for row, was in _into_history(tenant, memory, p.slot):
                    changed[row.pk] = row
                    note = f"replaced by {memory.pk}, said earlier"
                    events.append(event_row(row, Kind.REPLACE, actor, before=was, after=snapshot(memory), note=note))
                note = f"said before {memory.superseded_by_id}, which stays current"
                events.append(event_row(memory, Kind.CREATE, actor, after=snapshot(memory), note=note))
                results.append(WriteResult(memory, "created"))
                continue
            if (
                live is not None
                and live.content == p.valid.content
                and live.data == p.valid.data
                and is_valid_at(live, at)
            ):
                before = snapshot(live)
                live.expires_at = max(live.expires_at, at + timedelta(seconds=p.valid.expires_in))
                live.updated_at = max(live.updated_at, at)
                live.confirm_count += 1
                if live.pk in existing:
                    changed[live.pk] = live
                after = snapshot(live)
                events.append(event_row(live, Kind.CONFIRM, actor, before=before, after=after, note="repeated fact"))
                results.append(WriteResult(live, "refreshed"))
                continue
            memory = build(p)
            new_rows.append(memory)
            if p.slot is not None:
                current[p.slot] = memory
            if live is None:
                events.append(event_row(memory, Kind.CREATE, actor, after=snapshot(memory)))
                results.append(WriteResult(memory, "created"))
                continue
            before = snapshot(live)
            live.superseded_at = at
            live.expires_at = max(min(live.expires_at, at), live.created_at)
            live.superseded_by = memory
            if live.pk in existing:
                changed[live.pk] = live
            after = snapshot(memory)
            note = f"replaced by {memory.pk}"
            events.append(event_row(live, Kind.REPLACE, actor, before=before, after=after, note=note))
            events.append(event_row(memory, Kind.CREATE, actor, after=after, note=f"replaces {live.pk}"))
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
            insert_events(events)
    return results


@functools.cache
def _insert_rows_sql() -> str:
    """New memories and a batch's audit events in one statement: every stored column of the rows from one
    array per column, ``search_vector`` computed from ``search_text`` and ``search_context`` as
    ``memory.store.indexing.search_vector_sql`` computes it."""
    fields = [f for f in MemoryUnit._meta.concrete_fields if f.column != "search_vector"]
    columns = ", ".join(f.column for f in fields)
    arrays = ", ".join(f"%(row_{f.column})s::{_array_type(f)}" for f in fields)  # "row_": events use the rest
    vector = search_vector_sql("r")
    return _INSERT_ROWS.format(columns=columns, arrays=arrays, search_vector=vector, events=INSERT_EVENTS_SQL)


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
    params.update(event_params(events))
    with connection.cursor() as cursor:
        cursor.execute(_insert_rows_sql(), params)
    for memory in rows:
        memory._state.adding = False
        memory._state.db = connection.alias


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


def _into_history(tenant: Tenant, memory: MemoryUnit, slot: Slot) -> list[tuple[MemoryUnit, dict[str, Any]]]:
    """Place ``memory`` (not yet stored) in its key's history at its ``created_at``, earlier than the key's
    current value: it is superseded by the first value said after it (valid until then, at most its own
    expiry), and the value before it, if that one was still valid then, is superseded by it. Returns the
    stored rows it changed (the one before it), each with its snapshot from before. The key's advisory lock
    is held by the caller."""
    end_user_id, mtype, key, session_id = slot
    history = fetch_memories(
        tenant,
        "m.end_user_id = %(end_user)s AND m.type = %(type)s AND m.key = %(key)s"
        " AND m.session_id IS NOT DISTINCT FROM %(session)s",
        {"end_user": end_user_id, "type": mtype, "key": key, "session": session_id},
        lock=True,
    )
    at = memory.created_at
    after = min((m for m in history if m.created_at > at), key=lambda m: m.created_at)  # the current one at least
    memory.superseded_at = after.created_at
    memory.superseded_by = after
    memory.expires_at = max(min(memory.expires_at, after.created_at), at)
    before = [(m, snapshot(m)) for m in history if m.created_at <= at and m.expires_at > at]
    for row, _ in before:
        row.superseded_at = at
        row.superseded_by = memory
        row.expires_at = max(at, row.created_at)
        row.updated_at = max(row.updated_at, at)
    return before


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


#: A repeated fact's refresh in one statement: the live row of the slot, if its content and data are the
#: ones written again and it is still valid, locked and refreshed, and its ``confirm`` event written. No
#: advisory lock is needed: a concurrent replacement locks the same row, and once it commits the re-check
#: under the lock finds the row superseded, so nothing is refreshed and the caller takes the full path
#: (which sees the replacement) — after rolling the attempt back to its savepoint, which lets go of the row.
_REFRESH_SQL = """
WITH old AS (
    SELECT id, expires_at FROM memory_memoryunit
    WHERE tenant_id = %(tenant)s AND end_user_id = %(end_user)s AND type = %(type)s AND key = %(key)s
      AND session_id IS NOT DISTINCT FROM %(session)s AND superseded_at IS NULL
      AND content = %(content)s AND data = %(data)s AND {valid}
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


def _refresh_unchanged(tenant: Tenant, planned: _Planned, now: datetime, actor: Actor) -> WriteResult | None:
    """Refresh the slot's live memory if it already says exactly this (a confirmation: its expiry extended,
    ``confirm_count`` + 1, a ``confirm`` event), in one statement; None when it does not (nothing changed)."""
    valid = planned.valid
    end_user_id, type_, key, session_id = planned.slot  # type: ignore[misc]
    params = {
        "tenant": tenant.pk, "end_user": end_user_id, "type": type_, "key": key, "session": session_id,
        "content": valid.content, "data": connection.ops.adapt_json_value(valid.data, None), "now": now,
        "expires_at": now + timedelta(seconds=valid.expires_in), "kind": Kind.CONFIRM, "actor": actor.kind,
        "actor_user": actor_user_id(actor), "note": "repeated fact",
    }  # fmt: skip
    rows = load_models(MemoryUnit, _refresh_sql(), params)
    if not rows:
        return None
    (memory,) = rows
    attach_end_user(memory)
    return WriteResult(memory, "refreshed")


@functools.cache
def _refresh_sql() -> str:
    return _REFRESH_SQL.format(
        columns=light_columns(),
        before=snapshot_sql("r", "r.old_expires_at"),
        after=snapshot_sql("r"),
        valid=valid_sql("memory_memoryunit", "%(now)s"),
    )


def _lock_live(tenant: Tenant, slots: list[Slot]) -> dict[Slot, MemoryUnit]:
    """Take the keys' advisory locks (in one global order, so two batches
    never deadlock) and return their live rows, locked ``FOR UPDATE``."""
    if not slots:
        return {}
    keys = sorted({_lock_key(tenant.pk, u, t, k, sid) for u, t, k, sid in slots})
    with connection.cursor() as cursor:
        # A volatile function in the select list runs after the ORDER BY, so the locks are taken in key order.
        cursor.execute("SELECT pg_advisory_xact_lock(k) FROM unnest(%s::bigint[]) AS k ORDER BY k", [keys])
    wanted = sorted(set(slots), key=str)
    rows = fetch_memories(
        tenant,
        "m.end_user_id = ANY(%(end_users)s) AND m.superseded_at IS NULL AND EXISTS ("
        " SELECT 1 FROM unnest(%(users)s::uuid[], %(types)s::text[], %(keys)s::text[], %(sessions)s::uuid[])"
        " AS w(end_user_id, type, key, session_id)"
        " WHERE m.end_user_id = w.end_user_id AND m.type = w.type AND m.key = w.key"
        " AND m.session_id IS NOT DISTINCT FROM w.session_id)",
        {
            "end_users": sorted({u for u, _, _, _ in wanted}, key=str), "users": [u for u, _, _, _ in wanted],
            "types": [t for _, t, _, _ in wanted], "keys": [k for _, _, k, _ in wanted],
            "sessions": [sid for _, _, _, sid in wanted],
        },
        lock=True,  # a refresh or a replacement never reads the embedding: none is loaded
    )  # fmt: skip
    return {(m.end_user_id, m.type, m.key, m.session_id): m for m in rows}


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
