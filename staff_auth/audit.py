"""The audit trail of staff identity: one ``StaffAuthEvent`` per step, written by the service that takes it, in
the same transaction."""

from __future__ import annotations

from typing import Any

from staff_auth.models import Invitation, StaffAuthEvent
from tenants.models import Tenant


def record_event(
    kind: StaffAuthEvent.Kind,
    *,
    tenant: Tenant | None = None,
    user: Any = None,
    actor: Any = None,
    invitation: Invitation | None = None,
    **detail: Any,
) -> StaffAuthEvent:
    """Writes the event; ``detail`` holds JSON values only (codes, slugs, roles, group names), never a token."""
    return StaffAuthEvent.objects.create(
        kind=kind, tenant=tenant, user=user, actor=actor, invitation=invitation, detail=detail
    )
