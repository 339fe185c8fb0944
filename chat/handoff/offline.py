"""When nobody can take over: business hours, who is online, and the message left for the team.

A tenant's business hours are ``Tenant.settings["business_hours"]``::

    {"timezone": "Asia/Shanghai",
     "weekly": {"mon": [["09:00", "18:00"]], "tue": [["09:00", "12:00"], ["13:00", "18:00"]], ...},
     "holidays": ["2026-12-25"]}

No ``business_hours`` (or no ``weekly``): always open. A day missing from ``weekly`` is closed; a range is
``[start, end)`` in the tenant's time zone; a holiday is closed all day. A malformed setting counts as always
open (a person may still answer) and :func:`check_business_hours` says what is wrong, for the admin.

A staff member is **online** while their console says so: ``Membership.last_seen_at`` within
:data:`ONLINE_WINDOW` (the console refreshes it every 20 seconds, ``chat.handoff.consumer``).

Outside business hours, or when the end user has waited ``offline_wait_s`` with nobody online, the end user is
offered to leave a message with a contact (:func:`availability`). What they write is stored like every message,
shows in the staff queue, and is POSTed to the tenant's ``webhook_url`` (:func:`post_left_message`), signed like
a tool call (``tenants.signing``: ``X-Memdesk-Timestamp`` and ``X-Memdesk-Signature-V2``).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx
from django.conf import settings

from memory.text import find_phones
from tenants.models import Membership, Tenant
from tenants.signing import signed_headers

logger = logging.getLogger(__name__)

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
#: A staff member whose console reported within this long is online.
ONLINE_WINDOW = timedelta(seconds=60)
WEBHOOK_TIMEOUT_S = 5.0
WEBHOOK_EVENT = "handoff.message_left"
_TIME = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$|^24:00$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


def check_business_hours(value: Any) -> str | None:
    """The problem with a ``business_hours`` setting, or None."""
    if not isinstance(value, dict):
        return "business_hours must be an object"
    try:
        ZoneInfo(str(value.get("timezone", "UTC")))
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {value.get('timezone')!r}"
    weekly = value.get("weekly", {})
    if not isinstance(weekly, dict) or any(day not in DAYS for day in weekly):
        return f"weekly must be an object with keys among {', '.join(DAYS)}"
    for day, ranges in weekly.items():
        if not isinstance(ranges, list) or not all(
            isinstance(r, list)
            and len(r) == 2
            and all(isinstance(t, str) and _TIME.match(t) for t in r)
            and r[0] < r[1]
            for r in ranges
        ):
            return f'weekly.{day} must be a list of ["HH:MM", "HH:MM"] ranges, each start before its end'
    holidays = value.get("holidays", [])
    if not isinstance(holidays, list) or not all(isinstance(d, str) and _DATE.match(d) for d in holidays):
        return 'holidays must be a list of "YYYY-MM-DD" dates'
    return None


def within_business_hours(tenant: Tenant, now: datetime) -> bool:
    """Whether ``now`` is within the tenant's business hours (see the module docstring)."""
    conf = tenant.settings.get("business_hours") if isinstance(tenant.settings, dict) else None
    if conf is None or check_business_hours(conf) is not None or "weekly" not in conf:
        return True
    local = now.astimezone(ZoneInfo(str(conf.get("timezone", "UTC"))))
    if local.date().isoformat() in conf.get("holidays", []):
        return False
    clock = local.strftime("%H:%M")
    return any(start <= clock < end for start, end in conf["weekly"].get(DAYS[local.weekday()], []))


def staff_online(tenant: Tenant, now: datetime) -> bool:
    """Whether any staff member of the tenant has a console open (see :data:`ONLINE_WINDOW`)."""
    return Membership.objects.filter(tenant=tenant, last_seen_at__gte=now - ONLINE_WINDOW).exists()


@dataclass(frozen=True)
class Availability:
    open: bool  # within business hours
    online: bool  # a staff member's console is open
    leave_message: bool  # the end user is offered to leave a message with a contact


def availability(tenant: Tenant, now: datetime, *, waiting_since: datetime | None, wait_s: int) -> Availability:
    """Whether a person can take over a conversation waiting since ``waiting_since`` (``now`` for a handoff
    being asked for): outside business hours, or after ``wait_s`` with nobody online, the end user is offered
    to leave a message."""
    is_open = within_business_hours(tenant, now)
    online = staff_online(tenant, now) if is_open else False
    waited = (now - (waiting_since or now)).total_seconds()
    return Availability(is_open, online, not is_open or (not online and waited >= wait_s))


def contact_in(text: str) -> dict[str, str]:
    """The phone number and e-mail address a left message gives, if any (the tenant's own webhook gets them whole:
    it is how the team calls back)."""
    contact: dict[str, str] = {}
    phones = find_phones(text, settings.PHONE_REGIONS)
    if phones:
        contact["phone"] = phones[0].value
    email = _EMAIL.search(text)
    if email:
        contact["email"] = email.group(0)
    return contact


def left_message_body(tenant: Tenant, session: Any, message: Any, availability: Availability) -> bytes:
    """The webhook's JSON body for one message left while nobody could answer."""
    return json.dumps(
        {
            "event": WEBHOOK_EVENT,
            "tenant": tenant.slug,
            "session_id": str(session.pk),
            "end_user_id": session.end_user.external_id,
            "message": {
                "id": str(message.pk),
                "text": message.text,
                "created_at": message.created_at.isoformat().replace("+00:00", "Z"),
            },
            "contact": contact_in(message.text),
            "handoff": {"trigger": session.handoff_trigger, "reason": session.handoff_reason},
            "business_hours_open": availability.open,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode()


async def post_left_message(tenant: Tenant, url: str, body: bytes) -> int | None:
    """POST ``body`` to ``url`` signed with the tenant's secret; the HTTP status, or None when it could not be
    delivered (logged: the message itself is stored and in the staff queue either way). Signed right before
    sending: the receiver's tolerance for ``t`` counts from here."""
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": "memdesk-handoff/1",
        **signed_headers(tenant.signing_secret, body, legacy=tenant.send_legacy_signature),
    }
    try:
        async with httpx.AsyncClient(timeout=WEBHOOK_TIMEOUT_S, follow_redirects=False) as client:
            response = await client.post(url, content=body, headers=headers)
    except httpx.HTTPError as exc:
        logger.warning("handoff webhook of tenant %s failed: %s", tenant.slug, exc)
        return None
    if not 200 <= response.status_code < 300:
        logger.warning("handoff webhook of tenant %s answered HTTP %s", tenant.slug, response.status_code)
    return response.status_code
