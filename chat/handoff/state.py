"""Handing a conversation to a person (API.md, "Handoff to a person"): the state machine.

A session's ``state`` says who answers::

    ai ──request──▶ waiting_for_human ──claim──▶ with_human
     ▲                    │                          │
     └──────release───────┴──────────release─────────┘

plus a staff member's ``claim`` of a session the AI still answers (taking over unasked). A closed session is
``status`` closed whatever its state was; the API then reports ``"closed"``.

Who moves it: ``do_request_handoff`` (the tenant's back end, the end user's words or button, the model's
``handoff_to_human`` tool, the tenant's rules: ``chat.handoff.triggers``), ``do_claim`` and ``do_staff_reply``
(a staff console, ``chat.handoff.consumer``), ``do_release`` (the console or the back end). Every handoff
records its trigger and reason on the session (``handoff_trigger``, ``handoff_reason``, ``handoff_at``);
``memdesk_handoffs`` counts them by trigger.

Invariants:

- **One claim wins.** Claims lock the session row (``SELECT … FOR UPDATE``) and take it only while no one
  holds it; the loser gets ``already_claimed``, never a shared session.
- **No model call while a person has the conversation.** ``chat.turn.run`` stores the end user's message and
  returns (``chat.handoff.triggers``): no recall, no prompt, no model.
- **Nothing the end user writes is lost.** Their messages are stored first, as in every turn; staff see them
  live and in the history.
- A staff member's reply is a ``staff`` message with its ``author``; it is the agent's words in the AI's later
  prompts (``chat.turn.prepare``) and becomes conversation memory like a reply (:func:`index_soon`), so what the
  person promised is recalled once the AI is back.

Every change is published to the chat tabs and the staff consoles after it commits (``chat.sessions.events``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from chat import metrics
from chat.handoff.offline import Availability, availability
from chat.handoff.options import handoff_settings
from chat.sessions import events
from chat.sessions.messages import MAX_MESSAGE_CHARS, serialize_message, session_locked
from config.errors import ApiError
from config.ids import parse_uuid
from config.text_input import InvalidText, clean_text
from conversations.access import SessionClosed, SessionNotFound, require_session_id
from conversations.models import ChatSession, Message, SessionRating
from memory.conversation import announce, index_turn
from memory.extraction import extract_and_store
from tenants.models import Membership, Tenant
from tenants.rls import tenant_db_scope, tenant_scope

logger = logging.getLogger(__name__)

State = ChatSession.State
CLOSED = "closed"
MAX_REASON_CHARS = 300
MAX_COMMENT_CHARS = 2000

#: What asked for a person (``ChatSession.handoff_trigger``, at most 20 characters).
TRIGGERS = (
    "api",  # the tenant's back end: POST …/handoff
    "user_request",  # the end user's words (「转人工」, "talk to a person")
    "user_button",  # the widget's button: {"type": "handoff"}
    "keyword",  # the tenant's keyword rule
    "model",  # the model's handoff_to_human tool
    "confirmation",  # replies kept needing the user's confirmation
    "amnesia",  # an amnesia alert's empty-recall streak went on
    "negative_mood",  # negative messages in a row
    "staff",  # a staff member took the conversation over unasked
)


class InvalidHandoff(ApiError):
    code = "invalid_reason"


class AlreadyClaimed(ApiError):
    status = 409
    code = "already_claimed"


class NotAssigned(ApiError):
    status = 409
    code = "not_assigned"


class InvalidRating(ApiError):
    code = "invalid_rating"


@dataclass(frozen=True)
class Handoff:
    """A session's handoff state after a request: ``position`` in the tenant's queue while waiting (1 = next);
    ``changed`` when this request moved it from ``ai``; ``leave_message`` when nobody can take over now."""

    state: str
    position: int | None
    changed: bool
    leave_message: bool = False
    closed: bool = False  # outside business hours

    def frame(self) -> dict[str, Any]:
        return state_frame(self.state, self.position, leave_message=self.leave_message)


def state_frame(state: str, position: int | None = None, *, leave_message: bool = False) -> dict[str, Any]:
    """The chat socket's ``{"type": "state", "state", "position"?}`` (``leave_message`` only when true)."""
    frame: dict[str, Any] = {"type": "state", "state": state}
    if position is not None:
        frame["position"] = position
    if leave_message:
        frame["leave_message"] = True
    return frame


def api_state(session: ChatSession, now: datetime | None = None) -> str:
    """The ``state`` the API reports: ``"closed"`` for a closed or expired session, else the session's state."""
    return session.state if session.is_live(now) else CLOSED


def check_reason(value: Any) -> str:
    """A handoff's reason as stored, or ``InvalidHandoff`` (``invalid_reason``)."""
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_REASON_CHARS:
        raise InvalidHandoff(f"reason must be a string of at most {MAX_REASON_CHARS} characters")
    try:
        return clean_text(value, field="reason").strip()
    except InvalidText as exc:
        raise InvalidHandoff(exc.message) from None


def check_rating(score: Any, comment: Any) -> tuple[int, str]:
    """A rating's score and comment as stored, or ``InvalidRating`` (``invalid_score``, ``invalid_comment``)."""
    if isinstance(score, bool) or not isinstance(score, int) or not 1 <= score <= 5:
        raise InvalidRating("score must be a whole number from 1 to 5", code="invalid_score")
    if comment is None:
        return score, ""
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT_CHARS:
        raise InvalidRating(
            f"comment must be a string of at most {MAX_COMMENT_CHARS} characters", code="invalid_comment"
        )
    try:
        return score, clean_text(comment, field="comment").strip()
    except InvalidText as exc:
        raise InvalidRating(exc.message, code="invalid_comment") from None


# --- reads ----------------------------------------------------------------------------


def _waiting(tenant: Tenant, now: datetime) -> Any:
    return ChatSession.objects.for_tenant(tenant).filter(
        state=State.WAITING_FOR_HUMAN, status=ChatSession.Status.OPEN, expires_at__gt=now
    )


def queue_position(tenant: Tenant, session: ChatSession, now: datetime | None = None) -> int | None:
    """The session's place in the tenant's queue (1 = next), oldest handoff first; None when it is not waiting."""
    if session.state != State.WAITING_FOR_HUMAN or session.handoff_at is None:
        return None
    ahead = Q(handoff_at__lt=session.handoff_at) | Q(handoff_at=session.handoff_at, id__lt=session.pk)
    with tenant_scope(tenant):
        return _waiting(tenant, now or timezone.now()).filter(ahead).count() + 1


def queue_row(session: ChatSession, position: int | None) -> dict[str, Any]:
    """A session as the staff console lists it."""
    user = session.assigned_to
    return {
        "session_id": str(session.pk),
        "tenant": session.tenant.slug,
        "end_user_id": session.end_user.external_id,
        "state": api_state(session),
        "position": position,
        "trigger": session.handoff_trigger,
        "reason": session.handoff_reason,
        "handoff_at": session.handoff_at.isoformat().replace("+00:00", "Z") if session.handoff_at else None,
        "assigned_to": user.get_username() if user is not None else None,
        "last_activity_at": session.last_activity_at.isoformat().replace("+00:00", "Z"),
    }


def live_queue(tenants: list[Tenant]) -> list[dict[str, Any]]:
    """The sessions of ``tenants`` that wait for a person or have one, oldest handoff first, each with its
    position."""
    now = timezone.now()
    rows = []
    with tenant_db_scope(tenants):
        sessions = (
            ChatSession.objects.for_tenants(tenants)
            .filter(status=ChatSession.Status.OPEN, expires_at__gt=now)
            .exclude(state=State.AI)
            .select_related("tenant", "end_user", "assigned_to")
            .order_by("handoff_at", "id")[:500]
        )
        places: dict[Any, int] = {}
        for session in sessions:
            if session.state == State.WAITING_FOR_HUMAN:
                places[session.tenant_id] = places.get(session.tenant_id, 0) + 1
            rows.append(
                queue_row(session, places.get(session.tenant_id) if session.state == State.WAITING_FOR_HUMAN else None)
            )
    return rows


def staff_tenants(user: Any, slug: str | None = None) -> list[Tenant]:
    """The tenants whose conversations ``user`` may take over: their memberships (every role: owner, admin and
    agent all answer customers); a superuser's, every tenant. ``slug`` narrows to one."""
    if not (user.is_authenticated and user.is_active and (user.is_staff or user.is_superuser)):
        return []
    tenants = Tenant.objects.all() if user.is_superuser else Tenant.objects.filter(memberships__user=user)
    if slug:
        tenants = tenants.filter(slug=slug)
    return list(tenants.order_by("slug"))


def staff_session(tenants: list[Tenant], raw_session_id: Any) -> ChatSession:
    """The session with this id among ``tenants``' sessions, open or not. Another tenant's session is reported
    as missing (``session_not_found``): existence is not revealed."""
    session_id = parse_uuid(str(raw_session_id or ""), SessionNotFound("No such session."))
    with tenant_db_scope(tenants):
        session = (
            ChatSession.objects.for_tenants(tenants)
            .select_related("tenant", "end_user", "assigned_to")
            .filter(pk=session_id)
            .first()
        )
    if session is None:
        raise SessionNotFound("No such session.")
    return session


def do_mark_online(user: Any, tenants: list[Tenant], *, now: datetime | None = None) -> int:
    """The console of ``user`` is open: their memberships of ``tenants`` are seen now (``last_seen_at``, read by
    ``chat.handoff.offline.staff_online``). Returns how many memberships were updated."""
    now = now or timezone.now()
    return Membership.objects.filter(user=user, tenant__in=tenants).update(last_seen_at=now)


def _locked(tenant: Tenant, session: ChatSession) -> ChatSession:
    row = (
        ChatSession.objects.for_tenant(tenant)
        .select_for_update(of=("self",))
        .select_related("tenant", "end_user", "assigned_to")
        .filter(pk=session.pk)
        .first()
    )
    if row is None:
        raise SessionNotFound("No such session.")
    return row


def _publish_state(session: ChatSession, position: int | None, *, leave_message: bool = False) -> None:
    events.after_commit(
        chat=[(session.pk, state_frame(api_state(session), position, leave_message=leave_message))],
        staff=[(session.tenant_id, {"type": "session", "session": queue_row(session, position)})],
    )


# --- changes --------------------------------------------------------------------------


@require_session_id
def do_request_handoff(
    tenant: Tenant, session: ChatSession, *, trigger: str, reason: str, now: datetime | None = None
) -> Handoff:
    """Ask for a person: an ``ai`` session starts waiting in the tenant's queue, with its trigger and reason.
    A session already waiting or with a person stays as it is (the first request's trigger and reason are
    kept). ``leave_message``: outside business hours, or with nobody online and no wait configured, the end
    user is offered to leave a message (``chat.handoff.offline``). Updates ``session.state``."""
    assert trigger in TRIGGERS, trigger
    now = now or timezone.now()
    with tenant_scope(tenant):
        row = _locked(tenant, session)
        if not row.is_live(now):
            raise SessionClosed("This session is closed or expired; start a new one.")
        changed = row.state == State.AI
        if changed:
            row.state, row.handoff_trigger, row.handoff_reason = (
                State.WAITING_FOR_HUMAN,
                trigger,
                reason[:MAX_REASON_CHARS],
            )
            row.handoff_at, row.assigned_to = now, None
            row.save(update_fields=["state", "handoff_trigger", "handoff_reason", "handoff_at", "assigned_to"])
        position = queue_position(tenant, row, now)
        offline = _availability(tenant, row, now)
        if changed:
            _publish_state(row, position, leave_message=offline.leave_message)
            logger.info("session %s handed off (%s): %s", row.pk, trigger, row.handoff_reason)
    if changed:
        metrics.HANDOFFS.labels(tenant=tenant.slug, trigger=trigger).inc()
    session.state, session.handoff_at = row.state, row.handoff_at
    leave = offline.leave_message and row.state == State.WAITING_FOR_HUMAN
    return Handoff(state=row.state, position=position, changed=changed, leave_message=leave, closed=not offline.open)


def _availability(tenant: Tenant, session: ChatSession, now: datetime) -> Availability:
    return availability(tenant, now, waiting_since=session.handoff_at, wait_s=handoff_settings(tenant).offline_wait_s)


@require_session_id
def do_claim(tenant: Tenant, session: ChatSession, user: Any) -> ChatSession:
    """``user`` takes the conversation: a waiting session (or one the AI answers) is theirs, ``with_human``.
    Concurrent claims queue on the session's row lock; the first wins, the others get ``already_claimed``.
    Claiming one's own session again is a no-op. Returns the session as it now is."""
    now = timezone.now()
    with tenant_scope(tenant):
        row = _locked(tenant, session)
        if not row.is_live(now):
            raise SessionClosed("This session is closed or expired.")
        if row.state == State.WITH_HUMAN:
            if row.assigned_to_id == user.pk:
                return row
            holder = row.assigned_to.get_username() if row.assigned_to else "someone else"
            raise AlreadyClaimed(f"{holder} has already taken this conversation.")
        took_over = row.state == State.AI
        if took_over:
            row.handoff_trigger, row.handoff_reason, row.handoff_at = (
                "staff",
                f"taken over by {user.get_username()}",
                now,
            )
        row.state, row.assigned_to = State.WITH_HUMAN, user
        row.save(update_fields=["state", "assigned_to", "handoff_trigger", "handoff_reason", "handoff_at"])
        _publish_state(row, None)
    if took_over:
        metrics.HANDOFFS.labels(tenant=tenant.slug, trigger="staff").inc()
    return row


@require_session_id
def do_release(tenant: Tenant, session: ChatSession, *, user: Any = None) -> ChatSession:
    """Back to the AI. The amnesia streak starts over (a person dealt with it: the next empty recall must not
    hand the session straight back). Releasing a session the AI answers is a no-op."""
    with tenant_scope(tenant):
        row = _locked(tenant, session)
        if row.state != State.AI:
            row.state, row.assigned_to = State.AI, None
            row.empty_recall_streak, row.amnesia_alerted = 0, False
            row.save(update_fields=["state", "assigned_to", "empty_recall_streak", "amnesia_alerted"])
            _publish_state(row, None)
            who = user.get_username() if user is not None else "the tenant's back end"
            logger.info("session %s released to the AI by %s", row.pk, who)
    session.state = row.state
    return row


@require_session_id
def do_staff_reply(tenant: Tenant, session: ChatSession, user: Any, text: Any) -> Message:
    """Store ``user``'s reply in a session they hold (``not_assigned`` otherwise) as a ``staff`` message with its
    author, and send it to the end user's tabs as ``delta`` then ``done`` with ``"role": "staff"``. The facts it
    states are extracted like a reply's, and it becomes conversation memory (:func:`index_soon`)."""
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_MESSAGE_CHARS:
        raise ApiError(
            f"text must be a non-empty string of at most {MAX_MESSAGE_CHARS} characters", code="invalid_message"
        )
    try:
        text = clean_text(text).strip()
    except InvalidText as exc:
        raise ApiError(exc.message, code="invalid_message") from None
    with session_locked(tenant, session):
        row = ChatSession.objects.for_tenant(tenant).select_related("tenant", "end_user").get(pk=session.pk)
        if row.state != State.WITH_HUMAN or row.assigned_to_id != user.pk:
            raise NotAssigned("Take this conversation (claim) before replying in it.")
        messages = Message.objects.for_tenant(tenant).filter(session=session)
        last = messages.aggregate(seq=Max("seq"))["seq"] or 0
        now = timezone.now()
        message = Message.objects.create(
            tenant=tenant, session=row, role=Message.Role.STAFF, text=text, author=user, seq=last + 1, created_at=now
        )
        ChatSession.objects.for_tenant(tenant).filter(pk=session.pk).update(last_activity_at=now, staff_involved=True)
        previous = messages.filter(seq__lt=message.seq).exclude(role=Message.Role.TOOL).order_by("-seq").first()
        extract_and_store(tenant, row, message, previous_text=previous.text if previous else "")
        index_soon(tenant, row, [message])
        reply = {"reply_id": str(message.pk), "text": text, "role": "staff"}
        done = {**reply, "type": "done", "recalled": [], "needs_confirmation": False,
                "usage": {"prompt_tokens": 0, "completion_tokens": 0}}  # fmt: skip
        events.after_commit(
            chat=[(session.pk, {"type": "delta", **reply}), (session.pk, done)],
            staff=[(tenant.pk, message_event(message, user))],
        )
    return message


def message_event(message: Message, author: Any = None) -> dict[str, Any]:
    """A new message of a session a person handles, for the staff consoles."""
    body = serialize_message(message)
    body["author"] = author.get_username() if author is not None else None
    return {"type": "message", "session_id": str(message.session_id), "message": body}


def index_soon(tenant: Tenant, session: ChatSession, messages: list[Message]) -> None:
    """The messages' conversation units (``memory.conversation.units``): announced to the background writer in the
    caller's transaction (``MEMORY_WRITER`` "worker", as a turn does: ``memory.conversation.writer``), or written once
    it
    commits ("inline"); nothing with "off". A failure is logged; the worker's sweep writes a user message later."""
    ids = [str(m.pk) for m in messages]
    if settings.MEMORY_WRITER == "off":
        return
    if settings.MEMORY_WRITER == "worker":
        announce(tenant, session.pk, ids)
        return

    def write() -> None:
        try:
            index_turn(tenant, session.pk, ids)
        except Exception:
            logger.exception("indexing messages %s of session %s failed", ids, session.pk)

    transaction.on_commit(write)


@require_session_id
def do_rate(tenant: Tenant, session: ChatSession, score: int, comment: str) -> SessionRating:
    """The end user's rating of the conversation (open or closed); a second one replaces the first.
    ``handled_by``: ``staff`` when only a person answered, ``both`` when the AI did too, else ``ai``; ``staff`` is
    the person (the assignee, else the last staff author)."""
    now = timezone.now()
    with tenant_scope(tenant):
        row = _locked(tenant, session)  # one rating per session: concurrent ones queue here
        messages = Message.objects.for_tenant(tenant).filter(session=row)
        ai = messages.filter(role=Message.Role.ASSISTANT).exists()
        staff = row.assigned_to
        if staff is None and row.staff_involved:
            last = messages.filter(role=Message.Role.STAFF, author__isnull=False).select_related("author").last()
            staff = last.author if last is not None else None
        handled_by = (
            SessionRating.HandledBy.BOTH if row.staff_involved and ai
            else SessionRating.HandledBy.STAFF if row.staff_involved
            else SessionRating.HandledBy.AI
        )  # fmt: skip
        rating, _ = SessionRating.objects.for_tenant(tenant).update_or_create(
            tenant=tenant, session=row,
            defaults={"score": score, "comment": comment, "handled_by": handled_by, "staff": staff, "updated_at": now},
            create_defaults={"score": score, "comment": comment, "handled_by": handled_by, "staff": staff,
                             "created_at": now, "updated_at": now},
        )  # fmt: skip
    metrics.CSAT.labels(tenant=tenant.slug, handled_by=handled_by).observe(score)
    return rating
