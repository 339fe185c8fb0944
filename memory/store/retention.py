"""Memory retention: a tenant's ``memory_retention_days`` (M) and ``history_retention_days`` (H) applied.

Run by the worker's hourly retention job (``chat.privacy.retention``), which also deletes old messages.

- **M, memories.** A memory created more than M days ago is deleted, whatever its own lifetime: current or
  superseded, valid or expired. A memory whose own lifetime is shorter is unaffected by M: it expires at its
  ``expires_at`` and the existing cleanup (``memory.store.lifecycle.do_cleanup_expired``) removes it. The audit
  trail keeps no more than the memory: the events of a memory deleted here go with it, one content-free
  ``delete`` event (its type and key, no content) records that retention removed it, and every event older
  than M days is deleted (an event carries the memory's content; a memory still stored is younger than M,
  and so are its events). Unset, memories live their own lifetime and their events are kept.
- **H, history.** A superseded version is deleted H days after its replacement (default 90, the rule's
  home is ``memory.store.lifecycle.cleanup_q``); this job applies it hourly, where the health-driven cleanup
  does so daily. Its ``delete`` event keeps the content, as the cleanup's always has (and, with M set,
  for at most M days).

Both take rows a few hundred at a time with ``SKIP LOCKED``: safe while the service runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from memory.models import MemoryEvent, MemoryUnit
from memory.store.audit import Kind
from memory.store.lifecycle import cleanup_q, do_cleanup_expired
from tenants.models import Tenant
from tenants.retention import MEMORY_RETENTION_DAYS, retention_days
from tenants.rls import tenant_scope

BATCH = 500
RETENTION_NOTE = "retention: created more than memory_retention_days ago"


@dataclass(frozen=True)
class MemoryRetention:
    """What one run deleted (or, dry, would delete): memories past M, audit events (of those memories, and
    older than M), superseded versions past H."""

    memories: int = 0
    events: int = 0
    history: int = 0


def memory_retention(tenant: Tenant) -> timedelta | None:
    """How long after its creation a memory may be kept at most; None: its own lifetime decides."""
    days = retention_days(tenant, MEMORY_RETENTION_DAYS)
    return timedelta(days=days) if days else None


def do_apply_memory_retention(tenant: Tenant, *, now: datetime | None = None, dry_run: bool = False) -> MemoryRetention:
    """Apply M, then H, to the tenant's memories at ``now`` (see the module docstring); with ``dry_run``
    only count what would go."""
    now = now or timezone.now()
    keep_for = memory_retention(tenant)
    cutoff = now - keep_for if keep_for is not None else None
    history = cleanup_q(tenant, now=now) & Q(superseded_at__isnull=False)
    if dry_run:
        return _count(tenant, cutoff, history)
    memories = events = 0
    if cutoff is not None:
        memories, events = _delete_old_memories(tenant, cutoff, now=now)
        events += _delete_old_events(tenant, cutoff)
    superseded = do_cleanup_expired(tenant, now=now, superseded_only=True).superseded
    return MemoryRetention(memories=memories, events=events, history=superseded)


def _count(tenant: Tenant, cutoff: datetime | None, history: Q) -> MemoryRetention:
    with tenant_scope(tenant):
        rows = MemoryUnit.objects.for_tenant(tenant)
        if cutoff is None:
            return MemoryRetention(history=rows.filter(history).count())
        old = rows.filter(created_at__lte=cutoff)
        events = MemoryEvent.objects.for_tenant(tenant).filter(
            Q(created_at__lte=cutoff) | Q(memory_id__in=old.values("pk"))
        )
        return MemoryRetention(
            memories=old.count(),
            events=events.count(),
            history=rows.filter(history).exclude(created_at__lte=cutoff).count(),
        )


def _delete_old_memories(tenant: Tenant, cutoff: datetime, *, now: datetime) -> tuple[int, int]:
    """Memories created at or before ``cutoff``, with their events; returns (memories, events) deleted."""
    memories = events = 0
    while True:
        with tenant_scope(tenant):
            batch = list(
                MemoryUnit.objects.for_tenant(tenant)
                .select_for_update(skip_locked=True)
                .filter(created_at__lte=cutoff)
                .order_by("created_at")
                .only("pk", "tenant_id", "end_user_id", "type", "key")[:BATCH]
            )
            if not batch:
                return memories, events
            ids = [m.pk for m in batch]
            events += MemoryEvent.objects.for_tenant(tenant).filter(memory_id__in=ids).delete()[0]
            MemoryEvent.objects.bulk_create(
                [
                    MemoryEvent(
                        tenant_id=m.tenant_id, end_user_id=m.end_user_id, memory_id=m.pk, kind=Kind.DELETE,
                        actor=MemoryEvent.Actor.SYSTEM, before={"type": m.type, "key": m.key}, note=RETENTION_NOTE,
                        created_at=now,
                    )
                    for m in batch
                ]
            )  # fmt: skip
            # The ORM's delete: it lets go of what points at these rows (a newer version's superseded_by).
            MemoryUnit.objects.for_tenant(tenant).filter(pk__in=ids).delete()
            memories += len(batch)


def _delete_old_events(tenant: Tenant, cutoff: datetime) -> int:
    """Audit events written at or before ``cutoff``; their memories are gone (created before them)."""
    deleted = 0
    while True:
        with tenant_scope(tenant):
            ids = list(
                MemoryEvent.objects.for_tenant(tenant)
                .filter(created_at__lte=cutoff)
                .values_list("pk", flat=True)[: BATCH * 10]
            )
            if not ids:
                return deleted
            deleted += MemoryEvent.objects.for_tenant(tenant).filter(pk__in=ids).delete()[0]
