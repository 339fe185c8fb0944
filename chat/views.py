"""REST views for sessions: parse, check access, call the service."""

from __future__ import annotations

from urllib.parse import urlencode

from asgiref.sync import async_to_sync
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.serializers import (
    BatchCreatedOut,
    BatchIn,
    BatchOut,
    DeferredTurnOut,
    ExecutionContextOut,
    MessageIn,
    MessageOut,
    MessagesQuery,
    OpenSessionIn,
    OpenSessionOut,
    SessionOut,
    SessionVariablesIn,
    ToolIn,
    ToolOut,
    TurnOut,
)
from chat.sessions import lifecycle as sessions
from chat.sessions.messages import list_messages, serialize_message
from chat.tools import batches
from chat.tools import context as context_mod
from chat.tools import registry as tools
from chat.turn.run import TurnFailed, TurnInProgress, run_turn
from config.db.sql import release_connection


def _ws_url(request: Request, session_id: str, token: str) -> str:
    scheme = "wss" if request.is_secure() else "ws"
    query = urlencode({"session_id": session_id, "token": token})
    return f"{scheme}://{request.get_host()}/ws/chat/?{query}"


class SessionListView(APIView):
    @extend_schema(request=OpenSessionIn, responses={201: OpenSessionOut}, operation_id="open_session")
    def post(self, request: Request) -> Response:
        data = OpenSessionIn(data=request.data)
        data.is_valid(raise_exception=True)
        opened = sessions.do_open_session(
            request.tenant, data.validated_data["end_user_id"], data.validated_data["metadata"]
        )
        sid = str(opened.session.pk)
        body = {
            "session_id": sid,
            "token": opened.token,
            "expires_at": opened.expires_at,
            "ws_url": _ws_url(request, sid, opened.token),
        }
        return Response(OpenSessionOut(body).data, status=status.HTTP_201_CREATED)


class SessionDetailView(APIView):
    session_scope = "path"

    @extend_schema(responses={200: SessionOut}, operation_id="get_session")
    def get(self, request: Request, session_id: str) -> Response:
        return Response(SessionOut(sessions.describe_session(request.tenant, request.chat_session)).data)


class SessionCloseView(APIView):
    session_scope = "path"

    @extend_schema(request=None, responses={200: SessionOut}, operation_id="close_session")
    def post(self, request: Request, session_id: str) -> Response:
        session = sessions.do_close_session(request.tenant, request.chat_session)
        return Response(SessionOut(sessions.describe_session(request.tenant, session)).data)


class SessionMessagesView(APIView):
    """POST runs one turn (the same pipeline as the socket, not streamed).

    ``self_scoped``: the middleware does not wrap this view in one
    transaction — the user message must be committed before the model is
    called, so the pipeline opens its own short transactions."""

    session_scope = "path"
    self_scoped = True

    @extend_schema(request=MessageIn, responses={200: TurnOut, 202: DeferredTurnOut}, operation_id="send_message")
    def post(self, request: Request, session_id: str) -> Response:
        body = MessageIn(data=request.data)
        body.is_valid(raise_exception=True)
        # The request's thread took a pooled connection to authenticate; the turn's units of work take their
        # own, one at a time. Holding this one through the model's generation as well made every request
        # wait for a second connection while keeping a first: ten concurrent turns emptied a pool of ten.
        release_connection()
        try:
            result = async_to_sync(run_turn)(
                request.tenant,
                request.chat_session,
                body.validated_data.get("text"),
                body.validated_data.get("client_msg_id"),
            )
        except TurnFailed as exc:
            return Response(
                {"error": {"code": exc.code, "message": exc.message, "retryable": exc.retryable},
                 "message_id": exc.message_id or None},
                status=503,
            )  # fmt: skip
        except TurnInProgress as exc:
            return Response(
                {"error": {"code": exc.code, "message": exc.message, "retryable": True},
                 "message_id": exc.message_id},
                status=409, headers={"Retry-After": str(exc.retry_after)},
            )  # fmt: skip
        if (
            result.deferred
        ):  # a person has the conversation: stored and shown to staff, not answered (chat.handoff.state)
            return Response(result.as_api(), status=status.HTTP_202_ACCEPTED)
        return Response(TurnOut(result.as_api()).data)

    @extend_schema(parameters=[MessagesQuery], responses={200: MessageOut(many=True)}, operation_id="list_messages")
    def get(self, request: Request, session_id: str) -> Response:
        query = MessagesQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        page, has_more = list_messages(
            request.tenant, request.chat_session, before=query.validated_data.get("before"),
            limit=query.validated_data["limit"], include_tool=True,
        )  # fmt: skip
        return Response({"messages": [serialize_message(m) for m in page], "has_more": has_more})


class SessionContextView(APIView):
    session_scope = "path"

    @extend_schema(responses={200: ExecutionContextOut}, operation_id="get_context")
    def get(self, request: Request, session_id: str) -> Response:
        context = context_mod.execution_context(request.tenant, request.chat_session)
        return Response(context.as_dict())

    @extend_schema(request=SessionVariablesIn, responses={200: ExecutionContextOut}, operation_id="update_context")
    def patch(self, request: Request, session_id: str) -> Response:
        body = SessionVariablesIn(data=request.data)
        body.is_valid(raise_exception=True)
        context = context_mod.do_update_session_variables(
            request.tenant, request.chat_session, body.validated_data["session_variables"]
        )
        return Response(context.as_dict())


class ToolListView(APIView):
    @extend_schema(request=ToolIn, responses={201: ToolOut}, operation_id="register_tool")
    def post(self, request: Request) -> Response:
        body = ToolIn(data=request.data)
        body.is_valid(raise_exception=True)
        tool = tools.do_register_tool(request.tenant, **body.validated_data)
        return Response(tools.serialize_tool(tool), status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: ToolOut(many=True)}, operation_id="list_tools")
    def get(self, request: Request) -> Response:
        return Response({"tools": [tools.serialize_tool(t) for t in tools.list_tools(request.tenant)]})


class ToolDetailView(APIView):
    @extend_schema(responses={204: None}, operation_id="delete_tool")
    def delete(self, request: Request, name: str) -> Response:
        tools.do_delete_tool(request.tenant, name)
        return Response(status=status.HTTP_204_NO_CONTENT)


class BatchListView(APIView):
    """POST queues a batch; the worker (``manage.py run_worker``) runs it."""

    session_scope = "path"

    @extend_schema(request=BatchIn, responses={202: BatchCreatedOut}, operation_id="create_batch")
    def post(self, request: Request, session_id: str) -> Response:
        body = BatchIn(data=request.data)
        body.is_valid(raise_exception=True)
        batch = batches.do_create_batch(
            request.tenant, request.chat_session, tool_name=body.validated_data["tool"],
            items=body.validated_data["items"],
        )  # fmt: skip
        return Response({"task_id": str(batch.pk), "total": batch.total}, status=status.HTTP_202_ACCEPTED)


class BatchDetailView(APIView):
    session_scope = "path"

    @extend_schema(responses={200: BatchOut}, operation_id="get_batch")
    def get(self, request: Request, session_id: str, task_id: str) -> Response:
        batch = batches.get_batch(request.tenant, request.chat_session, task_id)
        return Response(batches.describe_batch(batch))
