"""Session lifecycle services: open, describe, close."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from chat.models import ExecutionContext
from chat.sessions import events
from conversations.access import require_session_id
from conversations.models import ChatSession, Message
from conversations.session_tokens import issue_token
from tenants.models import EndUser, Tenant


@dataclass(frozen=True)
class OpenedSession:
    session: ChatSession
    token: str
    expires_at: datetime


def get_or_create_end_user(tenant: Tenant, external_id: str) -> EndUser:
    users = EndUser.objects.for_tenant(tenant)
    user = users.filter(external_id=external_id).first()
    if user is not None:
        return user
    try:
        with transaction.atomic():
            return EndUser.objects.create(tenant=tenant, external_id=external_id)
    except IntegrityError:
        # A concurrent request created the same end user first.
        return users.get(external_id=external_id)


def do_open_session(tenant: Tenant, end_user_external_id: str, metadata: dict[str, Any]) -> OpenedSession:
    end_user = get_or_create_end_user(tenant, end_user_external_id)
    now = timezone.now()
    expires_at = now + timedelta(seconds=settings.SESSION_TOKEN_TTL_S)
    session = ChatSession.objects.create(
        tenant=tenant, end_user=end_user, metadata=metadata, created_at=now, last_activity_at=now, expires_at=expires_at
    )
    # Created here rather than on the first turn (``chat.tools.context.execution_context`` still creates it for
    # sessions opened before this was so): four statements less in a customer's first reply.
    ExecutionContext.objects.create(tenant=tenant, session=session)
    return OpenedSession(session=session, token=issue_token(tenant.pk, session.pk), expires_at=expires_at)


@require_session_id
def count_turns(tenant: Tenant, session: ChatSession) -> int:
    return Message.objects.for_tenant(tenant).filter(session=session, role=Message.Role.USER).count()


@require_session_id
def do_close_session(tenant: Tenant, session: ChatSession) -> ChatSession:
    now = timezone.now()
    ChatSession.objects.for_tenant(tenant).filter(pk=session.pk).update(
        status=ChatSession.Status.CLOSED, closed_at=now, last_activity_at=now
    )
    session.status = ChatSession.Status.CLOSED
    session.closed_at = now
    # Its chat tabs offer the end user a rating; staff consoles drop it from the queue (chat.sessions.events).
    events.after_commit(
        chat=[(session.pk, {"type": "state", "state": "closed"})],
        staff=[(tenant.pk, {"type": "session", "session": {"session_id": str(session.pk), "state": "closed"}})],
    )
    return session


def describe_session(tenant: Tenant, session: ChatSession) -> dict[str, Any]:
    status = session.status
    if status == ChatSession.Status.OPEN and session.expires_at <= timezone.now():
        status = "expired"
    return {
        "session_id": str(session.pk),
        "end_user_id": session.end_user.external_id,
        "status": status,
        "turns": count_turns(tenant, session),
        "created_at": session.created_at,
        # Who answers (API.md "Handoff to a person"): "ai", "waiting_for_human", "with_human", or "closed".
        "state": session.state if status == ChatSession.Status.OPEN else "closed",
    }
