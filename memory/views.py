"""REST views for memories: parse, check, call the memory services (``memory.store.write``, ``memory.store.read``,
…)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory.recall.pipeline import recall
from memory.serializers import (
    FeedbackIn,
    MemoryCreateIn,
    MemoryListQuery,
    MemoryOut,
    MemoryPatchIn,
    RecallIn,
    serialize_memory,
)
from memory.store import audit, feedback, lifecycle
from memory.store import read as fetch
from memory.store import write as store
from tenants.throttles import MemoryThrottle, RecallThrottle

SESSION_HEADER = OpenApiParameter("X-Session-ID", str, OpenApiParameter.HEADER, required=True)
ACTOR = audit.TENANT_API


class MemoryListView(APIView):
    session_scope = "header"
    throttle_classes = [MemoryThrottle]

    @extend_schema(parameters=[SESSION_HEADER, MemoryListQuery], responses={200: MemoryOut(many=True)})
    def get(self, request: Request) -> Response:
        query = MemoryListQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        memories = fetch.list_memories(
            request.tenant,
            request.chat_session,
            type=query.validated_data.get("type"),
            as_of=query.validated_data.get("as_of"),
            include_expired=query.validated_data["include_expired"],
        )
        return Response({"memories": [serialize_memory(m) for m in memories]})

    @extend_schema(parameters=[SESSION_HEADER], request=MemoryCreateIn, responses={201: MemoryOut})
    def post(self, request: Request) -> Response:
        body = MemoryCreateIn(data=request.data)
        body.is_valid(raise_exception=True)
        result = store.do_write_memory(request.tenant, request.chat_session, actor=ACTOR, **body.validated_data)
        return Response(serialize_memory(result.memory), status=status.HTTP_201_CREATED)


class MemoryDetailView(APIView):
    session_scope = "header"
    throttle_classes = [MemoryThrottle]

    @extend_schema(parameters=[SESSION_HEADER], responses={200: MemoryOut})
    def get(self, request: Request, memory_id: str) -> Response:
        memory = fetch.get_visible_memory(request.tenant, request.chat_session, memory_id)
        return Response(serialize_memory(memory))

    @extend_schema(parameters=[SESSION_HEADER], request=MemoryPatchIn, responses={200: MemoryOut})
    def patch(self, request: Request, memory_id: str) -> Response:
        memory = fetch.get_visible_memory(request.tenant, request.chat_session, memory_id)
        body = MemoryPatchIn(data=request.data)
        body.is_valid(raise_exception=True)
        memory = lifecycle.do_edit_memory(request.tenant, memory, actor=ACTOR, **body.validated_data)
        return Response(serialize_memory(memory))

    @extend_schema(parameters=[SESSION_HEADER], responses={204: None})
    def delete(self, request: Request, memory_id: str) -> Response:
        memory = fetch.get_visible_memory(request.tenant, request.chat_session, memory_id)
        lifecycle.do_delete_memory(request.tenant, memory, actor=ACTOR)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemoryExpireView(APIView):
    session_scope = "header"
    throttle_classes = [MemoryThrottle]

    @extend_schema(parameters=[SESSION_HEADER], request=None, responses={200: MemoryOut})
    def post(self, request: Request, memory_id: str) -> Response:
        memory = fetch.get_visible_memory(request.tenant, request.chat_session, memory_id)
        memory = lifecycle.do_expire_memory(request.tenant, memory, actor=ACTOR)
        return Response(serialize_memory(memory))


class MemoryFeedbackView(APIView):
    session_scope = "header"
    throttle_classes = [MemoryThrottle]

    @extend_schema(parameters=[SESSION_HEADER], request=FeedbackIn, responses={200: MemoryOut})
    def post(self, request: Request, memory_id: str) -> Response:
        memory = fetch.get_visible_memory(request.tenant, request.chat_session, memory_id)
        body = FeedbackIn(data=request.data)
        body.is_valid(raise_exception=True)
        memory = feedback.do_feedback(request.tenant, memory, body.validated_data["event"], actor=ACTOR)
        return Response(serialize_memory(memory))


RecallOut = inline_serializer(
    "RecallOut",
    {
        "results": serializers.ListField(child=serializers.DictField()),
        "needs_confirmation": serializers.BooleanField(),
        "timings_ms": serializers.DictField(child=serializers.FloatField()),
        # the intent rewrite the vector leg searched with, or null when it kept the query (docs/api-extensions.md)
        "rewritten_query": serializers.CharField(allow_null=True),
    },
)


class MemoryRecallView(APIView):
    session_scope = "header"
    throttle_classes = [RecallThrottle]

    @extend_schema(parameters=[SESSION_HEADER], request=RecallIn, responses={200: RecallOut})
    def post(self, request: Request) -> Response:
        body = RecallIn(data=request.data)
        body.is_valid(raise_exception=True)
        result = recall(
            request.tenant,
            request.chat_session,
            body.validated_data["query"],
            as_of=body.validated_data.get("as_of"),
            k=body.validated_data["k"],
        )
        return Response(
            {
                "results": [
                    {
                        "memory": serialize_memory(hit.memory),
                        "stage": hit.stage,
                        "similarity": hit.similarity,
                        "score": hit.score,
                        # false: what the memory states was true once, and has since been superseded or has
                        # expired by as_of (a coupon past its date, the old address after a move)
                        "current": not hit.stale,
                    }
                    for hit in result.hits
                ],
                "needs_confirmation": result.needs_confirmation,
                "timings_ms": result.timings_ms,
                "rewritten_query": result.rewritten_query,
            }
        )
