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


class MessageIn(serializers.Serializer):
    text = serializers.JSONField(required=False)
    client_msg_id = serializers.JSONField(required=False, allow_null=True)


class MessagesQuery(serializers.Serializer):
    before = serializers.UUIDField(required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=200, default=50)


class TurnOut(serializers.Serializer):
    message_id = serializers.UUIDField()
    reply_id = serializers.UUIDField()
    reply = serializers.CharField()
    recalled = serializers.ListField(child=serializers.UUIDField())
    needs_confirmation = serializers.BooleanField()
    usage = serializers.DictField(child=serializers.IntegerField())


class MessageOut(serializers.Serializer):
    id = serializers.UUIDField()
    role = serializers.CharField()
    text = serializers.CharField()
    status = serializers.CharField()
    client_msg_id = serializers.CharField(allow_null=True)
    reply_to = serializers.UUIDField(allow_null=True)
    created_at = serializers.DateTimeField()


class ExecutionContextOut(serializers.Serializer):
    current_tool = serializers.CharField(allow_null=True)
    tool_args = serializers.JSONField(allow_null=True)
    last_tool_result = serializers.JSONField(allow_null=True)
    session_variables = serializers.JSONField()
