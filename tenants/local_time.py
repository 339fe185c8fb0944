"""A tenant's time zone: the one its staff pages show times in.

``Tenant.settings["timezone"]`` (an IANA name, ``"Asia/Shanghai"``) when set; otherwise the time zone of the
tenant's business hours (``settings["business_hours"]["timezone"]``, the handoff's); otherwise UTC. Stored times
stay UTC: a page that shows one tenant's data renders them in this zone (``timezone.override`` in a view, the
``{% timezone %}`` tag in a template). A name that is not a time zone is refused where it is set
(:func:`is_timezone`, the tenant form) and read as UTC here, so a bad value never breaks a page.
"""

from __future__ import annotations

from datetime import UTC, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tenants.models import Tenant

KEY = "timezone"


def _zone(name: Any) -> tzinfo | None:
    if not isinstance(name, str) or not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def is_timezone(value: Any) -> bool:
    """Whether ``value`` names a time zone (an IANA name, ``"Europe/Paris"``)."""
    return _zone(value) is not None


def tenant_timezone(tenant: Tenant) -> tzinfo:
    """The zone ``tenant``'s staff pages show times in (see the module docstring)."""
    stored = tenant.settings if isinstance(tenant.settings, dict) else {}
    hours = stored.get("business_hours")
    for name in (stored.get(KEY), hours.get("timezone") if isinstance(hours, dict) else None):
        zone = _zone(name)
        if zone is not None:
            return zone
    return UTC
