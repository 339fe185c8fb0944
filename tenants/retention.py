"""A tenant's retention settings: how long its end users' data is kept, in days, in ``Tenant.settings``.

Three keys, each set in the tenant's admin form (``tenants.admin.TenantForm``), which refuses a value outside
``MIN_DAYS``–``MAX_DAYS``:

- ``message_retention_days``: chat messages (``conversations.retention``); unset keeps them;
- ``memory_retention_days``: memories counted from their creation, whatever their own lifetime, and the memory
  audit trail (``memory.store.retention``); unset keeps them for their own lifetime;
- ``history_retention_days``: superseded versions of a memory after their replacement (``memory.store.lifecycle``,
  default 90 days there).

The worker's hourly job applies them (``chat.privacy.retention``); docs/operations.md § Data retention says exactly
what goes when.
"""

from __future__ import annotations

from typing import Any

from django.db import models

from tenants.rls import tenant_scope

MESSAGE_RETENTION_DAYS = "message_retention_days"
MEMORY_RETENTION_DAYS = "memory_retention_days"
HISTORY_RETENTION_DAYS = "history_retention_days"
RETENTION_KEYS = (MESSAGE_RETENTION_DAYS, MEMORY_RETENTION_DAYS, HISTORY_RETENTION_DAYS)

MIN_DAYS = 1
MAX_DAYS = 3650


def retention_days(tenant: Any, key: str) -> int | None:
    """The tenant's setting ``key`` in days, or None when it is unset or not a whole number of days within
    bounds. A bad value (written into the JSON by hand) never fails the job, and never deletes anything: None
    means the caller's default, which for messages and memories is "keep"."""
    raw = tenant.settings.get(key) if isinstance(tenant.settings, dict) else None
    if isinstance(raw, int) and not isinstance(raw, bool) and MIN_DAYS <= raw <= MAX_DAYS:
        return raw
    return None


def delete_in_locked_batches(
    tenant: Any, model: type[models.Model], condition: models.Q, *, order_by: str, size: int
) -> int:
    """Delete the tenant's ``model`` rows matching ``condition``, oldest by ``order_by`` first, ``size`` rows per
    transaction of the tenant's scope, each batch locked with ``SKIP LOCKED`` before its delete: safe while the
    service runs (a row a request holds is left to the next run, never waited for) and no long transaction.
    The ORM's delete, so what points at the rows is let go of (``SET_NULL``) or goes with them (``CASCADE``)
    in the same transaction. Returns how many rows of ``model`` were deleted."""
    deleted = 0
    while True:
        with tenant_scope(tenant):
            rows = model.objects.for_tenant(tenant)  # type: ignore[attr-defined]  # a TenantOwned model
            ids = list(
                rows.select_for_update(skip_locked=True)
                .filter(condition)
                .order_by(order_by)
                .values_list("pk", flat=True)[:size]
            )
            if not ids:
                return deleted
            rows.filter(pk__in=ids).delete()
            deleted += len(ids)
