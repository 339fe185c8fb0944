"""An end user's data rights: everything memdesk holds about one end user, exported or erased.

Whose data. An end user is a tenant's customer, known by the tenant's own id for them (``EndUser.external_id``,
the ``end_user_id`` of ``POST /api/v1/sessions``). Theirs are: their sessions and everything under them (messages,
tool calls, the execution context, batches and the worker's jobs for them, amnesia alerts), their memories with
every superseded version, every audit event of those memories (feedback included), and the record of staff who
read them (``StaffAccess``). Another tenant's end user with the same id is another person: every query names the
tenant, and runs in that tenant's RLS scope.

Export (:func:`export_end_user`). One JSON document (its layout is ``docs/privacy.md``; ``SCHEMA_VERSION`` changes
when a key changes meaning or goes), produced as chunks of text: rows are read with server-side cursors
(``.iterator(chunk_size=…)``) inside one transaction of the tenant's scope, so a history of any length never
sits in memory whole. The end user is looked up before the first chunk, so an unknown one is a 404, not a
truncated document.

Erasure (:func:`do_erase_end_user`). One transaction: the end user's row is locked, then their sessions (what a
chat turn locks first), messages (what the conversation memory writer locks) and batches (what the batch worker
locks first), so work running for them meanwhile either committed before or finds nothing after. Then
everything goes, and a tombstone (``tenants.models.Erasure``) records who asked, when, and how many rows of each
table went — never content, and the id only as a keyed digest. The invariant: after the commit no table holds a
row of the end user, nor anything that refers to one (rows keyed by id without a foreign key: audit events by
``memory_id``, the worker's jobs by ``task_id`` or ``session_id``, the admin's change log by ``object_id``). A
failure anywhere rolls everything back, tombstone included.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from django.apps import apps
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.models import Model, Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from chat.models import Batch
from chat.sessions.messages import serialize_message
from chat.tools.batches import RUN_BATCH
from config.errors import ApiError, NotFound
from config.text_input import InvalidText, clean_text
from conversations.models import ChatSession, Message, StaffAccess
from memory.models import MemoryEvent, MemoryUnit
from memory.serializers import serialize_memory
from memory.tasks import INDEX_TURN
from tenants.models import EndUser, Erasure, Tenant, end_user_digest
from tenants.rls import tenant_scope

#: The export's layout version (docs/privacy.md).
SCHEMA_VERSION = 1
#: Rows fetched per round trip of a server-side cursor, and the size (characters) of the chunks handed out.
ROWS_PER_FETCH = 500
CHUNK_CHARS = 64 * 1024
#: ``EndUser.external_id``'s length, as ``POST /api/v1/sessions`` accepts it.
MAX_END_USER_ID = EndUser._meta.get_field("external_id").max_length

#: Audit events that record a use of a memory or the user's reaction to it: the export's ``feedback``. Every
#: other kind is a change of the memory: its ``memory_events``.
FEEDBACK_KINDS = {
    MemoryEvent.Kind.USE: "used",
    MemoryEvent.Kind.IGNORE: "ignored",
    MemoryEvent.Kind.MISLEAD: "misled",
    MemoryEvent.Kind.CONFIRM: "confirmed",
}
#: Columns that are derived from a memory's text (search and embedding): not the person's data, and large.
_DERIVED_MEMORY_FIELDS = (
    "embedding",
    "embedding_model",
    "search_text",
    "search_context",
    "search_around",
    "search_vector",
)


class EndUserNotFound(NotFound):
    code = "end_user_not_found"


class InvalidEndUserId(ApiError):
    code = "invalid_end_user_id"


# --- which end user ----------------------------------------------------------------


def check_end_user_id(raw: Any) -> str:
    """The tenant's id for an end user in the form ``POST /api/v1/sessions`` stored it (NFC, full-width letters
    and digits folded, surrounding white space trimmed). Raises :class:`InvalidEndUserId` for an id that no end
    user can have: empty, longer than ``MAX_END_USER_ID``, or holding a control character."""
    try:
        cleaned = clean_text(str(raw), field="end_user_id").strip()
    except InvalidText as exc:
        raise InvalidEndUserId(exc.message) from None
    if not cleaned:
        raise InvalidEndUserId("end_user_id must not be empty")
    if len(cleaned) > MAX_END_USER_ID:
        raise InvalidEndUserId(f"end_user_id must be at most {MAX_END_USER_ID} characters")
    return cleaned


def get_end_user(tenant: Tenant, external_id: Any) -> EndUser:
    """The tenant's end user known by ``external_id``; :class:`EndUserNotFound` when there is none (another
    tenant's end user with the same id is not this tenant's)."""
    external_id = check_end_user_id(external_id)
    with tenant_scope(tenant):
        end_user = EndUser.objects.for_tenant(tenant).filter(external_id=external_id).first()
    if end_user is None:
        raise EndUserNotFound("No such end user.")
    return end_user


# --- export ------------------------------------------------------------------------


def export_end_user(tenant: Tenant, external_id: Any) -> Iterator[str]:
    """The end user's export as chunks of one JSON document. The end user is looked up now (raising
    :class:`InvalidEndUserId` or :class:`EndUserNotFound`); the rows are read as the chunks are taken, in a
    transaction of the tenant's RLS scope that the iterator opens on its first chunk and ends with its last
    (or when closed). Take every chunk on one thread: the transaction is that thread's connection's."""
    end_user = get_end_user(tenant, external_id)
    return _chunks(_document(tenant, end_user))


def _chunks(pieces: Iterable[str]) -> Iterator[str]:
    buffer: list[str] = []
    size = 0
    for piece in pieces:
        buffer.append(piece)
        size += len(piece)
        if size >= CHUNK_CHARS:
            yield "".join(buffer)
            buffer, size = [], 0
    if buffer:
        yield "".join(buffer)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _array(entries: Iterable[str]) -> Iterator[str]:
    """``[`` entries ``]``, comma-separated, each entry already JSON."""
    yield "["
    for index, entry in enumerate(entries):
        yield entry if index == 0 else "," + entry
    yield "]"


def _rows(queryset: QuerySet) -> Iterator[Any]:
    return queryset.iterator(chunk_size=ROWS_PER_FETCH)


def _document(tenant: Tenant, end_user: EndUser) -> Iterator[str]:
    with tenant_scope(tenant):
        head = {
            "schema_version": SCHEMA_VERSION,
            "end_user_id": end_user.external_id,
            "exported_at": _iso(timezone.now()),
            "end_user": {"created_at": _iso(end_user.created_at), "memory_enabled": end_user.memory_enabled},
        }
        yield _dumps(head)[:-1]
        for key, entries in (
            ("sessions", _sessions(tenant, end_user)),
            ("memories", _memories(tenant, end_user)),
            ("memory_events", _events(tenant, end_user, feedback=False)),
            ("feedback", _events(tenant, end_user, feedback=True)),
            ("tool_calls", _tool_calls(tenant, end_user)),
            ("batches", _batches(tenant, end_user)),
            ("staff_access", _staff_access(tenant, end_user)),
        ):
            yield f',"{key}":'
            yield from _array(entries)
        yield "}"


def _sessions(tenant: Tenant, end_user: EndUser) -> Iterator[str]:
    sessions = (
        ChatSession.objects.for_tenant(tenant)
        .filter(end_user=end_user)
        .select_related("context")
        .order_by("created_at", "id")
    )
    for session in _rows(sessions):
        context = getattr(session, "context", None)
        head = {
            "session_id": str(session.pk),
            "status": session.status,
            "created_at": _iso(session.created_at),
            "last_activity_at": _iso(session.last_activity_at),
            "expires_at": _iso(session.expires_at),
            "closed_at": _iso(session.closed_at),
            "metadata": session.metadata,
            "topic": session.topic,
            "execution_context": None
            if context is None
            else {**context.as_dict(), "updated_at": _iso(context.updated_at)},
        }
        # The session's messages nest inside its entry: the entry is written open, its messages streamed
        # into it, then closed. Tool calls are messages too; they are the export's ``tool_calls``.
        messages = (
            Message.objects.for_tenant(tenant)
            .filter(session=session)
            .exclude(role=Message.Role.TOOL)
            .order_by("seq", "created_at")
        )
        yield "".join(
            [
                _dumps(head)[:-1],
                ',"messages":',
                *_array(_dumps({**serialize_message(m), "seq": m.seq, "data": m.data}) for m in _rows(messages)),
                "}",
            ]
        )


def _memories(tenant: Tenant, end_user: EndUser) -> Iterator[str]:
    """Every version of every memory: the current ones, those replaced (``superseded_at``/``superseded_by``),
    expired and frozen ones."""
    memories = (
        MemoryUnit.objects.for_tenant(tenant)
        .filter(end_user=end_user)
        .defer(*_DERIVED_MEMORY_FIELDS)
        .order_by("created_at", "id")
    )
    now = timezone.now()
    for memory in _rows(memories):
        memory.end_user = end_user  # the one end user, not a query per memory
        entry = serialize_memory(memory, now=now)
        entry.update(
            {
                "source_role": memory.source_role,
                "updated_at": _iso(memory.updated_at),
                "superseded_at": _iso(memory.superseded_at),
                "superseded_by": str(memory.superseded_by_id) if memory.superseded_by_id else None,
                "recall_count": memory.recall_count,
                "feedback_counts": {
                    "used": memory.use_count,
                    "ignored": memory.ignore_count,
                    "misled": memory.mislead_count,
                    "confirmed": memory.confirm_count,
                },
            }
        )
        yield _dumps(entry)


def _events(tenant: Tenant, end_user: EndUser, *, feedback: bool) -> Iterator[str]:
    """The audit trail of the end user's memories, changes or feedback: who (``system``, ``end_user``,
    ``tenant_api``, ``staff``; never which staff member), what, when, and the memory before and after."""
    events = MemoryEvent.objects.for_tenant(tenant).filter(end_user=end_user).order_by("created_at", "id")
    events = events.filter(kind__in=FEEDBACK_KINDS) if feedback else events.exclude(kind__in=FEEDBACK_KINDS)
    for event in _rows(events):
        entry: dict[str, Any] = {"memory_id": str(event.memory_id)}
        if feedback:
            entry["event"] = FEEDBACK_KINDS[event.kind]
        else:
            entry.update({"kind": event.kind, "before": event.before, "after": event.after})
        entry.update({"actor": event.actor, "note": event.note, "at": _iso(event.created_at)})
        yield _dumps(entry)


def _tool_calls(tenant: Tenant, end_user: EndUser) -> Iterator[str]:
    """Each tool call of a turn, as its audit message holds it: the tool, its arguments and its answer (both
    with secrets already redacted when stored), and how the call went."""
    calls = (
        Message.objects.for_tenant(tenant)
        .filter(session__end_user=end_user, role=Message.Role.TOOL)
        .order_by("created_at", "seq")
    )
    for call in _rows(calls):
        try:
            recorded = json.loads(call.text)
        except ValueError:
            recorded = {"text": call.text}
        recorded = recorded if isinstance(recorded, dict) else {"text": call.text}
        yield _dumps(
            {
                "message_id": str(call.pk),
                "session_id": str(call.session_id),
                "reply_to": str(call.reply_to_id) if call.reply_to_id else None,
                "tool": recorded.get("tool", call.data.get("tool")),
                "arguments": recorded.get("arguments"),
                "result": recorded.get("result"),
                "outcome": call.data.get("outcome"),
                "status": call.data.get("status"),
                "duration_ms": call.data.get("duration_ms"),
                "created_at": _iso(call.created_at),
            }
        )


def _batches(tenant: Tenant, end_user: EndUser) -> Iterator[str]:
    batches = Batch.objects.for_tenant(tenant).filter(session__end_user=end_user).order_by("created_at", "id")
    for batch in _rows(batches):
        yield _dumps(
            {
                "task_id": str(batch.pk),
                "session_id": str(batch.session_id),
                "tool": batch.tool_name,
                "items": batch.items,
                "total": batch.total,
                "completed": batch.completed,
                "failed": batch.failed,
                "failures": batch.failures,
                "last_success_id": batch.last_success_id,
                "status": batch.status,
                "created_at": _iso(batch.created_at),
                "finished_at": _iso(batch.finished_at),
            }
        )


def _staff_access(tenant: Tenant, end_user: EndUser) -> Iterator[str]:
    """When the tenant's staff read the end user's data, and what (not which staff member)."""
    reads = StaffAccess.objects.for_tenant(tenant).filter(end_user=end_user).order_by("created_at", "id")
    for read in _rows(reads):
        yield _dumps(
            {
                "what": read.what,
                "session_id": str(read.session_id) if read.session_id else None,
                "at": _iso(read.created_at),
            }
        )


# --- erasure -----------------------------------------------------------------------


def _owned(end_user: EndUser) -> dict[type[Model], Q]:
    """The end user's rows that the admin's change log may name."""
    return {
        EndUser: Q(pk=end_user.pk),
        ChatSession: Q(end_user=end_user),
        Message: Q(session__end_user=end_user),
        MemoryUnit: Q(end_user=end_user),
        MemoryEvent: Q(end_user=end_user),
        Batch: Q(session__end_user=end_user),
        StaffAccess: Q(end_user=end_user),
    }


#: The worker's jobs that name the end user's rows (procrastinate's table: no tenant column, no RLS; a job's args
#: name the tenant and the row): a batch's run (``task_id``) and a turn's conversation memory (``session_id``,
#: ``message_ids``). A job running now is left to procrastinate: what it names is gone, so it ends at its next
#: step (``chat.tools.batches.run_batch`` returns "gone", ``memory.conversation.units.index_turn`` finds no message),
#: and its
#: row then holds only ids of rows that no longer exist. Their events go first (procrastinate would cascade
#: them), so the count names both tables.
_JOBS_SQL = """
SELECT id FROM procrastinate_jobs
WHERE args->>'tenant_id' = %(tenant)s AND status <> 'doing' AND (
    (task_name = %(run_batch)s AND args->>'task_id' = ANY(%(batches)s))
    OR (task_name = %(index_turn)s AND args->>'session_id' = ANY(%(sessions)s))
)
"""
_DELETE_JOB_EVENTS_SQL = f"DELETE FROM procrastinate_events WHERE job_id IN ({_JOBS_SQL})"  # noqa: S608 - constants
_DELETE_JOBS_SQL = f"DELETE FROM procrastinate_jobs WHERE id IN ({_JOBS_SQL})"  # noqa: S608 - constants


def do_erase_end_user(tenant: Tenant, external_id: Any, *, actor: str, actor_user: Any = None) -> Erasure:
    """Erase everything of the tenant's end user ``external_id`` (see the module's docstring) in one
    transaction, and write its tombstone; returns the tombstone, whose ``counts`` are the rows deleted per
    table. Raises :class:`InvalidEndUserId`, or :class:`EndUserNotFound` for an unknown end user (one erased
    already among them). ``actor``: an ``Erasure.Actor``; ``actor_user`` the staff user who asked, if any."""
    external_id = check_end_user_id(external_id)
    if actor not in Erasure.Actor.values:
        raise ValueError(f"unknown erasure actor {actor!r}")
    with tenant_scope(tenant):
        end_user = EndUser.objects.for_tenant(tenant).select_for_update().filter(external_id=external_id).first()
        if end_user is None:
            raise EndUserNotFound("No such end user.")
        # Locks in the order the others take them: a chat turn its session, then its messages; the conversation
        # memory writer the messages it marks; the batch worker its batch. Whoever held one first has committed
        # when this goes on (what they wrote is then seen and deleted); whoever comes later finds nothing.
        sessions = ChatSession.objects.for_tenant(tenant).filter(end_user=end_user)
        session_ids = [str(pk) for pk in sessions.select_for_update().values_list("pk", flat=True)]
        messages = Message.objects.for_tenant(tenant).filter(session__end_user=end_user)
        list(messages.select_for_update(of=("self",)).values_list("pk", flat=True))
        batches = Batch.objects.for_tenant(tenant).filter(session__end_user=end_user)
        batch_ids = [str(pk) for pk in batches.select_for_update(of=("self",)).values_list("pk", flat=True)]

        counts: Counter[str] = Counter()
        counts.update(_erase_jobs(tenant, session_ids, batch_ids))
        counts.update(_erase_admin_log(tenant, end_user))
        # Audit events name their memory by id only: any event of the end user's memories goes, whichever end
        # user it names (the cascade below takes those that name this one).
        memory_ids = MemoryUnit.objects.for_tenant(tenant).filter(end_user=end_user).values("pk")
        events = MemoryEvent.objects.for_tenant(tenant).filter(memory_id__in=memory_ids)
        counts[MemoryEvent._meta.db_table] += events.delete()[0]
        # Everything with a foreign key to the end user, their sessions or messages goes with the end user's
        # row through Django's cascade (the related rows' own managers, inside this tenant's RLS scope), which
        # also takes rows of models added later. It reads the rows' primary keys only.
        _, deleted = EndUser.objects.for_tenant(tenant).filter(pk=end_user.pk).delete()
        for label, count in deleted.items():
            counts[apps.get_model(label)._meta.db_table] += count
        erasure = Erasure.objects.create(
            tenant=tenant,
            end_user_digest=end_user_digest(tenant, external_id),
            actor=actor,
            actor_user=actor_user if actor_user is not None and actor_user.is_authenticated else None,
            counts={table: count for table, count in sorted(counts.items()) if count},
        )
    return erasure


def _erase_jobs(tenant: Tenant, session_ids: list[str], batch_ids: list[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    if not session_ids:
        return counts
    params = {
        "tenant": str(tenant.pk), "run_batch": RUN_BATCH, "batches": batch_ids, "index_turn": INDEX_TURN,
        "sessions": session_ids,
    }  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(_DELETE_JOB_EVENTS_SQL, params)
        counts["procrastinate_events"] = cursor.rowcount
        cursor.execute(_DELETE_JOBS_SQL, params)
        counts["procrastinate_jobs"] = cursor.rowcount
    return counts


def _erase_admin_log(tenant: Tenant, end_user: EndUser) -> Counter[str]:
    """The admin's change log (``django_admin_log``: no tenant, no foreign key) names a row by its content type
    and ``object_id``, and keeps its text as ``object_repr`` (an end user's is their id)."""
    counts: Counter[str] = Counter()
    for model, owned in _owned(end_user).items():
        ids = model.objects.for_tenant(tenant).filter(owned).annotate(_id=Cast("pk", TextField())).values("_id")
        entries = LogEntry.objects.filter(content_type=ContentType.objects.get_for_model(model), object_id__in=ids)
        counts[LogEntry._meta.db_table] += entries.delete()[0]
    return counts
