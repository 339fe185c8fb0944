from __future__ import annotations

import json
from typing import Any

from rest_framework import serializers

from chat.tools.registry import check_name, check_parameters, check_timeout, check_url
from config.text_input import TextField, field_json

MAX_METADATA_BYTES = 8 * 1024


class OpenSessionIn(serializers.Serializer):
    end_user_id = TextField(max_length=200, allow_blank=False, trim_whitespace=True)
    metadata = serializers.DictField(required=False, default=dict)

    def validate_metadata(self, value: dict[str, Any]) -> dict[str, Any]:
        value = field_json(value, field="metadata")  # before json.dumps below: it recurses
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
    state = serializers.ChoiceField(choices=["ai", "waiting_for_human", "with_human", "closed"])


class MessageIn(serializers.Serializer):
    text = serializers.JSONField(required=False)
    client_msg_id = serializers.JSONField(required=False, allow_null=True)


class MessagesQuery(serializers.Serializer):
    before = serializers.UUIDField(required=False)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=200, default=50)


class CitationOut(serializers.Serializer):
    """A passage the reply cited that was in its prompt (API.md "Knowledge")."""

    article_id = serializers.UUIDField()
    version = serializers.IntegerField()
    title = serializers.CharField()
    url = serializers.CharField(allow_blank=True)
    passage_id = serializers.CharField()


class TurnOut(serializers.Serializer):
    message_id = serializers.UUIDField()
    reply_id = serializers.UUIDField()
    reply = serializers.CharField()
    recalled = serializers.ListField(child=serializers.UUIDField())
    needs_confirmation = serializers.BooleanField()
    usage = serializers.DictField(child=serializers.IntegerField())
    citations = CitationOut(many=True)
    offer_handoff = serializers.BooleanField(
        required=False, help_text="Grounded mode: the agent did not know and offers a person (docs/knowledge.md)."
    )


class DeferredTurnOut(serializers.Serializer):
    """202: a person has the conversation (API.md "Handoff to a person"); the message is stored, not answered."""

    message_id = serializers.UUIDField()
    state = serializers.ChoiceField(choices=["waiting_for_human", "with_human"])
    position = serializers.IntegerField(required=False)
    leave_message = serializers.BooleanField(required=False)


class MessageOut(serializers.Serializer):
    id = serializers.UUIDField()
    role = serializers.CharField()
    text = serializers.CharField()
    status = serializers.CharField()
    client_msg_id = serializers.CharField(allow_null=True)
    reply_to = serializers.UUIDField(allow_null=True)
    created_at = serializers.DateTimeField()
    citations = CitationOut(
        many=True, required=False, help_text="An agent's reply: the passages it cited (docs/knowledge.md)."
    )


class SessionVariablesIn(serializers.Serializer):
    """``PATCH …/context``: variables to set; a ``null`` value removes one (API.md)."""

    session_variables = serializers.JSONField()

    def validate_session_variables(self, value: Any) -> Any:
        return field_json(value, field="session_variables")


class ExecutionContextOut(serializers.Serializer):
    current_tool = serializers.CharField(allow_null=True)
    tool_args = serializers.JSONField(allow_null=True)
    last_tool_result = serializers.JSONField(allow_null=True)
    session_variables = serializers.JSONField()


# --- tools and batches (API.md "Tools") -------------------------------------------


def _field_check(problem: str | None, code: str) -> None:
    if problem is not None:
        raise serializers.ValidationError(problem, code=code)


class ToolIn(serializers.Serializer):
    """A tool registration. Each field's problem has its own code:
    ``invalid_tool_name``, ``invalid_schema``, ``invalid_url``, ``invalid_timeout``."""

    name = serializers.JSONField()
    description = TextField(max_length=1024, trim_whitespace=True)
    parameters = serializers.JSONField()
    url = serializers.JSONField()
    timeout_s = serializers.JSONField(required=False, default=10)

    def validate_name(self, value: Any) -> str:
        _field_check(check_name(value), "invalid_tool_name")
        return value

    def validate_parameters(self, value: Any) -> dict[str, Any]:
        value = field_json(value, field="parameters")
        _field_check(check_parameters(value), "invalid_schema")
        return value

    def validate_url(self, value: Any) -> str:
        _field_check(check_url(value), "invalid_url")
        return value

    def validate_timeout_s(self, value: Any) -> int:
        _field_check(check_timeout(value), "invalid_timeout")
        return value


class ToolOut(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    parameters = serializers.JSONField()
    url = serializers.CharField()
    timeout_s = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class BatchIn(serializers.Serializer):
    """``items`` are checked by ``chat.tools.batches.check_batch`` (each against the tool's schema)."""

    tool = TextField(max_length=64)
    items = serializers.JSONField()

    def validate_items(self, value: Any) -> Any:
        return field_json(value, field="items")


class BatchCreatedOut(serializers.Serializer):
    task_id = serializers.UUIDField()
    total = serializers.IntegerField()


class BatchOut(serializers.Serializer):
    task_id = serializers.UUIDField()
    completed = serializers.IntegerField()
    failed = serializers.IntegerField()
    total = serializers.IntegerField()
    last_success_id = serializers.JSONField(allow_null=True)
    status = serializers.ChoiceField(choices=["queued", "running", "done"])
