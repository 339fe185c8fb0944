"""The audit trail of memories: who acts (:class:`Actor`), what a memory's state was (:func:`snapshot`),
and the ``MemoryEvent`` rows every mutation writes in its own transaction.

The snapshot exists in two forms, both here: :func:`snapshot` in Python and :func:`snapshot_sql` for
statements that write their events in SQL (a repeated fact's refresh). An audit reader must not tell them
apart, so ``tests/memory/store/test_audit_snapshot.py`` checks that they produce the same snapshot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import connection

from memory.models import MemoryEvent, MemoryUnit

Kind = MemoryEvent.Kind


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


def actor_user_id(actor: Actor) -> Any:
    return actor.user.pk if actor.user is not None and actor.user.is_authenticated else None


# --- snapshot ---------------------------------------------------------------


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


#: ``snapshot`` built by PostgreSQL: ``expires_at`` in ``datetime.isoformat()``'s form (UTC, microseconds
#: only when not zero), the score rounded to 4 places. ``%%`` because the statements that use it have
#: parameters.
_SNAPSHOT_SQL = """jsonb_build_object(
    'content', {r}.content, 'key', {r}.key, 'type', {r}.type, 'data', {r}.data,
    'expires_at', to_char({expires} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
                  || CASE WHEN extract(microseconds FROM {expires}) %% 1000000 = 0 THEN ''
                          ELSE to_char({expires} AT TIME ZONE 'UTC', '.US') END || '+00:00',
    'relevance_score', round({r}.relevance_score::numeric, 4))"""


def snapshot_sql(row: str, expires: str | None = None) -> str:
    """:func:`snapshot` of the memory row ``row`` (a table alias) as a ``jsonb`` SQL expression;
    ``expires`` is the expression of its expiry (``{row}.expires_at`` unless given). Both are this code's
    own text, never input."""
    return _SNAPSHOT_SQL.format(r=row, expires=expires or f"{row}.expires_at")


# --- events -----------------------------------------------------------------


def event_row(
    memory: MemoryUnit, kind: str, actor: Actor, *, before: Any = None, after: Any = None, note: str = ""
) -> MemoryEvent:
    """An unsaved event of ``memory`` (see :func:`insert_events` to write several at once)."""
    return MemoryEvent(
        tenant_id=memory.tenant_id,
        end_user_id=memory.end_user_id,
        memory_id=memory.pk,
        kind=kind,
        actor=actor.kind,
        actor_user_id=actor_user_id(actor),
        before=before,
        after=after,
        note=note[:200],
    )


def record_event(
    memory: MemoryUnit, kind: str, actor: Actor, *, before: Any = None, after: Any = None, note: str = ""
) -> None:
    """Write one event of ``memory`` now (inside the caller's transaction)."""
    event_row(memory, kind, actor, before=before, after=after, note=note).save(force_insert=True)


#: Audit events in one statement (``bulk_create`` cost a chat turn more CPU than the insert itself).
INSERT_EVENTS_SQL = """
INSERT INTO memory_memoryevent (tenant_id, end_user_id, memory_id, kind, actor, actor_user_id, before, after, note,
                                created_at)
SELECT * FROM unnest(%(tenant)s::uuid[], %(end_user)s::uuid[], %(memory)s::uuid[], %(kind)s::text[],
                     %(actor)s::text[], %(actor_user)s::int[], %(before)s::text[]::jsonb[], %(after)s::text[]::jsonb[],
                     %(note)s::text[], %(created_at)s::timestamptz[])
"""


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def event_params(events: list[MemoryEvent]) -> dict[str, list[Any]]:
    """The parameters of ``INSERT_EVENTS_SQL`` for ``events``."""
    return {
        "tenant": [e.tenant_id for e in events], "end_user": [e.end_user_id for e in events],
        "memory": [e.memory_id for e in events], "kind": [e.kind for e in events],
        "actor": [e.actor for e in events], "actor_user": [e.actor_user_id for e in events],
        "before": [_json_or_none(e.before) for e in events], "after": [_json_or_none(e.after) for e in events],
        "note": [e.note for e in events], "created_at": [e.created_at for e in events],
    }  # fmt: skip


def insert_events(events: list[MemoryEvent]) -> None:
    """Write ``events`` in one statement."""
    if not events:
        return
    with connection.cursor() as cursor:
        cursor.execute(INSERT_EVENTS_SQL, event_params(events))
