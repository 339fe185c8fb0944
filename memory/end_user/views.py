"""REST views for the end user's own memories (``/api/v1/me/memories…``, API.md "End users"): parse, call the
service (``memory.end_user.memories``, ``memory.store.consent``), answer what the end user may see.

The caller is the end user's browser with its session token (``conversations.session_auth``), never a tenant
key. Content is masked as the prompt's anchor masks it (「用户手机号：138****5678」, ``memory.text.masking``): the
panel is on screen, possibly on a shared computer, and the end user knows the whole value anyway.

The views are ``self_scoped``: the tenant comes from the token, not an API key, so the request middleware has
no tenant to scope the request by; each service call opens the tenant's RLS scope itself. They answer CORS
(the widget runs on the tenant's site): a preflight is answered for any origin, because it carries no token
and so names no tenant; the request itself is refused unless its origin is allowed for the token's tenant.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.models import ChatSession
from conversations.session_auth import (
    SESSION_HEADER,
    TOKEN_HEADER,
    HasSessionToken,
    SessionTokenAuthentication,
)
from memory.end_user import memories as end_user_memories
from memory.models import MemoryType, MemoryUnit
from memory.serializers import ContentField
from memory.store import consent
from memory.text.masking import mask_text
from tenants.models import EndUser
from tenants.throttles import ApiKeyRateThrottle

HEADERS = [OpenApiParameter(SESSION_HEADER, str, OpenApiParameter.HEADER, required=True)]


class EndUserThrottle(ApiKeyRateThrottle):
    """The memory endpoints' rate (``THROTTLE_MEMORIES``), counted per session rather than per API key."""

    scope = "memories"

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        session = request.auth
        return f"throttle:me:{session.tenant_id}:{session.pk}" if isinstance(session, ChatSession) else None


class EndUserMemoryOut(serializers.Serializer):
    id = serializers.UUIDField()
    type = serializers.ChoiceField(choices=MemoryType.choices)
    key = serializers.CharField(allow_null=True)
    content = serializers.CharField(help_text="masked as in the prompt: 138****5678, z***@example.com")
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()


EndUserMemoriesOut = inline_serializer(
    "EndUserMemoriesOut",
    {
        "memory_enabled": serializers.BooleanField(),
        "can_turn_off": serializers.BooleanField(),
        "memories": EndUserMemoryOut(many=True),
    },
)


class CorrectIn(serializers.Serializer):
    content = ContentField()


class StrictBoolean(serializers.Field):
    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            raise serializers.ValidationError("must be true or false")
        return data

    def to_representation(self, value: Any) -> bool:
        return bool(value)


class MemorySwitchIn(serializers.Serializer):
    memory_enabled = StrictBoolean()


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def serialize_for_end_user(memory: MemoryUnit) -> dict[str, Any]:
    return {
        "id": str(memory.pk),
        "type": memory.type,
        "key": memory.key,
        "content": mask_text(memory.content),
        "created_at": _iso(memory.created_at),
        "expires_at": _iso(memory.expires_at),
    }


def _overview(session: ChatSession, end_user: EndUser) -> dict[str, Any]:
    tenant = session.tenant
    memories = end_user_memories.list_end_user_memories(tenant, session)
    return {
        "memory_enabled": consent.memory_enabled_for(tenant, end_user),
        "can_turn_off": consent.can_turn_off(tenant),
        "memories": [serialize_for_end_user(m) for m in memories],
    }


class EndUserView(APIView):
    """Base of the end user's views: the session token, a rate per session, CORS."""

    authentication_classes = [SessionTokenAuthentication]
    permission_classes = [HasSessionToken]
    throttle_classes = [EndUserThrottle]
    self_scoped = True

    @extend_schema(exclude=True)
    def options(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = Response(status=204)
        response["Access-Control-Allow-Methods"] = "GET, POST, PUT"
        response["Access-Control-Allow-Headers"] = f"Content-Type, {SESSION_HEADER}, {TOKEN_HEADER}"
        response["Access-Control-Max-Age"] = "600"
        return response

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        # Echoing the origin lets the widget read errors too; a request from an origin the tenant does not
        # allow was refused before doing anything (OriginNotAllowed), and no cookie is ever involved.
        origin = request.headers.get("Origin")
        if origin:
            response["Access-Control-Allow-Origin"] = origin
            response["Access-Control-Expose-Headers"] = "Retry-After"
        response["Vary"] = "Origin"
        return response


class MeMemoriesView(EndUserView):
    @extend_schema(parameters=HEADERS, responses={200: EndUserMemoriesOut}, operation_id="list_my_memories")
    def get(self, request: Request) -> Response:
        session = request.auth
        return Response(_overview(session, session.end_user))

    @extend_schema(
        parameters=HEADERS, request=MemorySwitchIn, responses={200: EndUserMemoriesOut}, operation_id="switch_my_memory"
    )
    def put(self, request: Request) -> Response:
        body = MemorySwitchIn(data=request.data)
        body.is_valid(raise_exception=True)
        session = request.auth
        end_user = consent.do_set_memory_enabled(session.tenant, session, body.validated_data["memory_enabled"])
        return Response(_overview(session, end_user))


class MeMemoryForgetView(EndUserView):
    @extend_schema(parameters=HEADERS, request=None, responses={200: EndUserMemoryOut}, operation_id="forget_my_memory")
    def post(self, request: Request, memory_id: str) -> Response:
        session = request.auth
        memory = end_user_memories.do_forget_memory(session.tenant, session, memory_id)
        return Response(serialize_for_end_user(memory))


class MeMemoryCorrectView(EndUserView):
    @extend_schema(
        parameters=HEADERS, request=CorrectIn, responses={200: EndUserMemoryOut}, operation_id="correct_my_memory"
    )
    def post(self, request: Request, memory_id: str) -> Response:
        body = CorrectIn(data=request.data)
        body.is_valid(raise_exception=True)
        session = request.auth
        memory = end_user_memories.do_correct_memory(session.tenant, session, memory_id, body.validated_data["content"])
        return Response(serialize_for_end_user(memory))
