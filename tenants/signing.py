"""Signatures on the requests memdesk sends to a tenant's back end (API.md "Tools").

Every outgoing call (a tool call in a chat turn, a batch item, later the
handoff webhook) is signed with the tenant's signing secret in two ways:

- ``X-Memdesk-Signature: sha256=<hex HMAC-SHA256 of the raw body>`` — the
  original header. It proves who sent the body, but a captured request can be
  sent again at any later time and still verify. Kept for integrations built
  on it; a tenant turns it off with ``Tenant.send_legacy_signature``.
- ``X-Memdesk-Timestamp: <t>`` and
  ``X-Memdesk-Signature-V2: t=<t>,sha256=<hex HMAC-SHA256 of "<t>.<raw body>">``
  — the timestamp is inside the MAC, so a receiver that refuses an old ``t``
  (:func:`verify_signature_v2`, 5 minutes by default) refuses replays.

:func:`verify_signature_v2` is the receiving side's check; docs/tools.md shows
the same code for tenants to copy, and the tests verify memdesk's requests
with it.
"""

from __future__ import annotations

import hashlib
import hmac
import time

SIGNATURE_HEADER = "X-Memdesk-Signature"
TIMESTAMP_HEADER = "X-Memdesk-Timestamp"
SIGNATURE_V2_HEADER = "X-Memdesk-Signature-V2"
#: How far a receiver lets ``t`` be from its own clock, in seconds (API.md: 5 minutes).
DEFAULT_TOLERANCE_S = 300


def _hmac_hex(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def sign_body(secret: str, body: bytes) -> str:
    """The ``X-Memdesk-Signature`` value: body only, no timestamp."""
    return "sha256=" + _hmac_hex(secret, body)


def sign_v2(secret: str, body: bytes, timestamp: int) -> str:
    """The ``X-Memdesk-Signature-V2`` value for ``body`` sent at ``timestamp`` (unix seconds)."""
    return f"t={timestamp},sha256=" + _hmac_hex(secret, f"{timestamp}.".encode() + body)


def signed_headers(secret: str, body: bytes, *, legacy: bool = True, now: float | None = None) -> dict[str, str]:
    """The signature headers of one request carrying ``body``. ``legacy``
    adds the body-only ``X-Memdesk-Signature`` (the tenant's setting);
    ``now`` is for tests. Sign right before sending: the receiver's
    tolerance counts from here."""
    timestamp = int(time.time() if now is None else now)
    headers = {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_V2_HEADER: sign_v2(secret, body, timestamp)}
    if legacy:
        headers[SIGNATURE_HEADER] = sign_body(secret, body)
    return headers


def verify_signature_v2(
    secret: str, header: str | None, body: bytes, now: float, tolerance: int = DEFAULT_TOLERANCE_S
) -> bool:
    """Whether ``header`` (an ``X-Memdesk-Signature-V2`` value) signs ``body``
    with ``secret`` at a time within ``tolerance`` seconds of ``now``.

    A ``t`` too far in the past is a replay (or a request that sat in a queue
    too long); one too far in the future is refused too, so a receiver with a
    slow clock cannot be handed a signature that stays valid for long. The
    MAC is compared in constant time. Never raises for a malformed header."""
    fields = dict(part.strip().partition("=")[::2] for part in (header or "").split(","))
    t, given = fields.get("t", ""), fields.get("sha256", "")
    if not (t.isascii() and t.isdigit() and len(t) <= 15) or abs(now - int(t)) > tolerance:
        return False
    expected = _hmac_hex(secret, f"{t}.".encode() + body)
    # bytes, not str: compare_digest refuses non-ASCII strings, and the header is the sender's text
    return hmac.compare_digest(expected.encode(), given.encode(errors="replace"))
