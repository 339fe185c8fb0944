"""Message retention: a tenant's chat messages older than its ``message_retention_days`` are deleted.

Run by the worker's hourly retention job (``chat.privacy.retention``), which then deletes the sessions left empty.
Unset, messages are kept. What points at a deleted message is kept and let go of it: a memory's
``source_message`` and an amnesia alert's ``message`` become NULL, a reply's ``reply_to`` too.

Invariant: **a message of a turn still running is never deleted.** A running turn holds a lease on its user
message (``Message.turn_lease_until``, ``chat.sessions.messages``) and writes its tool messages and its reply after
it; every message whose lease is still in force is excluded here, and the others a turn writes are seconds
old while the cutoff is at least a day (``tenants.retention.MIN_DAYS``) in the past. A lease that lapsed
(its process died) no longer protects its message.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from conversations.models import Message
from tenants.models import Tenant
from tenants.retention import MESSAGE_RETENTION_DAYS, delete_in_locked_batches, retention_days
from tenants.rls import tenant_scope

#: Messages deleted per transaction: short transactions, and rows a turn has locked are skipped, not waited for.
BATCH = 1000


def message_retention(tenant: Tenant) -> timedelta | None:
    """How long the tenant keeps messages; None keeps them for good."""
    days = retention_days(tenant, MESSAGE_RETENTION_DAYS)
    return timedelta(days=days) if days else None


def expired_messages_q(tenant: Tenant, *, now: datetime) -> Q | None:
    """The messages retention deletes at ``now`` (None: the tenant keeps every message): created more than
    ``message_retention_days`` ago, and not held by a running turn's lease (see the module's invariant)."""
    keep_for = message_retention(tenant)
    if keep_for is None:
        return None
    return Q(created_at__lte=now - keep_for) & (Q(turn_lease_until__isnull=True) | Q(turn_lease_until__lte=now))


def do_delete_old_messages(tenant: Tenant, *, now: datetime | None = None, dry_run: bool = False) -> int:
    """Delete what :func:`expired_messages_q` selects, ``BATCH`` rows per transaction with ``SKIP LOCKED``
    (safe while the service runs; a skipped row goes on the next run). Returns how many were deleted, or
    with ``dry_run`` how many would be."""
    now = now or timezone.now()
    expired = expired_messages_q(tenant, now=now)
    if expired is None:
        return 0
    if dry_run:
        with tenant_scope(tenant):
            return Message.objects.for_tenant(tenant).filter(expired).count()
    # The ORM's delete (not raw SQL): it sets the SET_NULL references (memories' source_message, amnesia
    # alerts, replies' reply_to) to NULL in the same transaction.
    return delete_in_locked_batches(tenant, Message, expired, order_by="created_at", size=BATCH)
