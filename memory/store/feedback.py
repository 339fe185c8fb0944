"""How memories are used: relevance feedback (S5/S13) moves a memory's score and writes its audit event;
recall counts how often a memory was recalled.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.utils import timezone

from config.errors import ApiError
from memory.models import MAX_SCORE, MIN_SCORE, MemoryUnit
from memory.store.audit import SYSTEM, Actor, Kind, actor_user_id
from memory.store.read import RECALLED_ITEM, MemoryNotFound
from tenants.models import Tenant
from tenants.rls import tenant_scope

FEEDBACK_DELTAS = {"used": 0.1, "ignored": -0.3, "misled": -0.3, "confirmed": 0.0}
FEEDBACK_KINDS = {"used": Kind.USE, "ignored": Kind.IGNORE, "misled": Kind.MISLEAD, "confirmed": Kind.CONFIRM}
_COUNTERS = {"used": "use_count", "ignored": "ignore_count", "misled": "mislead_count", "confirmed": "confirm_count"}


#: One relevance event for several memories in one statement: the rows are locked and their scores read
#: (``feedback_old``), updated with the arithmetic in SQL (so concurrent events add up), and each gets its
#: audit event with the score before and after. Three WITH items (``feedback_old``, ``feedback_updated``,
#: ``feedback_events``) that ``apply_feedback`` runs on their own and a chat turn inside the statement that
#: stores its reply (``feedback_sql``). ``{counter}`` is one of ``_COUNTERS``' column names.
#:
#: Both scans name the ids (``id = ANY``): the update finds its rows by the primary key, not through a join
#: whose order the planner picks from the table's statistics. Joined to the locked rows instead
#: (``UPDATE … FROM (SELECT … FOR UPDATE) old WHERE m.id = old.id``), the statement that stores a reply and
#: carries this feedback ran CPU-bound for 100–800 ms in some runs of the chat load on a table grown since its
#: last ANALYZE, while PostgreSQL counted tens of thousands of scans of the tenant's index, each reading every
#: memory of the tenant (bench/RESULTS.md, "Cost on the chat load"). The locked rows are MATERIALIZED: read
#: once, before the update, whatever the plan.
_FEEDBACK_ITEMS = """
feedback_old AS MATERIALIZED (
    SELECT id, relevance_score FROM memory_memoryunit
    WHERE tenant_id = %(tenant)s AND id = ANY(%(fb_ids)s) FOR UPDATE
), feedback_updated AS (
    UPDATE memory_memoryunit m
    SET relevance_score = LEAST(%(fb_max)s, GREATEST(%(fb_min)s, m.relevance_score + %(fb_delta)s)),
        {counter} = m.{counter} + 1
    WHERE m.tenant_id = %(tenant)s AND m.id = ANY(%(fb_ids)s) AND m.id IN (SELECT id FROM feedback_old)
    RETURNING m.id, m.end_user_id, (SELECT o.relevance_score FROM feedback_old o WHERE o.id = m.id) AS before,
              m.relevance_score AS after
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
        "fb_note": note[:200], "fb_actor_user": actor_user_id(actor),
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


_MARK_RECALLED_SQL = f"WITH {RECALLED_ITEM} SELECT 1"


def mark_recalled(tenant: Tenant, memory_ids: list[Any]) -> None:
    """Each of ``memory_ids``' recall count up by one (recall with ``record=True``; a chat turn counts its
    recalled memories in the anchor's statement instead, ``memory.store.read.anchor_facts``)."""
    if memory_ids:
        with connection.cursor() as cursor:
            cursor.execute(_MARK_RECALLED_SQL, {"tenant": tenant.pk, "recalled": list(memory_ids)})
