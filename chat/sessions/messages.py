"""The user's message and the session's message record: checking and storing it, its turn's lease, pages.

``store_user_message`` is a turn's first step (``chat.turn.run``): the message is committed before anything
else, idempotent by ``client_msg_id``, and the rate limits are counted from the stored messages, so they
hold across every worker process. A message with a ``client_msg_id`` carries its turn's lease
(``Message.turn_lease_until``): while the turn runs, a retry of the same message waits for its reply instead
of running the turn twice; a turn that failed releases the lease, and one whose process died stops blocking
retries once it lapses. ``insert_message`` and ``session_locked`` are shared with ``chat.turn.finish``, which
stores the reply the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db import connection
from django.utils import timezone
from psycopg import sql

from config.db.sql import execute, fetch_row
from config.errors import ApiError
from config.text_input import InvalidText, clean_text
from conversations.access import SessionNotFound, require_session_id
from conversations.models import ChatSession, Message
from tenants.models import Tenant
from tenants.rls import tenant_scope

MAX_MESSAGE_CHARS = 4000
DEFAULT_RATE_PER_SESSION = 60
DEFAULT_RATE_PER_TENANT = 600

#: A running turn's claim on its user message (``Message.turn_lease_until``) lasts this long and is renewed
#: three times as often: a turn whose process died stops blocking retries of its message within it.
TURN_LEASE_S = 15.0


class InvalidMessage(ApiError):
    code = "invalid_message"


class RateLimited(ApiError):
    status = 429
    code = "rate_limited"


class TurnRunning(Exception):
    """Raised by ``store_user_message``: this ``client_msg_id``'s turn holds its lease (it is running)."""

    def __init__(self, message_id: str) -> None:
        super().__init__(message_id)
        self.message_id = message_id


def check_message(text: Any, client_msg_id: Any) -> tuple[str, str | None]:
    """The message's text and ``client_msg_id`` as they are stored (NFC,
    full-width letters and digits folded), or ``InvalidMessage``: code
    ``invalid_text`` for characters PostgreSQL cannot store (NUL, lone
    surrogates) and other control characters. Both transports call it
    before anything is written."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidMessage("text must be a non-empty string")
    if client_msg_id is not None and (not isinstance(client_msg_id, str) or not 0 < len(client_msg_id) <= 100):
        raise InvalidMessage("client_msg_id must be a string of 1 to 100 characters")
    try:
        text = clean_text(text, field="text")
        if client_msg_id is not None:
            client_msg_id = clean_text(client_msg_id, field="client_msg_id")
    except InvalidText as exc:
        raise InvalidMessage(exc.message, code=exc.code) from None
    if len(text) > MAX_MESSAGE_CHARS:
        raise InvalidMessage(f"text must be at most {MAX_MESSAGE_CHARS} characters", code="message_too_long")
    return text.strip(), client_msg_id


def _limits(tenant: Tenant) -> tuple[int, int]:
    conf = tenant.settings.get("rate_limits", {}) if isinstance(tenant.settings, dict) else {}
    return (
        int(conf.get("per_session_per_minute", DEFAULT_RATE_PER_SESSION)),
        int(conf.get("per_tenant_per_minute", DEFAULT_RATE_PER_TENANT)),
    )


# The statements every turn runs, in SQL (config/db/sql.py explains why). Each names
# its tenant, as the scoped managers do, and row-level security holds anyway.
_LOCK_SESSION = "SELECT 1 FROM chat_chatsession WHERE tenant_id = {tenant} AND id = {session} FOR UPDATE"

# What store_user_message checks, in one read. A rate limit is reached when
# the n-th most recent user message of the last minute exists: the scans stop
# at n (the tenant's on the message_user_recent index) instead of counting.
_MESSAGE_CHECKS = """
SELECT
    (SELECT max(seq) FROM chat_message
     WHERE tenant_id = %(tenant)s AND session_id = %(session)s) AS last_seq,
    (SELECT id FROM chat_message
     WHERE tenant_id = %(tenant)s AND session_id = %(session)s AND role = 'user' AND client_msg_id = %(client_msg_id)s
     ORDER BY seq LIMIT 1) AS replayed,
    (SELECT created_at FROM chat_message
     WHERE tenant_id = %(tenant)s AND session_id = %(session)s AND role = 'user' AND created_at >= %(since)s
     ORDER BY created_at DESC OFFSET %(session_skip)s LIMIT 1) AS session_full,
    (SELECT created_at FROM chat_message
     WHERE tenant_id = %(tenant)s AND role = 'user' AND created_at >= %(since)s
     ORDER BY created_at DESC OFFSET %(tenant_skip)s LIMIT 1) AS tenant_full
"""

_TOUCH_SESSION = """
UPDATE chat_chatsession SET last_activity_at = %(now)s WHERE tenant_id = %(tenant)s AND id = %(session)s
"""

# A message's INSERT and its session's UPDATE (``_TOUCH_SESSION``, or ``chat.turn.finish``'s ``_FINISH_SESSION``) in one
# statement, with more WITH items where the caller has them (the reply's feedback): a data-modifying WITH runs
# exactly once whether or not it is referenced.
_INSERT_MESSAGE = """
WITH session_update AS ({session_update}){more}
INSERT INTO chat_message (id, tenant_id, session_id, role, text, client_msg_id, reply_to_id, status, data, created_at,
                          seq, turn_lease_until)
VALUES (%(id)s, %(tenant)s, %(session)s, %(role)s, %(text)s, %(client_msg_id)s, %(reply_to)s, %(status)s, %(data)s,
        %(now)s, %(seq)s, %(lease)s)
"""


def insert_message(
    message: Message, session_update: str, params: dict[str, Any], more: tuple[str, dict[str, Any]] | None = None
) -> Message:
    """Insert ``message`` (built, not saved; ``created_at`` is ``params["now"]``) and run ``session_update``
    with ``params`` (and ``more``: WITH items and their parameters), in one round trip; returns the message,
    now stored."""
    items, more_params = more or ("", {})
    execute(
        _INSERT_MESSAGE.format(session_update=session_update.strip(), more=f", {items}" if items else ""),
        {
            **more_params,
            **params, "id": message.pk, "role": message.role, "text": message.text,
            "client_msg_id": message.client_msg_id, "reply_to": message.reply_to_id, "status": message.status,
            "data": connection.ops.adapt_json_value(message.data, None), "seq": message.seq,
            "lease": message.turn_lease_until,
        },
    )  # fmt: skip
    message._state.adding = False
    message._state.db = connection.alias
    return message


@contextmanager
def session_locked(tenant: Tenant, session: ChatSession) -> Iterator[None]:
    """The tenant's scope, its transaction starting with the session's row
    lock (sent with its ``BEGIN``, in one round trip): the turns of one
    session store their messages one at a time, so ``seq`` never repeats."""
    lock = sql.SQL(_LOCK_SESSION).format(tenant=sql.Literal(tenant.pk), session=sql.Literal(session.pk))
    with tenant_scope(tenant, first=lock) as locked:
        if not locked:
            raise SessionNotFound("No such session.")  # deleted (with its tenant) since the turn began
        yield


@require_session_id
def store_user_message(
    tenant: Tenant,
    session: ChatSession,
    text: str,
    client_msg_id: str | None,
    *,
    then: Callable[[Message], None] | None = None,
) -> tuple[Message, Message | None]:
    """Store (or find) the user message; returns it and its stored reply if
    this ``client_msg_id`` was already answered. Rate limits are counted from
    the stored messages, so they hold across every worker process; a replay
    is not counted.

    A message with a ``client_msg_id`` is stored with the turn's lease (see
    ``Message.turn_lease_until``). A retry of an unanswered message takes the
    lease over when it has lapsed or was released (the first turn failed)
    and runs the turn again; while another turn holds it, ``TurnRunning``.
    The session's lock makes the take-over one retry's alone.

    Three round trips: the transaction's ``BEGIN`` with the session's lock;
    one read of everything the checks need (a replay's id, both rate limits,
    the last ``seq``); the insert with the session's ``last_activity_at``;
    then ``COMMIT``. ``then(message)``, when given, runs before the commit
    when the turn is to run (a new message, or a retry that took the lease
    over): the caller's own reads in the same transaction, under the lock
    (the handoff's, ``chat.turn.run``), instead of a transaction of their own.
    The read must be a statement of its own, after the lock:
    a statement that waits for a row lock keeps the snapshot it started
    with, so its subqueries would miss the message a concurrent turn of this
    session has just committed (a duplicate ``seq``)."""
    per_session, per_tenant = _limits(tenant)
    ids = {"tenant": tenant.pk, "session": session.pk}
    with session_locked(tenant, session):
        messages = Message.objects.for_tenant(tenant)
        state = fetch_row(
            _MESSAGE_CHECKS,
            {
                **ids, "client_msg_id": client_msg_id, "since": timezone.now() - timedelta(minutes=1),
                "session_skip": max(per_session - 1, 0), "tenant_skip": max(per_tenant - 1, 0),
            },
        )  # fmt: skip
        assert state is not None  # a SELECT without FROM always answers one row
        if state["replayed"] is not None:
            existing = messages.get(pk=state["replayed"])
            reply = (
                messages.filter(reply_to=existing, role=Message.Role.ASSISTANT, status=Message.Status.COMPLETE)
                .order_by("-seq")
                .first()
            )
            if reply is None:
                if not _take_lease(tenant, existing):
                    raise TurnRunning(str(existing.pk))
                if then is not None:
                    then(existing)
            return existing, reply
        if per_session <= 0 or state["session_full"] is not None:  # a limit of 0 refuses everything
            raise RateLimited(f"More than {per_session} messages a minute in this session; slow down.")
        if per_tenant <= 0 or state["tenant_full"] is not None:
            raise RateLimited(f"More than {per_tenant} messages a minute for this tenant; slow down.")
        now = timezone.now()
        message = Message(
            tenant=tenant, session=session, role=Message.Role.USER, text=text, client_msg_id=client_msg_id,
            seq=(state["last_seq"] or 0) + 1, created_at=now,
            turn_lease_until=now + timedelta(seconds=TURN_LEASE_S) if client_msg_id is not None else None,
        )  # fmt: skip
        insert_message(message, _TOUCH_SESSION, {**ids, "now": now})
        if then is not None:
            then(message)
        return message, None


_TAKE_LEASE = """
UPDATE chat_message SET turn_lease_until = %(until)s
WHERE tenant_id = %(tenant)s AND id = %(id)s AND (turn_lease_until IS NULL OR turn_lease_until < %(now)s)
"""
# Renewing keeps a lease only while it is still set: a released one stays released.
_RENEW_LEASE = """
UPDATE chat_message SET turn_lease_until = %(until)s
WHERE tenant_id = %(tenant)s AND id = %(id)s AND turn_lease_until IS NOT NULL
"""
_RELEASE_LEASE = "UPDATE chat_message SET turn_lease_until = NULL WHERE tenant_id = %(tenant)s AND id = %(id)s"


def _take_lease(tenant: Tenant, message: Message) -> bool:
    now = timezone.now()
    until = now + timedelta(seconds=TURN_LEASE_S)
    return execute(_TAKE_LEASE, {"tenant": tenant.pk, "id": message.pk, "now": now, "until": until}) == 1


def renew_lease(tenant: Tenant, message_id: Any) -> None:
    """Extend the running turn's claim on its message by ``TURN_LEASE_S``."""
    until = timezone.now() + timedelta(seconds=TURN_LEASE_S)
    with tenant_scope(tenant):
        execute(_RENEW_LEASE, {"tenant": tenant.pk, "id": message_id, "until": until})


def release_lease(tenant: Tenant, message_id: Any) -> None:
    """The turn ended without a complete reply: a retry may run it again at once."""
    with tenant_scope(tenant):
        execute(_RELEASE_LEASE, {"tenant": tenant.pk, "id": message_id})


def list_messages(
    tenant: Tenant, session: ChatSession, *, before: Any = None, limit: int = 50, include_tool: bool = False
) -> tuple[list, bool]:
    """A page of the session's messages, newest page first, oldest first
    within the page; ``has_more`` when older messages exist. Tool-call audit
    messages only with ``include_tool`` (the tenant's API, not the end
    user's chat history)."""
    with tenant_scope(tenant):
        qs = Message.objects.for_tenant(tenant).filter(session=session)
        if not include_tool:
            qs = qs.exclude(role=Message.Role.TOOL)
        if before is not None:
            anchor = qs.filter(pk=before).first()
            if anchor is None:
                raise ApiError("before must be the id of a message of this session", code="invalid_request")
            qs = qs.filter(seq__lt=anchor.seq)
        page = list(qs.order_by("-seq")[: limit + 1])
    has_more = len(page) > limit
    return page[:limit][::-1], has_more


def serialize_message(message: Message) -> dict[str, Any]:
    """A message as the history lists it; an agent's reply also carries the ``citations`` its turn answered
    with (stored in its ``data``), so a page that reloads shows their sources."""
    data = {
        "id": str(message.pk),
        "role": message.role,
        "text": message.text,
        "status": message.status,
        "client_msg_id": message.client_msg_id,
        "reply_to": str(message.reply_to_id) if message.reply_to_id else None,
        "created_at": message.created_at.isoformat().replace("+00:00", "Z"),
    }
    if message.role == Message.Role.ASSISTANT:
        data["citations"] = list((message.data or {}).get("citations", []))
    return data
