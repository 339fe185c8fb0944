"""Ids from the outside world: a UUID in a URL, a query or a frame, or the caller's own error.

A malformed id is reported exactly like an unknown one (``memory_not_found``, ``batch_not_found``, …): the
caller passes the error it raises for a missing row, so an id that cannot exist and one that does not exist
look the same to the client.
"""

from __future__ import annotations

import uuid
from typing import Any


def parse_uuid(raw: Any, invalid: Exception) -> uuid.UUID:
    """``raw`` as a UUID (its ``str()`` parsed), or ``invalid`` raised."""
    try:
        return uuid.UUID(str(raw))
    except ValueError:
        raise invalid from None
