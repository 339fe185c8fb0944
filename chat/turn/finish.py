"""A turn's last step: the reply is stored (``finish_turn``), with what follows from it.

Under the session's lock, in one transaction: the reply's INSERT with the session's UPDATE and the
``used`` feedback of the recalled memories whose value appears in the reply, in one statement; the turn's
messages announced to the background writer of conversation memory (``memory.conversation.writer``); where the
tenant turns it on (``auto_ignore``), the ``ignored`` feedback of the memories the prompt showed and the
reply did not use (S5: 「每次被忽略或导致错误后 -0.3」); the amnesia check (S8: the third empty recall in a
row with a reply that admits forgetting fires one alert per streak); the facts the agent stated, extracted
as memories. A cancelled turn stores its partial reply here too (``status=partial``), without extraction
and without ``ignored`` feedback.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from django.conf import settings
from django.utils import timezone

from chat import metrics as chat_metrics
from chat.prompt.prepared import PreparedTurn
from chat.sessions.messages import insert_message, session_locked
from chat.turn import knowledge as knowledge_mod
from config.db.sql import fetch_row
from conversations.access import require_session_id
from conversations.models import ChatSession, Message
from knowledge import KnowledgeHit, record_citations, record_gap
from memory import metrics
from memory.conversation import announce, squash
from memory.extraction import extract_and_store
from memory.models import AmnesiaAlert, MemoryUnit
from memory.store import amnesia_phrase, apply_feedback, feedback_sql
from tenants.models import Tenant

logger = logging.getLogger(__name__)

#: Whether ``ignored`` feedback is automatic for a tenant that does not set ``auto_ignore`` (see
#: docs/memory.md, "Feedback", for the measurement behind the default).
AUTO_IGNORE_DEFAULT = False

# What finish_turn reads under the session's lock, and what it writes back.
_REPLY_CHECKS = """
SELECT empty_recall_streak, amnesia_alerted,
       (SELECT max(seq) FROM chat_message WHERE tenant_id = %(tenant)s AND session_id = %(session)s) AS last_seq
FROM chat_chatsession WHERE tenant_id = %(tenant)s AND id = %(session)s
"""
_FINISH_SESSION = """
UPDATE chat_chatsession
SET last_activity_at = %(now)s, context_reset_pending = false,
    empty_recall_streak = %(streak)s, amnesia_alerted = %(alerted)s
WHERE tenant_id = %(tenant)s AND id = %(session)s
"""


#: ``data`` entries that describe a conversation unit rather than state a value (its source, the speaker,
#: "is a question"): "user" or "True" in a reply says nothing about the memory.
_BOOKKEEPING = frozenset({"source", "role", "question", "facts"})


def _memory_values(memory: MemoryUnit) -> list[str]:
    """The values whose appearance in a reply means the memory was used: its structured values (a
    conversation unit's are the facts it states), else the distinctive tokens of its content (codes, numbers)."""
    data = memory.data or {}
    pool = [v for k, v in data.items() if k not in _BOOKKEEPING]
    if isinstance(data.get("facts"), dict):
        pool += list(data["facts"].values())
    values = [str(v) for v in pool if isinstance(v, str | int | float) and not isinstance(v, bool) and str(v).strip()]
    return values or re.findall(r"[A-Za-z]*\d[\w-]{2,}|[A-Z][A-Z0-9-]{3,}", memory.content)


def _used_memories(reply: str, memories: list[MemoryUnit]) -> list[MemoryUnit]:
    """A recalled memory counts as used when one of its values (``_memory_values``) shows up in the reply,
    compared as ``squash`` writes both (「139 1702 4486」 is 「13917024486」)."""
    squashed = squash(reply)
    return [m for m in memories if any(len(v) >= 2 and squash(v) in squashed for v in _memory_values(m))]


def auto_ignore(tenant: Tenant) -> bool:
    """The tenant's ``auto_ignore`` setting (a JSON boolean; default ``AUTO_IGNORE_DEFAULT``): whether a memory
    shown in the prompt and not used by the reply is scored ``ignored`` (−0.3). Anything but a boolean falls
    back to the default rather than failing a turn."""
    raw = tenant.settings.get("auto_ignore") if isinstance(tenant.settings, dict) else None
    return raw if isinstance(raw, bool) else AUTO_IGNORE_DEFAULT


def _shown(prepared: PreparedTurn, recalled: list[MemoryUnit]) -> list[MemoryUnit]:
    """The recalled memories the prompt still carried: one cut to fit the budget (``memories[i]`` in
    ``trimmed``) was never in front of the model, so it cannot have been ignored."""
    cut = {int(t[len("memories[") : -1]) for t in prepared.prompt.trimmed if t.startswith("memories[")}
    return [m for i, m in enumerate(recalled) if i not in cut]


@require_session_id
def finish_turn(
    tenant: Tenant,
    session: ChatSession,
    message: Message,
    reply_id: str,
    text: str,
    prepared: PreparedTurn,
    usage: dict[str, int],
    *,
    status: str = Message.Status.COMPLETE,
) -> Message:
    """Step 4 of ``chat.turn.run`` (DESIGN.md's step 6): store the reply, extract what the agent stated, feedback."""

    with session_locked(tenant, session):
        ids = {"tenant": tenant.pk, "session": session.pk}
        current = fetch_row(_REPLY_CHECKS, ids)  # after the lock, in a statement of its own (see store_user_message)
        assert current is not None  # the row is locked
        recalled = prepared.recalled_memories
        if recalled is None:  # a PreparedTurn made by hand
            recalled = list(MemoryUnit.objects.for_tenant(tenant).filter(pk__in=prepared.recalled))
        used = _used_memories(text, recalled)
        cited = _cited(tenant, text, prepared)
        reply = Message(
            id=uuid.UUID(reply_id), tenant=tenant, session=session, role=Message.Role.ASSISTANT, text=text,
            reply_to=message, status=status, seq=(current["last_seq"] or 0) + 1, created_at=timezone.now(),
            data={
                "recalled": prepared.recalled, "used": [str(m.pk) for m in used],
                "needs_confirmation": prepared.needs_confirmation, "usage": usage,
                "recall_empty": prepared.recall_empty, "trimmed": prepared.prompt.trimmed,
                "citations": [hit.citation() for _, hit in cited],
                **({"offer_handoff": True} if prepared.offer_handoff else {}),
            },
        )  # fmt: skip
        streak, phrase = _amnesia_check(reply.text, prepared.recall_empty, current)
        alerted = phrase is not None or (streak > 0 and current["amnesia_alerted"])  # one alert per streak
        # The used memories' feedback goes in the same statement; a memory deleted since it was recalled is skipped.
        feedback = feedback_sql(tenant, [m.pk for m in used], "used", note=f"value appears in reply {reply.pk}")
        finish = {**ids, "now": reply.created_at, "streak": streak, "alerted": alerted}
        insert_message(reply, _FINISH_SESSION, finish, feedback)
        if settings.MEMORY_WRITER == "worker":
            # The turn's conversation units are the background writer's: announced here, heard when this
            # transaction commits (memory.conversation.writer); unheard, the messages stay unmarked for the worker's
            # sweep.
            announce(tenant, session.pk, [message.pk, reply.pk])
        if status == Message.Status.COMPLETE and text and auto_ignore(tenant):
            # Same transaction, after the reply's statement; a partial reply was cut short, so what it left
            # out says nothing. Bounded like every score rule (min 0.1, memory.store.feedback).
            used_ids = {m.pk for m in used}
            ignored = [m.pk for m in _shown(prepared, recalled) if m.pk not in used_ids]
            apply_feedback(tenant, ignored, "ignored", note=f"not used by reply {reply.pk}")
        if phrase:
            _amnesia_alert(tenant, session, reply, phrase)
        record_citations(tenant, reply.pk, cited)
        if prepared.content_gap is not None:
            record_gap(tenant, message.pk, message.text, prepared.content_gap)
            chat_metrics.KNOWLEDGE_CONTENT_GAPS.labels(tenant=tenant.slug).inc()
            if prepared.fixed_reply is not None:
                chat_metrics.KNOWLEDGE_GROUNDED_REPLIES.labels(tenant=tenant.slug).inc()
        if status == Message.Status.COMPLETE and text:
            extract_and_store(tenant, session, reply, previous_text=message.text)
    return reply


def _cited(tenant: Tenant, text: str, prepared: PreparedTurn) -> list[tuple[str, KnowledgeHit]]:
    """The passages the reply cites that its final prompt carried; the labels it invents are counted, not kept."""
    if not prepared.knowledge and "K" not in text.upper():
        return []
    carried = knowledge_mod.shown(prepared.knowledge, prepared.prompt.trimmed)
    cited, invented = knowledge_mod.citations(text, carried)
    if invented:
        logger.info("reply cited labels its prompt did not carry: %s", invented)
    knowledge_mod.count_citations(tenant, len(cited), len(invented))
    return cited


def _amnesia_check(reply_text: str, recall_empty: bool, current: dict[str, Any]) -> tuple[int, str | None]:
    """Seed S8: the third consecutive turn where neither recall stage found
    anything, with a reply that admits forgetting, fires one alert (and only
    one per streak). ``current`` holds the session's ``empty_recall_streak``
    and ``amnesia_alerted``, read under its lock. Returns the new streak and
    the phrase that fires the alert (None: no alert this turn)."""
    if not recall_empty:
        return 0, None
    streak = current["empty_recall_streak"] + 1
    phrase = amnesia_phrase(reply_text) if streak >= 3 and not current["amnesia_alerted"] else None
    return streak, phrase or None


def _amnesia_alert(tenant: Tenant, session: ChatSession, reply: Message, phrase: str) -> None:
    AmnesiaAlert.objects.create(tenant=tenant, session=session, message=reply, phrase=phrase)
    metrics.AMNESIA_ALERTS.labels(tenant=tenant.slug).inc()
    logger.warning("amnesia alert in session %s (tenant %s): %r", session.pk, tenant.slug, phrase)
