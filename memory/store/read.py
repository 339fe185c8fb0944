"""Scoped reads of memories, and the one home of the validity rule.

A memory is **valid at** ``as_of`` when ``created_at <= as_of < expires_at`` (a replaced memory's
``expires_at`` is cut to the moment of its replacement, so a past ``as_of`` still sees it). The rule is
written here three times, in the three forms its callers need, and nowhere else: :func:`is_valid_at`
(Python, on a loaded row), :func:`valid_q` (the ORM) and :func:`valid_sql` (hand-written SQL);
``tests/memory/store/test_validity_rule.py`` checks that they agree.

A session sees its own session-scoped memories and its end user's other memories (API.md):
:func:`scope_q` for the ORM, :data:`SCOPE_SQL` for the hot reads of a chat turn (:func:`fetch_memories`,
:func:`anchor_facts`, :func:`session_values`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from config.db.sql import fetch_rows, load_models
from config.errors import NotFound
from config.ids import parse_uuid
from conversations.access import require_session_id
from conversations.models import ChatSession
from memory.models import SESSION_TYPES, MemoryUnit
from tenants.models import EndUser, Tenant
from tenants.rls import tenant_scope

#: Columns recall and writes never read back: the embedding (384 floats to parse per row) and the search index.
HEAVY_FIELDS = ("embedding", "search_vector", "search_text", "search_context", "search_around")


class MemoryNotFound(NotFound):
    code = "memory_not_found"


# --- validity ---------------------------------------------------------------


def is_valid_at(memory: MemoryUnit, as_of: datetime) -> bool:
    """Whether ``memory`` is valid at ``as_of``: created by then and not yet expired."""
    return memory.created_at <= as_of < memory.expires_at


def valid_q(as_of: datetime) -> Q:
    """:func:`is_valid_at` as an ORM filter."""
    return Q(created_at__lte=as_of, expires_at__gt=as_of)


def valid_sql(row: str, as_of: str) -> str:
    """:func:`is_valid_at` as SQL: ``row`` is the memory's table or alias, ``as_of`` an SQL expression
    (usually a placeholder such as ``%(as_of)s``). Both are this code's own text, never input."""
    return f"{row}.created_at <= {as_of} AND {row}.expires_at > {as_of}"


# --- scope ------------------------------------------------------------------


def scope_q(session: ChatSession) -> Q:
    """Rows a session may see: its own session-scoped memories and its end
    user's other memories (API.md)."""
    return Q(type__in=SESSION_TYPES, session_id=session.pk) | (
        ~Q(type__in=SESSION_TYPES) & Q(end_user_id=session.end_user_id)
    )


#: Memories visible to a session (``scope_q``) and valid at ``as_of`` (``valid_sql``), in SQL, for the hot
#: reads of a chat turn that skip the ORM's query compiler (``fetch_memories``). ``end_user_id`` holds for
#: both branches (a session's memories are its end user's), so indexes led by (tenant, end user) serve it.
#: A chat turn never sees a memory of a frozen topic (``data`` has ``frozen_topic``: memory/topics/freeze.py);
#: it is still stored, listed and valid, and comes back when the user returns to its topic.
SCOPE_SQL = f"""m.tenant_id = %(tenant)s AND m.end_user_id = %(end_user)s
    AND ((m.type = ANY(%(session_types)s) AND m.session_id = %(session)s)
         OR (m.type <> ALL(%(session_types)s) AND m.end_user_id = %(end_user)s))
    AND {valid_sql("m", "%(as_of)s")} AND (m.data -> 'frozen_topic') IS NULL"""


def scope_params(tenant: Tenant, session: ChatSession, as_of: datetime) -> dict[str, Any]:
    """The parameters of ``SCOPE_SQL``."""
    return {
        "tenant": tenant.pk, "session": session.pk, "end_user": session.end_user_id,
        "session_types": list(SESSION_TYPES), "as_of": as_of,
    }  # fmt: skip


# --- what a chat turn reads besides recall ----------------------------------

#: The recall count as a WITH item (parameters ``tenant`` and ``recalled``, the memory ids): the anchor's read
#: counts a turn's recalled memories in its own statement, ``memory.store.feedback.mark_recalled`` on its own.
RECALLED_ITEM = (
    "recalled AS (UPDATE memory_memoryunit SET recall_count = recall_count + 1"
    " WHERE tenant_id = %(tenant)s AND id = ANY(%(recalled)s))"
)

# The best live memory of each anchor key, with the recall count of the turn's recalled memories in the same
# statement (a data-modifying WITH runs whether or not it is read; the anchor reads only ``key`` and ``content``,
# which it does not change).
_ANCHOR_TEMPLATE = """WITH {recalled}
SELECT DISTINCT ON (m.key) m.key, m.content FROM memory_memoryunit m
WHERE {scope} AND m.key = ANY(%(keys)s)
ORDER BY m.key, m.relevance_score DESC, m.created_at DESC, m.id"""
_ANCHOR_SQL = _ANCHOR_TEMPLATE.format(recalled=RECALLED_ITEM, scope=SCOPE_SQL)

_SESSION_VALUES_TEMPLATE = "SELECT m.content, m.data::text FROM memory_memoryunit m WHERE {scope}"
_SESSION_VALUES_SQL = _SESSION_VALUES_TEMPLATE.format(scope=SCOPE_SQL)


def anchor_facts(
    tenant: Tenant, session: ChatSession, keys: Sequence[str], *, as_of: datetime, count_recalled: Sequence[Any] = ()
) -> list[tuple[str, str]]:
    """The anchor's facts: for each of ``keys`` that has one, the session's best live memory of it (highest
    ``relevance_score``, then newest), as ``(key, content)`` in the order of ``keys`` — the one reading the
    prompt (``chat.turn.prepare``) and the handoff note share. ``count_recalled``: memory ids whose
    ``recall_count`` goes up by one in the same statement (a turn's recalled memories: one round trip).
    The caller holds the tenant's scope."""
    params = {**scope_params(tenant, session, as_of), "keys": list(keys), "recalled": list(count_recalled)}
    best = dict(fetch_rows(_ANCHOR_SQL, params))
    return [(key, best[key]) for key in keys if key in best]


def session_values(tenant: Tenant, session: ChatSession, *, as_of: datetime) -> list[str]:
    """Every text the session's live memories hold (each one's ``content`` and its ``data`` as JSON text), for
    finding which stored value a masked one (「138****1234」) stands for. The caller holds the tenant's scope."""
    rows = fetch_rows(_SESSION_VALUES_SQL, scope_params(tenant, session, as_of))
    return [text for row in rows for text in row if text]


# --- the raw loader ---------------------------------------------------------

# ``where`` and ``order`` are this code's own SQL; every value is a parameter.
_FETCH_SQL = """SELECT {columns}, u.external_id AS end_user_external_id
FROM memory_memoryunit m JOIN tenants_enduser u ON u.tenant_id = m.tenant_id AND u.id = m.end_user_id
WHERE m.tenant_id = %(tenant)s AND ({where}) ORDER BY {order}"""


@functools.cache
def light_columns() -> str:
    """The memory's columns but ``HEAVY_FIELDS``, qualified by ``m.``."""
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
    sql = _FETCH_SQL.format(columns=light_columns(), where=where, order=order)
    sql += (f" LIMIT {int(limit)}" if limit is not None else "") + (" FOR UPDATE OF m" if lock else "")
    rows = load_models(MemoryUnit, sql, {**params, "tenant": tenant.pk})  # the SQL names the tenant
    for memory in rows:
        attach_end_user(memory)
    return rows


def attach_end_user(memory: MemoryUnit) -> None:
    """Set ``memory.end_user`` from the ``end_user_external_id`` column a raw read selected with it, so
    serialising the memory needs no query."""
    memory.end_user = EndUser.from_db(
        connection.alias, ["id", "tenant_id", "external_id"],
        [memory.end_user_id, memory.tenant_id, memory.end_user_external_id],
    )  # fmt: skip


# --- the ORM reads ----------------------------------------------------------


@require_session_id
def visible_memories(tenant: Tenant, session: ChatSession) -> QuerySet[MemoryUnit]:
    return MemoryUnit.objects.for_tenant(tenant).filter(scope_q(session))


@require_session_id
def get_visible_memory(tenant: Tenant, session: ChatSession, memory_id: Any) -> MemoryUnit:
    memory_id = parse_uuid(memory_id, MemoryNotFound("No such memory."))
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
