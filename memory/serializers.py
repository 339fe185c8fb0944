from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from config.text_input import TextField, field_json, field_text
from memory.models import MAX_CONTENT, MemoryType, MemoryUnit
from memory.recall.pipeline import MAX_K
from memory.store.read import is_valid_at
from memory.store.schema import MAX_EXPIRES_IN


def parse_as_of(raw: Any) -> datetime | None:
    """ISO 8601; a naive time is taken as UTC (S17). Anything that is not a
    real instant — month 13, an offset of 24 hours or more, a time that
    leaves datetime's range once moved to UTC — is 400 ``invalid_as_of``."""
    if raw in (None, ""):
        return None
    invalid = serializers.ValidationError(
        "as_of must be an ISO 8601 date-time, e.g. 2026-11-30T12:00:00Z", code="invalid_as_of"
    )
    if not isinstance(raw, str):
        raise invalid
    try:
        # parse_datetime raises ValueError for well-formed but impossible values; astimezone raises
        # OverflowError when the offset pushes the instant past year 1 or 9999.
        value = parse_datetime(raw.strip().replace(" ", "+"))
        if value is None:
            raise invalid
        if timezone.is_naive(value):
            value = timezone.make_aware(value, UTC)
        return value.astimezone(UTC)
    except (ValueError, OverflowError):
        raise invalid from None


class StrictTypeField(serializers.CharField):
    def to_internal_value(self, data: Any) -> str:
        if data not in MemoryType.values:
            raise serializers.ValidationError(
                f"type must be one of {', '.join(MemoryType.values)}", code="unknown_type"
            )
        return str(data)


class ContentField(serializers.CharField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("content must be a string")
        data = field_text(data, field="content")
        if len(data.strip()) > MAX_CONTENT:
            raise serializers.ValidationError(
                f"content must be at most {MAX_CONTENT} characters (got {len(data.strip())})",
                code="content_too_long",
            )
        return super().to_internal_value(data)


class MemoryCreateIn(serializers.Serializer):
    type = StrictTypeField()
    content = ContentField()
    key = serializers.RegexField(r"^[A-Za-z0-9_.:-]{1,100}$", required=False, allow_null=True)
    data = serializers.DictField(required=False, default=dict)
    expires_in = serializers.IntegerField(required=False, min_value=1, max_value=MAX_EXPIRES_IN)

    def validate_data(self, value: dict[str, Any]) -> dict[str, Any]:
        return field_json(value, field="data")


class MemoryPatchIn(serializers.Serializer):
    content = ContentField(required=False)
    data = serializers.DictField(required=False)
    expires_in = serializers.IntegerField(required=False, min_value=1, max_value=MAX_EXPIRES_IN)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError("send at least one of content, data, expires_in")
        return attrs

    def validate_data(self, value: dict[str, Any]) -> dict[str, Any]:
        return field_json(value, field="data")


class MemoryListQuery(serializers.Serializer):
    type = StrictTypeField(required=False)
    as_of = serializers.CharField(required=False)
    include_expired = serializers.BooleanField(required=False, default=False)

    def validate_as_of(self, value: str) -> datetime | None:
        return parse_as_of(value)


class FeedbackIn(serializers.Serializer):
    event = serializers.ChoiceField(choices=["used", "ignored", "misled", "confirmed"])


class RecallIn(serializers.Serializer):
    # Not stored, but normalised like stored text so an NFC query finds its NFD-typed twin.
    query = TextField(max_length=2000, trim_whitespace=True)
    as_of = serializers.CharField(required=False, allow_null=True)
    k = serializers.JSONField(required=False, default=5)

    def validate_as_of(self, value: str | None) -> datetime | None:
        return parse_as_of(value)

    def validate_k(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_K:
            raise serializers.ValidationError(f"k must be an integer between 1 and {MAX_K}", code="invalid_k")
        return value


class LifespanOut(serializers.Serializer):
    created_at = serializers.DateTimeField()
    expires_in = serializers.IntegerField()
    expires_at = serializers.DateTimeField()
    relevance_score = serializers.FloatField()


class MemoryOut(serializers.Serializer):
    id = serializers.UUIDField()
    type = serializers.ChoiceField(choices=MemoryType.choices)
    key = serializers.CharField(allow_null=True)
    content = serializers.CharField()
    data = serializers.DictField()
    session_id = serializers.UUIDField(allow_null=True)
    end_user_id = serializers.CharField()
    source_message_id = serializers.UUIDField(allow_null=True)
    lifespan = LifespanOut()
    expired = serializers.BooleanField()


def serialize_memory(memory: MemoryUnit, *, now: datetime | None = None) -> dict[str, Any]:
    """The MemoryUnit shape of API.md."""
    now = now or timezone.now()
    return {
        "id": str(memory.pk),
        "type": memory.type,
        "key": memory.key,
        "content": memory.content,
        "data": memory.data,
        "session_id": str(memory.session_id) if memory.session_id else None,
        "end_user_id": memory.end_user.external_id,
        "source_message_id": str(memory.source_message_id) if memory.source_message_id else None,
        "lifespan": {
            "created_at": _iso(memory.created_at),
            "expires_in": memory.expires_in,
            "expires_at": _iso(memory.expires_at),
            "relevance_score": round(memory.relevance_score, 4),
        },
        "expired": not is_valid_at(memory, now),
    }


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
