"""REST views for sessions: parse, check access, call the service."""

from __future__ import annotations

from urllib.parse import urlencode

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat import sessions
from chat.serializers import OpenSessionIn, OpenSessionOut, SessionOut


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
