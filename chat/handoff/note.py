"""The handoff note: what a staff member reads before answering, at the top of the console.

:func:`handoff_note` puts together, for one session:

- **why**: the trigger and the reason of the handoff, when and the queue position;
- **the anchor**: the end user's name, phone, e-mail, order, address and current topic (``chat.turn.prepare``'s
  ``ANCHOR_KEYS``), personal values masked as the prompt shows them (``memory.text.masking``: 「138****1234」);
- **the summary channel** the AI's prompt carries (``chat.prompt.summary``), a staff member's replies counted as the
  agent's;
- **what recall finds** for the end user's last message (``memory.recall.pipeline``, not counted as recalled), each
  with its score and stage;
- **open tool calls**: the execution context's current call and last answer (``chat.tools.context``), masked, and
  the session's batches still queued or running;
- **the conversation**: its last messages (tool audit rows aside), as the end user wrote them.

Showing it is a staff read of the end user's data, recorded (``conversations.staff_access``).
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from chat.handoff import state as handoff
from chat.models import Batch
from chat.prompt.build import ANCHOR_KEYS, RECALL_K, SUMMARY_MESSAGES
from chat.prompt.summary import summarize
from chat.sessions.messages import serialize_message
from chat.tools.context import execution_context
from conversations.access import require_session_id
from conversations.models import ChatSession, Message
from conversations.staff_access import StaffRead, What, record_staff_access
from memory.recall import recall
from memory.store import anchor_facts
from memory.text import mask_obj, mask_text, redact
from tenants.models import Tenant
from tenants.rls import tenant_scope


def _anchor(tenant: Tenant, session: ChatSession, now: Any) -> list[dict[str, str]]:
    """The prompt's anchor, read as the turn reads it (``memory.store.anchor_facts``), masked as it shows it."""
    return [
        {"key": key, "content": mask_text(content)}
        for key, content in anchor_facts(tenant, session, ANCHOR_KEYS, as_of=now)
    ]


def _recalled(tenant: Tenant, session: ChatSession, query: str) -> list[dict[str, Any]]:
    if not query:
        return []
    result = recall(tenant, session, query, k=RECALL_K, record=False)
    return [
        {
            "id": str(hit.memory.pk), "type": hit.memory.type, "key": hit.memory.key,
            "content": mask_text(hit.memory.content), "stage": hit.stage,
            "score": round(hit.score, 3), "similarity": round(hit.similarity, 3),
        }
        for hit in result.hits
    ]  # fmt: skip


@require_session_id
def handoff_note(tenant: Tenant, session: ChatSession, *, reader: Any = None) -> dict[str, Any]:
    """The note of ``session`` (see the module docstring); ``reader``, the staff member it is shown to, is
    recorded as having read the conversation."""
    now = timezone.now()
    with tenant_scope(tenant):
        fresh = (
            ChatSession.objects.for_tenant(tenant)
            .select_related("tenant", "end_user", "assigned_to")
            .get(pk=session.pk)
        )
        history = list(
            Message.objects.for_tenant(tenant)
            .filter(session=fresh)
            .exclude(role=Message.Role.TOOL)
            .select_related("author")
            .order_by("-seq")[:SUMMARY_MESSAGES]
        )[::-1]
        turns = [
            ("assistant" if m.role == Message.Role.STAFF else m.role, redact(m.text))
            for m in history
            if m.status != Message.Status.FAILED
        ]
        last_user = next((m.text for m in reversed(history) if m.role == Message.Role.USER), "")
        context = execution_context(tenant, fresh)
        batches = Batch.objects.for_tenant(tenant).filter(
            session=fresh, status__in=[Batch.Status.QUEUED, Batch.Status.RUNNING]
        )
        note = {
            **handoff.queue_row(fresh, handoff.queue_position(tenant, fresh, now)),
            "anchor": _anchor(tenant, fresh, now),
            "summary": summarize(turns, language=tenant.language) if turns else "",
            "recalled": _recalled(tenant, fresh, last_user),
            "tool_calls": {
                "current_tool": context.current_tool,
                "tool_args": mask_obj(context.tool_args),
                "last_tool_result": mask_obj(context.last_tool_result),
                "batches": [
                    {
                        "task_id": str(b.pk),
                        "tool": b.tool_name,
                        "status": b.status,
                        "completed": b.completed,
                        "failed": b.failed,
                        "total": b.total,
                    }
                    for b in batches
                ],  # fmt: skip
            },
            "messages": [
                {**serialize_message(m), "author": m.author.get_username() if m.author else None} for m in history
            ],
        }
        if reader is not None:
            record_staff_access(
                reader, [StaffRead(tenant.pk, fresh.end_user_id, What.CONVERSATION, fresh.pk)], path="/ws/staff/"
            )
    return note
