"""REST views of conversation import (tenant API key): import one past conversation, read its status."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.imports.service import describe_import, do_import_conversation
from tenants.throttles import ImportThrottle

ImportIn = inline_serializer(
    "ConversationImport",
    {
        "external_id": serializers.CharField(),
        "started_at": serializers.DateTimeField(),
        "messages": serializers.ListField(
            child=inline_serializer(
                "ImportedMessage",
                {
                    "role": serializers.ChoiceField(choices=["user", "agent", "staff"]),
                    "text": serializers.CharField(),
                    "sent_at": serializers.DateTimeField(),
                    "external_id": serializers.CharField(required=False),
                },
            )
        ),
        "metadata": serializers.DictField(required=False),
    },
)
ImportOut = inline_serializer(
    "ConversationImportResult",
    {"session_id": serializers.UUIDField(), "messages": serializers.IntegerField(), "status": serializers.CharField()},
)
ImportStatusOut = inline_serializer(
    "ConversationImportStatus",
    {
        "session_id": serializers.UUIDField(),
        "status": serializers.ChoiceField(choices=["queued", "indexing", "done", "failed"]),
        "messages": serializers.IntegerField(),
        "indexed": serializers.IntegerField(),
        "error": serializers.CharField(required=False),
    },
)


class ConversationImportView(APIView):
    throttle_classes = [ImportThrottle]

    @extend_schema(
        operation_id="import_conversation",
        request=ImportIn,
        responses={202: ImportOut, 200: ImportOut},
        description="Import one past conversation of the end user with its own times; it becomes memory in the "
        "background. The same external_id again answers the first import (200) and writes nothing (docs/import.md).",
    )
    def post(self, request: Request, end_user_id: str) -> Response:
        result = do_import_conversation(request.tenant, end_user_id, request.data)
        return Response(result.as_dict(), status=status.HTTP_202_ACCEPTED if result.created else status.HTTP_200_OK)


class ConversationImportDetailView(APIView):
    @extend_schema(operation_id="imported_conversation_status", responses={200: ImportStatusOut})
    def get(self, request: Request, end_user_id: str, session_id: str) -> Response:
        return Response(describe_import(request.tenant, end_user_id, session_id))
