"""Staff reads of an end user's data are recorded: who opened which conversation or memories, when, where.

:func:`record_staff_access` writes the ``StaffAccess`` rows; :class:`AuditedReadsAdmin` calls it from the
admin pages that show an end user's data (a session with its messages, memories, memory events), and
``chat.pages.live_sessions`` from the staff live view. Owners list the rows in the admin
(``conversations.admin``).

What one request writes: **one row per (staff member, end user's data) it showed**, never one per row of a
list. A change page (or a delete confirmation) shows one object: one row, naming its end user (and session).
A changelist, whatever its filters, writes one row per end user whose rows are on the page shown (the
session left empty): a list of memories shows their content, and a list of sessions or events tells who
talked to the tenant and when, so an unfiltered list is a read like a filtered one. A page holds at most
``list_max_show_all`` rows (200 by default), which bounds the rows one request writes;
:data:`MAX_READS_PER_REQUEST` is the same bound again, for a page made longer by mistake.

The rows are written in the request's transaction, in the tenant's own RLS scope: the page and its audit
commit together, or neither does. Reads are recorded, not refused: who may see what is the admin's
``TenantScopedAdmin``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Any

from django.http import HttpRequest
from django.utils import timezone

from conversations.models import StaffAccess
from tenants.rls import tenant_scope

What = StaffAccess.What

#: The most rows one request writes (see the module docstring: Django's ``list_max_show_all``).
MAX_READS_PER_REQUEST = 200


@dataclass(frozen=True)
class StaffRead:
    """One end user's data shown to a staff member: which tenant, which end user, what, which session."""

    tenant_id: Any
    end_user_id: Any
    what: str
    session_id: Any = None


def record_staff_access(user: Any, reads: Iterable[StaffRead], *, path: str = "") -> list[StaffAccess]:
    """Write one ``StaffAccess`` row for each distinct read in ``reads`` (at most
    :data:`MAX_READS_PER_REQUEST`), by ``user`` at ``path``; returns the rows written. Each tenant's rows are
    written in that tenant's RLS scope, inside the caller's transaction."""
    unique = list(islice(dict.fromkeys(reads), MAX_READS_PER_REQUEST))
    now = timezone.now()
    rows = [
        StaffAccess(
            tenant_id=read.tenant_id, end_user_id=read.end_user_id, session_id=read.session_id, user=user,
            what=read.what, path=path[:300], created_at=now,
        )
        for read in unique
    ]  # fmt: skip
    for tenant_id in dict.fromkeys(row.tenant_id for row in rows):
        with tenant_scope(tenant_id):
            StaffAccess.objects.bulk_create([row for row in rows if row.tenant_id == tenant_id])
    return rows


def record_request_reads(request: HttpRequest, reads: Iterable[StaffRead]) -> list[StaffAccess]:
    """:func:`record_staff_access` for the request's user and path (without the query string, which may hold
    a search for a phone number), skipping what this request has recorded already."""
    seen: set[StaffRead] = request.__dict__.setdefault("_staff_reads_recorded", set())
    fresh = [read for read in dict.fromkeys(reads) if read not in seen]
    seen.update(fresh)
    if not fresh:
        return []
    return record_staff_access(request.user, fresh, path=request.path)


class AuditedReadsAdmin:
    """Mixin for a ``ModelAdmin`` whose pages show an end user's data: its change page, its delete
    confirmation and its changelist record what they showed (:func:`record_request_reads`) once the page is
    built. A page refused (no permission, no such object) or a form posted and redirected records nothing;
    the GET that showed the form did.

    Override point: :meth:`staff_read`, one object's read; the changelist reads the page's objects with it and
    keeps one per end user."""

    #: ``StaffAccess.What`` of the change page and of the changelist.
    read_what: str = What.CONVERSATION
    list_read_what: str = What.CONVERSATION

    def staff_read(self, obj: Any, what: str) -> StaffRead:
        return StaffRead(obj.tenant_id, obj.end_user_id, what, getattr(obj, "session_id", None))

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None) -> Any:
        response = super().change_view(request, object_id, form_url, extra_context)  # type: ignore[misc]
        original = (getattr(response, "context_data", None) or {}).get("original")
        if original is not None:
            record_request_reads(request, [self.staff_read(original, self.read_what)])
        return response

    def delete_view(self, request: HttpRequest, object_id: str, extra_context: Any = None) -> Any:
        # The confirmation lists what would go with the object by name: a session's messages by their text.
        response = super().delete_view(request, object_id, extra_context)  # type: ignore[misc]
        shown = (getattr(response, "context_data", None) or {}).get("object")
        if shown is not None:
            record_request_reads(request, [self.staff_read(shown, self.read_what)])
        return response

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        response = super().changelist_view(request, extra_context)  # type: ignore[misc]
        changelist = (getattr(response, "context_data", None) or {}).get("cl")
        if changelist is not None:
            # Iterating the page's queryset fills its cache, which the template then renders: no extra query.
            reads = (self.staff_read(obj, self.list_read_what) for obj in changelist.result_list)
            record_request_reads(request, [StaffRead(r.tenant_id, r.end_user_id, r.what) for r in reads])
        return response
