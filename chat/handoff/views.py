"""The handoff's HTTP side: the REST endpoints of API.md "Handoff to a person" and the staff console page.

Views parse, check access and call ``chat.handoff.state``; the state machine, its errors and its events live there.
"""

from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.handoff import state as handoff
from chat.handoff.console_text import console_text_json
from conversations.access import resolve_session


class HandoffIn(serializers.Serializer):
    reason = serializers.JSONField(required=False)


class HandoffOut(serializers.Serializer):
    state = serializers.CharField()
    position = serializers.IntegerField(allow_null=True)
    leave_message = serializers.BooleanField(required=False)


class ReleaseOut(serializers.Serializer):
    state = serializers.CharField()


class RatingIn(serializers.Serializer):
    score = serializers.JSONField()
    comment = serializers.JSONField(required=False, allow_null=True)


class RatingOut(serializers.Serializer):
    score = serializers.IntegerField()
    comment = serializers.CharField()
    handled_by = serializers.ChoiceField(choices=["ai", "staff", "both"])
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class SessionHandoffView(APIView):
    """The tenant's back end asks for a person (trigger ``api``)."""

    session_scope = "path"

    @extend_schema(request=HandoffIn, responses={200: HandoffOut}, operation_id="handoff_session")
    def post(self, request: Request, session_id: str) -> Response:
        body = HandoffIn(data=request.data)
        body.is_valid(raise_exception=True)
        reason = handoff.check_reason(body.validated_data.get("reason")) or "the tenant's back end asked for a person"
        done = handoff.do_request_handoff(request.tenant, request.chat_session, trigger="api", reason=reason)
        out = {
            "state": done.state,
            "position": done.position,
            **({"leave_message": True} if done.leave_message else {}),
        }
        return Response(out)


class SessionReleaseView(APIView):
    """Back to the AI."""

    session_scope = "path"

    @extend_schema(request=None, responses={200: ReleaseOut}, operation_id="release_session")
    def post(self, request: Request, session_id: str) -> Response:
        session = handoff.do_release(request.tenant, request.chat_session)
        return Response({"state": session.state})


class SessionRatingView(APIView):
    """The end user's satisfaction, sent by the tenant's back end; a closed session may be rated (the widget
    asks when the conversation ends), so the session is resolved here rather than by ``session_scope``."""

    @extend_schema(request=RatingIn, responses={201: RatingOut}, operation_id="rate_session")
    def post(self, request: Request, session_id: str) -> Response:
        session = resolve_session(request.tenant, session_id, allow_closed=True)
        body = RatingIn(data=request.data)
        body.is_valid(raise_exception=True)
        score, comment = handoff.check_rating(body.validated_data["score"], body.validated_data.get("comment"))
        rating = handoff.do_rate(request.tenant, session, score, comment)
        out = {
            "score": rating.score, "comment": rating.comment, "handled_by": rating.handled_by,
            "created_at": rating.created_at, "updated_at": rating.updated_at,
        }  # fmt: skip
        return Response(RatingOut(out).data, status=status.HTTP_201_CREATED)


@staff_member_required
@require_GET
def staff_console(request: HttpRequest) -> HttpResponse:
    """The staff console: the live queue of the user's tenants, the handoff note of the conversation taken, the
    conversation itself. Everything live comes over ``ws/staff/`` (``chat.handoff.consumer``); the page is static
    markup and ``memdesk/console.js`` (no inline script or handler: the CSP allows neither), with its words in the
    staff member's language as a JSON data block (``chat.handoff.console_text``)."""
    tenants = handoff.staff_tenants(request.user)
    return render(request, "chat/staff_console.html", {"tenants": tenants, "console_text": console_text_json()})
