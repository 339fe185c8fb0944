from __future__ import annotations

import json
from typing import Any

from rest_framework import serializers

MAX_METADATA_BYTES = 8 * 1024


class OpenSessionIn(serializers.Serializer):
    end_user_id = serializers.CharField(max_length=200, allow_blank=False, trim_whitespace=True)
    metadata = serializers.DictField(required=False, default=dict)

    def validate_metadata(self, value: dict[str, Any]) -> dict[str, Any]:
        if len(json.dumps(value, ensure_ascii=False).encode()) > MAX_METADATA_BYTES:
            raise serializers.ValidationError(
                f"metadata must be at most {MAX_METADATA_BYTES} bytes of JSON", code="metadata_too_large"
            )
        return value


class OpenSessionOut(serializers.Serializer):
    session_id = serializers.UUIDField()
    token = serializers.CharField()
    expires_at = serializers.DateTimeField()
    ws_url = serializers.CharField()


class SessionOut(serializers.Serializer):
    session_id = serializers.UUIDField()
    end_user_id = serializers.CharField()
    status = serializers.CharField()
    turns = serializers.IntegerField()
    created_at = serializers.DateTimeField()
