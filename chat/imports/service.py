"""A past conversation imported with its own times (API.md "Past conversations (import)").

``do_import_conversation`` checks the whole payload before anything is written (a bad one stores nothing),
then, in one transaction: the end user (the caller tenant's, by its id: another tenant's end user of the
same id is never seen), a closed session holding the messages at their own ``sent_at``, the
``ImportedConversation`` row that makes the import idempotent by ``external_id``, and the background job
that turns the messages into memory (``chat.imports.run``). A repeated ``external_id`` answers the first
import's row and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from procrastinate.contrib.django import app as jobs

from chat.sessions.lifecycle import get_or_create_end_user
from chat.sessions.messages import InvalidMessage, check_message
from config.errors import ApiError, NotFound
from config.ids import parse_uuid
from conversations.models import ChatSession, ImportedConversation, Message
from tenants.models import EndUser, Tenant
from tenants.rls import tenant_scope

#: The most messages, and characters of text, one import call takes (each message is also held to the live
#: chat's 4,000 characters); the request body's own limit (``MAX_REQUEST_BYTES``) applies before.
MAX_MESSAGES = 500
MAX_TEXT_CHARS = 200_000
#: The import's roles and the stored message's: the contract's ``agent`` is the AI's ``assistant``.
ROLES = {"user": Message.Role.USER, "agent": Message.Role.ASSISTANT, "staff": Message.Role.STAFF}
IMPORT_QUEUE = "imports"
RUN_IMPORT = "chat.run_import"


class InvalidImport(ApiError):
    code = "invalid_import"


@dataclass(frozen=True)
class ImportResult:
    imported: ImportedConversation
    #: False: the same ``external_id`` was imported before, and this is that import.
    created: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": str(self.imported.session_id),
            "messages": self.imported.messages,
            "status": self.imported.status,
        }


@dataclass(frozen=True)
class _Checked:
    external_id: str
    started_at: datetime
    messages: list[tuple[str, str, datetime, str | None]]  # role, text, sent_at, external id
    metadata: dict[str, Any]


def _time(value: Any, field: str, now: datetime) -> datetime:
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is None:
        raise InvalidImport(f"{field} must be an ISO 8601 date and time with its zone", extra={"field": field})
    if parsed.tzinfo is None:
        raise InvalidImport(f"{field} has no zone: say which (Z, +08:00, …)", extra={"field": field})
    if parsed > now:
        raise InvalidImport(f"{field} is in the future", extra={"field": field})
    return parsed


def _id(value: Any, field: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > limit:
        raise InvalidImport(f"{field} must be a string of 1 to {limit} characters", extra={"field": field})
    return value.strip()


def check_import(end_user_id: Any, payload: Any, *, now: datetime | None = None) -> _Checked:
    """The payload checked whole, or ``InvalidImport`` (``invalid_import``; ``invalid_text`` or
    ``message_too_long`` for a message's text, as in live chat) naming the first field at fault."""
    now = now or timezone.now()
    _id(end_user_id, "end_user_id", 200)
    if not isinstance(payload, dict):
        raise InvalidImport("the body must be a JSON object")
    unknown = sorted(set(payload) - {"external_id", "started_at", "messages", "metadata"})
    if unknown:
        raise InvalidImport(f"unknown fields: {', '.join(unknown)}", extra={"field": unknown[0]})
    external_id = _id(payload.get("external_id"), "external_id", 200)
    started_at = _time(payload.get("started_at"), "started_at", now)
    metadata = payload.get("metadata", {})
    if not isinstance(metadata, dict):
        raise InvalidImport("metadata must be an object", extra={"field": "metadata"})
    raw = payload.get("messages")
    if not isinstance(raw, list) or not raw:
        raise InvalidImport("messages must be a non-empty list", extra={"field": "messages"})
    if len(raw) > MAX_MESSAGES:
        problem = f"at most {MAX_MESSAGES} messages per conversation, not {len(raw)}"
        raise InvalidImport(problem, extra={"field": "messages"})
    messages: list[tuple[str, str, datetime, str | None]] = []
    seen: set[str] = set()
    previous = started_at
    total = 0
    for index, item in enumerate(raw):
        field = f"messages[{index}]"
        if not isinstance(item, dict):
            raise InvalidImport(f"{field} must be an object", extra={"field": field})
        extra = sorted(set(item) - {"role", "text", "sent_at", "external_id"})
        if extra:
            raise InvalidImport(f"{field}: unknown fields: {', '.join(extra)}", extra={"field": f"{field}.{extra[0]}"})
        role = item.get("role")
        if role not in ROLES:
            raise InvalidImport(f"{field}.role must be one of user, agent, staff", extra={"field": f"{field}.role"})
        message_id = item.get("external_id")
        try:
            text, message_id = check_message(item.get("text"), message_id)
        except InvalidMessage as exc:
            raise InvalidImport(f"{field}: {exc.message}", code=exc.code, extra={"field": field}) from None
        if message_id is not None:
            if message_id in seen:
                raise InvalidImport(f"{field}.external_id repeats an earlier message's", extra={"field": field})
            seen.add(message_id)
        sent_at = _time(item.get("sent_at"), f"{field}.sent_at", now)
        if sent_at < previous:
            raise InvalidImport(
                f"{field}.sent_at is before the message before it (or started_at): messages go in order",
                extra={"field": f"{field}.sent_at"},
            )
        previous = sent_at
        total += len(text)
        if total > MAX_TEXT_CHARS:
            raise InvalidImport(f"at most {MAX_TEXT_CHARS} characters of text per conversation", extra={"field": field})
        messages.append((ROLES[role], text, sent_at, message_id))
    return _Checked(external_id, started_at, messages, metadata)


def _existing(tenant: Tenant, end_user_id: str, external_id: str) -> ImportedConversation | None:
    return (
        ImportedConversation.objects.for_tenant(tenant)
        .filter(end_user__external_id=end_user_id, external_id=external_id)
        .first()
    )


def do_import_conversation(tenant: Tenant, end_user_id: str, payload: Any) -> ImportResult:
    """Check and store one past conversation and queue its indexing; the same ``external_id`` of the same end
    user again answers the first import (``created`` False) and writes nothing."""
    checked = check_import(end_user_id, payload)
    end_user_id = end_user_id.strip()
    with tenant_scope(tenant):
        found = _existing(tenant, end_user_id, checked.external_id)
        if found is not None:
            return ImportResult(found, created=False)
        try:
            with transaction.atomic():
                imported = _store(tenant, get_or_create_end_user(tenant, end_user_id), checked)
        except IntegrityError:
            found = _existing(tenant, end_user_id, checked.external_id)  # a concurrent import of the same one won
            if found is None:
                raise
            return ImportResult(found, created=False)
    return ImportResult(imported, created=True)


def _store(tenant: Tenant, end_user: EndUser, checked: _Checked) -> ImportedConversation:
    last = checked.messages[-1][2]
    session = ChatSession.objects.create(
        tenant=tenant, end_user=end_user, metadata=checked.metadata, status=ChatSession.Status.CLOSED,
        created_at=checked.started_at, last_activity_at=last, expires_at=last, closed_at=last,
    )  # fmt: skip
    imported = ImportedConversation.objects.create(
        tenant=tenant, end_user=end_user, session=session, external_id=checked.external_id,
        messages=len(checked.messages),
    )  # fmt: skip
    Message.objects.bulk_create(
        Message(
            tenant=tenant,
            session=session,
            role=role,
            text=text,
            created_at=sent_at,
            seq=seq,
            client_msg_id=message_id,
            data={"imported": True},
        )  # fmt: skip
        for seq, (role, text, sent_at, message_id) in enumerate(checked.messages)
    )
    queue_import(tenant, imported)
    return imported


def queue_import(tenant: Tenant, imported: ImportedConversation) -> None:
    """Queue the job that indexes ``imported`` (in the caller's transaction: no import without its job). One
    job per import at a time (its queueing lock); the job resumes after the last message it indexed."""
    jobs.configure_task(RUN_IMPORT, allow_unknown=False, queueing_lock=f"import-{imported.pk}").defer(
        tenant_id=str(tenant.pk), imported_id=imported.pk
    )


def describe_import(tenant: Tenant, end_user_id: str, session_id: str) -> dict[str, Any]:
    """``GET …/conversations/<session_id>``: the import's status and how many of its messages are indexed."""
    with tenant_scope(tenant):
        imported = (
            ImportedConversation.objects.for_tenant(tenant)
            .filter(end_user__external_id=end_user_id, session_id=parse_uuid(session_id, _not_found()))
            .first()
        )
        if imported is None:
            raise _not_found()
        indexed = Message.objects.for_tenant(tenant).filter(session_id=imported.session_id, seq__lte=imported.done_seq)
        return {
            "session_id": str(imported.session_id),
            "status": imported.status,
            "messages": imported.messages,
            "indexed": indexed.count(),
            **({"error": imported.error} if imported.error else {}),
        }


def _not_found() -> NotFound:
    return NotFound("No imported conversation with this id for this end user.", code="conversation_not_found")
