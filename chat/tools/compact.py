"""S15's JSON: how every structured value that enters a prompt is written — a tool's arguments and result, the
execution context. It lives with the tools because they produce most of those values; the prompt
(``chat.prompt.build``) imports it from here, never the other way round."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID


def _json_default(obj: Any) -> Any:
    if isinstance(obj, datetime):
        # S17: a naive datetime is UTC by convention; an aware one is converted.
        aware = obj if obj.tzinfo is not None else obj.replace(tzinfo=UTC)
        return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(obj, date | time):
        return obj.isoformat()
    if isinstance(obj, UUID | Decimal):
        return str(obj)
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, set | frozenset):
        return sorted(obj, key=str)
    if hasattr(obj, "model_dump"):  # pydantic models
        return obj.model_dump(mode="json")
    # Refuse rather than fall back to str()/repr(): a repr in a prompt is the
    # "garbled text" S15 forbids, and this is the place to notice it.
    raise TypeError(f"{type(obj).__name__} cannot enter a prompt as JSON; convert it first (S15)")


def dumps_compact(obj: Any) -> str:
    """S15's serializer for every structured value entering a prompt: compact
    JSON, non-ASCII kept as is, datetimes as ISO 8601 UTC (``…Z``), UUIDs and
    Decimals as strings; never a Python repr (unknown types raise TypeError)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=_json_default)
