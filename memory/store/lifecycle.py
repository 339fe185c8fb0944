"""What happens to a stored memory after its write: edit, expire, extend, delete, and the cleanup of
expired memories and of superseded versions past the tenant's history retention. Each change locks the row
and writes its ``MemoryEvent`` (before and after) in the same transaction; views, the admin and the chat
runtime all call these functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from memory.embeddings import models as embeddings
from memory.models import MemoryEvent, MemoryUnit
from memory.store.audit import TENANT_API, Actor, Kind, record_event, snapshot
from memory.store.indexing import search_fields, search_vector
from memory.store.schema import InvalidMemory, check_memory_input
from tenants.models import Tenant
from tenants.retention import HISTORY_RETENTION_DAYS, retention_days
from tenants.rls import tenant_scope


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
            locked.search_text = search_fields(locked.content, locked.key, locked.data)
            locked.embedding_model = embeddings.model_for(tenant, locked.type)
            locked.embedding = embeddings.embed_one(locked.content, model=locked.embedding_model, kind="passage")
            locked.search_vector = search_vector(locked.search_text, locked.search_context, locked.search_around)
            fields += ["content", "data", "search_text", "search_vector", "embedding", "embedding_model"]
        if expires_in is not None:
            locked.expires_at = locked.created_at + timedelta(seconds=merged.expires_in)
            fields.append("expires_at")
        locked.updated_at = timezone.now()
        locked.save(update_fields=fields)
        record_event(locked, Kind.EDIT, actor, before=before, after=snapshot(locked))
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
        record_event(locked, Kind.EXPIRE, actor, before=before, after=snapshot(locked), note=note)
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
        record_event(locked, Kind.EXTEND, actor, before=before, after=snapshot(locked))
    return locked


def do_delete_memory(tenant: Tenant, memory: MemoryUnit, *, actor: Actor = TENANT_API) -> None:
    """Delete the row; its event history stays for the audit trail."""
    with tenant_scope(tenant):
        before = snapshot(memory)
        record_event(memory, Kind.DELETE, actor, before=before)
        MemoryUnit.objects.for_tenant(tenant).filter(pk=memory.pk).delete()


#: How long a superseded version is kept after its replacement, unless the tenant sets
#: ``history_retention_days``: ``as_of`` answers "what was the address in March" from these rows.
DEFAULT_HISTORY_DAYS = 90


def history_retention(tenant: Tenant) -> timedelta:
    """How long superseded versions are kept: the tenant's ``history_retention_days`` (1 to 3650,
    ``tenants.retention``), else 90 days. A bad setting falls back to the default rather than failing a
    cleanup (like ``conversation_memory_days``)."""
    days = retention_days(tenant, HISTORY_RETENTION_DAYS)
    return timedelta(days=days or DEFAULT_HISTORY_DAYS)


@dataclass(frozen=True)
class Cleanup:
    """What one cleanup removed: memories that expired while current, and superseded versions past the
    tenant's history retention."""

    expired: int = 0
    superseded: int = 0

    @property
    def total(self) -> int:
        return self.expired + self.superseded


def cleanup_q(tenant: Tenant, *, now: datetime, older_than: timedelta = timedelta(0)) -> Q:
    """The rows a cleanup at ``now`` removes. Invariants: a row valid at ``now`` is never removed (no recall
    can lose it), and a superseded version is kept until ``history_retention(tenant)`` after its
    replacement (``as_of`` a past moment still finds it); ``older_than`` only ever keeps more."""
    cutoff = now - older_than
    history_cutoff = now - max(history_retention(tenant), older_than)
    return Q(expires_at__lte=cutoff) & (Q(superseded_at__isnull=True) | Q(superseded_at__lte=history_cutoff))


def do_cleanup_expired(
    tenant: Tenant, *, older_than: timedelta = timedelta(0), now: datetime | None = None, superseded_only: bool = False
) -> Cleanup:
    """Delete what :func:`cleanup_q` selects — memories that expired more than ``older_than`` ago while
    current, and superseded versions older than the tenant's history retention — writing a ``delete``
    event for each (the audit trail keeps their content). Safe to run while the service runs: rows are
    taken 500 at a time with ``SKIP LOCKED``. ``superseded_only``: only the superseded versions (the hourly
    retention job, ``memory.store.retention``, which leaves expired current memories to the health-driven cleanup)."""
    now = now or timezone.now()
    removable = cleanup_q(tenant, now=now, older_than=older_than)
    if superseded_only:
        removable &= Q(superseded_at__isnull=False)
    expired = superseded = 0
    while True:
        with tenant_scope(tenant):
            batch = list(
                MemoryUnit.objects.for_tenant(tenant)
                .select_for_update(skip_locked=True)
                .filter(removable)
                .order_by("expires_at")[:500]
            )
            if not batch:
                return Cleanup(expired=expired, superseded=superseded)
            MemoryEvent.objects.bulk_create(
                [
                    MemoryEvent(
                        tenant_id=m.tenant_id,
                        end_user_id=m.end_user_id,
                        memory_id=m.pk,
                        kind=Kind.DELETE,
                        actor=MemoryEvent.Actor.SYSTEM,
                        before=snapshot(m),
                        note=(
                            "cleanup of a superseded version past its retention"
                            if m.superseded_at is not None
                            else "cleanup of expired memory"
                        ),
                    )
                    for m in batch
                ]
            )
            MemoryUnit.objects.for_tenant(tenant).filter(pk__in=[m.pk for m in batch]).delete()
            replaced = sum(1 for m in batch if m.superseded_at is not None)
            superseded += replaced
            expired += len(batch) - replaced
