"""A tenant's retention settings: how long its end users' data is kept, in days, in ``Tenant.settings``.

Three keys, each set in the tenant's admin form (``tenants.admin.TenantForm``), which refuses a value outside
``MIN_DAYS``–``MAX_DAYS``:

- ``message_retention_days``: chat messages (``conversations.retention``); unset keeps them;
- ``memory_retention_days``: memories counted from their creation, whatever their own lifetime, and the memory
  audit trail (``memory.retention``); unset keeps them for their own lifetime;
- ``history_retention_days``: superseded versions of a memory after their replacement (``memory.lifecycle``,
  default 90 days there).

The worker's hourly job applies them (``chat.retention``); docs/operations.md § Data retention says exactly
what goes when.
"""

from __future__ import annotations

from typing import Any

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
