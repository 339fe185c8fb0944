"""From chat text to memories: runs after every message, the user's and the
agent's (an issued coupon or a tracking number the agent states is a memory
too), and stores typed, keyed, compressed facts through ``memory.store.write``.

The pure parts live elsewhere: ``memory.extraction.rules`` finds the facts,
``memory.text.compression`` keeps their content within 150 characters,
``memory.text.redaction`` removes secrets, ``memory.topics.detect`` spots a topic switch and ``memory.topics.freeze``
freezes the old topic (or brings a frozen one back).
This module only decides what to write and writes it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from conversations.access import require_session_id
from conversations.models import ChatSession, Message
from memory.extraction.model import StructuredAsk, extract_facts_with_model
from memory.extraction.rules import Fact, disowned_keys, extract_facts, is_confirmation
from memory.store import audit, lifecycle
from memory.store import read as fetch
from memory.store import write as store
from memory.store.consent import memory_enabled_for_session
from memory.text.compression import compress
from memory.text.redaction import redact, redact_obj
from memory.topics.detect import TopicSwitch
from memory.topics.freeze import observe_user_message
from tenants.models import Tenant
from tenants.rls import tenant_scope

logger = logging.getLogger(__name__)


@dataclass
class ExtractionResult:
    facts: list[Fact] = field(default_factory=list)
    written: list[store.WriteResult] = field(default_factory=list)
    changed_keys: list[str] = field(default_factory=list)
    confirmation: bool = False
    #: The switch this message made (a new topic, or a return to a frozen one), for the runtime's tool context.
    topic_switch: TopicSwitch | None = None
    #: The contents of the keyed memories the user said are not theirs (expired this turn).
    forgotten: list[str] = field(default_factory=list)


def _previous_text(tenant: Tenant, session: ChatSession, message: Message) -> str:
    if not message.seq:
        return ""
    with tenant_scope(tenant):
        previous = (
            Message.objects.for_tenant(tenant)
            .filter(session=session, seq__lt=message.seq)
            .order_by("-seq")
            .values_list("text", flat=True)
            .first()
        )
    return previous or ""


@require_session_id
def extract_and_store(
    tenant: Tenant,
    session: ChatSession,
    message: Message,
    *,
    previous_text: str | None = None,
    ask_model: StructuredAsk | None = None,
) -> ExtractionResult:
    """Extract facts from ``message`` and upsert them as memories of this
    session's end user (or of the session, for session-scoped types).
    ``previous_text`` is the message before it, when the caller already has
    it (the chat runtime does); otherwise it is read when facts need it.
    ``ask_model``: the model, for the tenants that have model extraction on
    (memory/extraction/model.py); without it only the rules extract.
    A message of an imported conversation (``memory.store.write.said_at_of``) is taken as of when it was said:
    its facts are stored as of then, so a value given since stays current, and "that's not mine" expires only
    values stored by then."""
    result = ExtractionResult()
    said_at = store.said_at_of(message)
    text = message.text or ""
    role = message.role
    if role == Message.Role.USER:
        result.confirmation = is_confirmation(text)
        result.topic_switch = observe_user_message(tenant, session, text, previous_text=previous_text or "")
        disowned = disowned_keys(text)
        if disowned:
            result.forgotten = do_disown(tenant, session, disowned, message, said_at=said_at)
    if not memory_enabled_for_session(tenant, session):
        return result  # memory is off for this end user (memory.store.consent): nothing new is remembered
    try:
        facts = extract_facts(text, role=role, now=message.created_at)  # content in the message's own language
    except Exception:  # an extractor bug must not lose the turn; it is logged and fixed
        logger.exception("fact extraction failed for message %s", message.pk)
        facts = []
    # Optional, off by default: the model fills keys the rules left empty; never raises (memory/extraction/model.py).
    facts = [*facts, *extract_facts_with_model(tenant, session, message, facts, ask_model)]
    result.facts = facts
    actor = audit.END_USER if role == Message.Role.USER else audit.SYSTEM
    kept: list[Fact] = []
    items: list[store.MemoryItem] = []
    for fact in facts:
        content = compress(redact(fact.content), limit=150)
        if not content:
            continue
        kept.append(fact)
        items.append(
            store.MemoryItem(
                type=fact.type, key=fact.key, content=content, data=redact_obj(fact.data), expires_in=fact.expires_in
            )
        )
    # One batch: one embedding call and one transaction for the message's facts, indexed with the
    # conversation they came from (the message before this one, usually the agent's question, and this one).
    if items and previous_text is None:
        previous_text = _previous_text(tenant, session, message)
    written = store.write_memories(
        tenant, session, items, source_message=message, source_role=role, actor=actor,
        context=f"{previous_text}\n{text}" if items else "", now=said_at,
    )  # fmt: skip
    for fact, outcome in zip(kept, written, strict=True):
        result.written.append(outcome)
        if outcome.outcome == "replaced":
            result.changed_keys.append(fact.key)
        if fact.key == "current_topic" and session.topic != fact.value[:200]:  # most turns stay on the topic
            ChatSession.objects.for_tenant(tenant).filter(pk=session.pk).update(topic=fact.value[:200])
            session.topic = fact.value[:200]
    return result


@require_session_id
def do_disown(
    tenant: Tenant, session: ChatSession, keys: list[str], message: Message, *, said_at: datetime | None = None
) -> list[str]:
    """The user says the stored value of ``keys`` is not theirs (「这不是我的电话」, "that's not my number"):
    expire those live memories, with an ``end_user`` event naming the message. Returns their contents, for
    the reply to acknowledge. A wrong keyed fact is worse than none: it anchors every later prompt.
    ``said_at`` (an imported message): only the values valid then are the ones the user meant."""
    now = said_at or timezone.now()
    with tenant_scope(tenant):
        live = list(
            fetch.visible_memories(tenant, session)
            .filter(fetch.valid_q(now), key__in=keys, superseded_at__isnull=True)
            .order_by("created_at")
        )
        for memory in live:
            lifecycle.do_expire_memory(
                tenant, memory, actor=audit.END_USER, note=f"the user said it is not theirs (message {message.pk})"
            )
    return [memory.content for memory in live]
