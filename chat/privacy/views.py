"""REST views for an end user's data rights (``chat.privacy.rights``): the export and the erasure."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.privacy import rights as end_users
from tenants.models import Erasure

EndUserExportOut = inline_serializer(
    "EndUserExport",
    {
        "schema_version": serializers.IntegerField(),
        "end_user_id": serializers.CharField(),
        "exported_at": serializers.DateTimeField(),
        "end_user": serializers.DictField(),
        "sessions": serializers.ListField(child=serializers.DictField()),
        "memories": serializers.ListField(child=serializers.DictField()),
        "memory_events": serializers.ListField(child=serializers.DictField()),
        "feedback": serializers.ListField(child=serializers.DictField()),
        "tool_calls": serializers.ListField(child=serializers.DictField()),
        "batches": serializers.ListField(child=serializers.DictField()),
        "staff_access": serializers.ListField(child=serializers.DictField()),
    },
)


async def _async_chunks(chunks: Iterator[str]) -> AsyncIterator[str]:
    """``chunks`` taken one by one on the request's own sync thread (``thread_sensitive``): the export's
    transaction belongs to that thread's connection. Closing it (a client gone) closes ``chunks`` there too."""
    take = sync_to_async(next, thread_sensitive=True)
    try:
        while (chunk := await take(chunks, None)) is not None:
            yield chunk
    finally:
        await sync_to_async(getattr(chunks, "close", lambda: None), thread_sensitive=True)()


def _streamed(request: Request, chunks: Iterator[str]) -> Any:
    # Under ASGI, Django reads a plain iterator to its end before sending anything: hand it an async one.
    return _async_chunks(chunks) if isinstance(request._request, ASGIRequest) else chunks


class EndUserExportView(APIView):
    @extend_schema(
        operation_id="export_end_user",
        responses={200: EndUserExportOut},
        description="Every session, message, memory (with its history), feedback and tool call of the end user, "
        "streamed as one JSON document (docs/privacy.md).",
    )
    def get(self, request: Request, end_user_id: str) -> StreamingHttpResponse:
        chunks = end_users.export_end_user(request.tenant, end_user_id)
        response = StreamingHttpResponse(_streamed(request, chunks), content_type="application/json; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="end-user-export.json"'
        return response


class EndUserDetailView(APIView):
    @extend_schema(
        operation_id="erase_end_user",
        responses={204: OpenApiResponse(description="Erased; a tombstone with counts and no content remains.")},
        description="Erase everything of the end user in one transaction (docs/privacy.md).",
    )
    def delete(self, request: Request, end_user_id: str) -> Response:
        end_users.do_erase_end_user(request.tenant, end_user_id, actor=Erasure.Actor.TENANT_API)
        return Response(status=status.HTTP_204_NO_CONTENT)
