"""The background job of an import (``chat.tasks``, queue ``imports``): an imported conversation's messages
turned into memory exactly as live turns are — each message's facts extracted and stored
(``memory.extraction.extract_and_store``), then its conversation units (``memory.conversation.index_messages``)
— but each at its own time (``said_at``): dates in words are resolved against when they were said, validity
runs from then, and a value said before the one stored now is kept as history, never made current.

Messages go in order, a chunk at a time: each message's facts are stored as a live turn stores them (each
store in a transaction of its own, its keys locked in one global order), then the chunk's units in one
transaction, then how far the job got (``ImportedConversation.done_seq``). No transaction holds one store's
locks while taking another's: two imports of one customer (or an import and a live turn) never deadlock. A
job stopped or failed half-way resumes after the last chunk recorded; a chunk's facts stored again on
resume only refresh what is stored, and its units are written once (each message's own mark).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from django.utils import timezone

from conversations.models import ChatSession, ImportedConversation, Message
from memory.conversation import index_messages
from memory.extraction import extract_and_store
from tenants.models import Tenant
from tenants.rls import tenant_scope

logger = logging.getLogger(__name__)

#: Messages written per transaction; between chunks the job yields the CPU for ``PAUSE_S`` (imports share
#: the worker's cores with the writer of live turns' memory, and must not starve it).
CHUNK = 20
PAUSE_S = 0.01


def run_import(tenant_id: str, imported_id: int, *, should_stop: Callable[[], bool] = lambda: False) -> str:
    """Index the import's messages after ``done_seq``; returns its status (``done``, ``failed``, or
    ``indexing`` when ``should_stop`` asked it to stop between chunks)."""
    tenant = Tenant.objects.get(pk=tenant_id)
    with tenant_scope(tenant):
        imported = ImportedConversation.objects.for_tenant(tenant).filter(pk=imported_id).first()
        if imported is None:  # erased meanwhile (the end user, the session)
            return "gone"
        session = ChatSession.objects.for_tenant(tenant).get(pk=imported.session_id)
        _set(tenant, imported, ImportedConversation.Status.INDEXING)
        messages = list(Message.objects.for_tenant(tenant).filter(session=session).order_by("seq"))
    previous = next((m.text for m in reversed(messages) if m.seq <= imported.done_seq), "")
    pending = [m for m in messages if m.seq > imported.done_seq]
    try:
        for start in range(0, len(pending), CHUNK):
            if should_stop():
                return ImportedConversation.Status.INDEXING
            chunk = pending[start : start + CHUNK]
            before = previous
            for message in chunk:
                extract_and_store(tenant, session, message, previous_text=before)
                before = message.text
            index_messages(tenant, session, chunk, previous_text=previous)
            imported.done_seq = chunk[-1].seq
            with tenant_scope(tenant):
                ImportedConversation.objects.for_tenant(tenant).filter(pk=imported.pk).update(
                    done_seq=imported.done_seq, updated_at=timezone.now()
                )
            previous = chunk[-1].text
            time.sleep(PAUSE_S)
    except Exception as exc:
        logger.exception("import %s of tenant %s failed at seq %s", imported.pk, tenant.pk, imported.done_seq + 1)
        with tenant_scope(tenant):
            _set(tenant, imported, ImportedConversation.Status.FAILED, error=f"{type(exc).__name__}: {exc}"[:300])
        raise
    with tenant_scope(tenant):
        _set(tenant, imported, ImportedConversation.Status.DONE)
    return ImportedConversation.Status.DONE


#: The CPU niceness of the thread an import runs on: the lowest priority, so that on a host shared with the
#: web workers (or the worker's own writer of live turns' memory) an import only takes the CPU they leave.
IMPORT_NICENESS = 19


def run_import_at_low_priority(tenant_id: str, imported_id: int, *, should_stop: Callable[[], bool]) -> str:
    """:func:`run_import` on a thread of its own at :data:`IMPORT_NICENESS` (Linux sets niceness per thread; a
    raised niceness cannot be lowered again without privilege, so the job's pooled thread is never the one
    lowered). The import's error, if any, is raised here."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), IMPORT_NICENESS)
        except (AttributeError, OSError):  # not Linux, or not allowed: run at the worker's own priority
            pass
        try:
            outcome["status"] = run_import(tenant_id, imported_id, should_stop=should_stop)
        except BaseException as exc:  # handed to the job's own thread, which reports and retries it
            outcome["error"] = exc
        finally:
            from django.db import connections

            connections.close_all()

    thread = threading.Thread(target=run, name=f"import-{imported_id}")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["status"]


def _set(tenant: Tenant, imported: ImportedConversation, status: str, *, error: str = "") -> None:
    imported.status = status
    imported.error = error
    ImportedConversation.objects.for_tenant(tenant).filter(pk=imported.pk).update(
        status=status, error=error, updated_at=timezone.now()
    )
