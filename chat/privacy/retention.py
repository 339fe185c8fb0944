"""The retention job: each tenant's retention settings (``tenants.retention``) applied, hourly on the worker
(``chat.tasks.apply_retention_task``) or by hand (``manage.py apply_retention``).

For one tenant, in this order: messages older than ``message_retention_days`` (``conversations.retention``);
memories older than ``memory_retention_days``, their audit events, and superseded versions past
``history_retention_days`` (``memory.store.retention``); then the sessions retention left empty (here, since only
this layer knows everything that hangs off a session). docs/operations.md § Data retention is the
operator's version.

A session is deleted when it is over (closed, or past its ``expires_at``), quiet for longer than
``message_retention_days`` (``last_activity_at``), and nothing of the conversation is left: no message, no
memory (a session's memories go by their own lifetime and retention, each with its audit event, never
silently with their session) and no batch still to run. What goes with it: its execution context, its
rating, its finished batches, its amnesia alerts. Staff-access rows that named it keep the end user and lose the session
(``StaffAccess.session`` set to NULL first), so "who read this person's data" survives. Tenants that keep
messages (no ``message_retention_days``) keep their sessions.

Idempotent, and safe while the service runs: every step takes its rows in small batches with ``SKIP
LOCKED``; a row skipped goes on the next run.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from chat.models import Batch
from conversations.models import ChatSession, Message
from conversations.retention import do_delete_old_messages, expired_messages_q, message_retention
from memory.models import MemoryUnit
from memory.store import do_apply_memory_retention
from tenants.models import Tenant
from tenants.retention import delete_in_locked_batches
from tenants.rls import operator_scope, tenant_scope

logger = logging.getLogger(__name__)

SESSION_BATCH = 500


@dataclass(frozen=True)
class Retention:
    """What one run removed from one tenant (or, dry, would remove)."""

    tenant: str
    messages: int = 0
    sessions: int = 0
    memories: int = 0
    memory_events: int = 0
    history: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def do_apply_retention(tenant: Tenant, *, now: datetime | None = None, dry_run: bool = False) -> Retention:
    """Apply the tenant's retention at ``now`` (see the module docstring); ``dry_run`` counts and deletes
    nothing."""
    now = now or timezone.now()
    messages = do_delete_old_messages(tenant, now=now, dry_run=dry_run)
    memory = do_apply_memory_retention(tenant, now=now, dry_run=dry_run)
    sessions = _delete_empty_sessions(tenant, now=now, dry_run=dry_run)
    return Retention(
        tenant=tenant.slug,
        messages=messages,
        sessions=sessions,
        memories=memory.memories,
        memory_events=memory.events,
        history=memory.history,
    )


def apply_retention_all(
    *, now: datetime | None = None, dry_run: bool = False, slug: str | None = None
) -> list[Retention]:
    """:func:`do_apply_retention` for every tenant (or the one with ``slug``). One tenant's failure is logged
    and the others go on; the next run tries it again."""
    with operator_scope():  # the job speaks for every tenant, visibly; each tenant's work is scoped to it
        tenants = Tenant.objects.order_by("slug")
        tenants = list(tenants.filter(slug=slug) if slug else tenants)
    results = []
    for tenant in tenants:
        try:
            results.append(do_apply_retention(tenant, now=now, dry_run=dry_run))
        except Exception:
            logger.exception("retention of tenant %s failed; the next run tries again", tenant.slug)
    return results


def _empty_sessions_q(tenant: Tenant, *, now: datetime, dry_run: bool) -> Q | None:
    keep_for = message_retention(tenant)
    if keep_for is None:
        return None
    messages = Message.objects.for_tenant(tenant).filter(session=OuterRef("pk"))
    if dry_run:  # nothing is deleted: the messages that would be left are the ones retention keeps
        expired = expired_messages_q(tenant, now=now)
        assert expired is not None  # set exactly when message_retention is
        messages = messages.exclude(expired)
    memories = MemoryUnit.objects.for_tenant(tenant).filter(session=OuterRef("pk"))
    unfinished = Batch.objects.for_tenant(tenant).filter(session=OuterRef("pk")).exclude(status=Batch.Status.DONE)
    over = Q(status=ChatSession.Status.CLOSED) | Q(expires_at__lte=now)
    return over & Q(last_activity_at__lte=now - keep_for) & ~Exists(messages) & ~Exists(memories) & ~Exists(unfinished)


def _delete_empty_sessions(tenant: Tenant, *, now: datetime, dry_run: bool) -> int:
    empty = _empty_sessions_q(tenant, now=now, dry_run=dry_run)
    if empty is None:
        return 0
    if dry_run:
        with tenant_scope(tenant):
            return ChatSession.objects.for_tenant(tenant).filter(empty).count()
    # The lock makes the emptiness hold until the delete: a turn's store (which locks its session first)
    # waits, then finds the session gone. Staff-access rows that name a session keep the end user (SET_NULL).
    return delete_in_locked_batches(tenant, ChatSession, empty, order_by="last_activity_at", size=SESSION_BATCH)
