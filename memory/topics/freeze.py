"""A session's topics: the one it is on, the ones it left frozen, and the switch and return between them (S10).

The seed: 「只冻结订单相关记忆，同时激活推荐模块的上下文」 and 「回到刚才账单的问题」. A switch does not delete the
old topic's working memory; it freezes it, and a return brings it back.

Storage, two parts:

* **The memories.** A frozen ``session_state`` memory stays in the store, valid and unexpired, with
  ``data["frozen_topic"]`` naming its frozen topic. Recall and the anchor never see it (``memory.store.read.SCOPE_SQL``
  leaves it out). A keyed one also leaves its key's slot — ``key`` moves to ``data["frozen_key"]`` — so the new
  topic's ``current_topic`` is a memory of its own and does not replace the frozen one. Each freeze and thaw is
  an ``edit`` event. A frozen memory still expires with its TTL (a day, the session's).
* **The record**, ``ChatSession.topic_state`` (JSON)::

      {"model": "<embedding model>", "vectors": ["<first message>", "<latest message>"],
       "domains": ["billing"], "likely": ["billing"],
       "pending": {"vector": "…", "text": "…", "domain": "network" | null, "reason": "…"},
       "frozen": [{"id": "3f2a9c1e", "topic": "账单", "model": "…", "vectors": ["…", "…"], "domains": […],
                   "likely": […], "frozen_at": "2026-…", "memories": 3, "tool_context": {…} | null}]}

  ``vectors`` are the current topic's (unit vectors of its first and latest user message, for the distance check,
  each packed as base64 float16 by ``memory.topics.detect.pack_vector``; records with lists of numbers, written
  before, are read too); ``domains`` the domains its messages were found to be about (``memory.topics.domains``) and
  ``likely`` each vote's winner even when too weak to count; ``pending`` a message far from the topic with no domain
  evidence, waiting for the next message to confirm the switch (absent otherwise); ``frozen`` the topics left,
  newest last, at most ``MAX_FROZEN``. ``tool_context`` is the
  execution context's tool call at the moment of the switch, handed in by the chat runtime
  (:func:`attach_tool_context`): memory never imports chat.

One user message costs one embedding (none for a brief follow-up) and one UPDATE of the record.
A chat turn runs under the session's lock, so two messages of one session never race on the record.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from django.utils import timezone

from conversations.access import require_session_id
from conversations.models import ChatSession
from memory.embeddings import models as embeddings
from memory.models import MemoryType, MemoryUnit
from memory.store import audit
from memory.store import read as fetch
from memory.store.audit import Kind, record_event, snapshot
from memory.topics.detect import (
    RETURN_THRESHOLD,
    TopicSwitch,
    asks_a_question,
    confirms_switch,
    detect_topic_return,
    detect_topic_switch,
    judge_message,
    model_reads,
    new_topic_of,
    pack_vector,
    shift_applies,
    topic_similarity,
)
from memory.topics.domains import classify, named_domains
from tenants.models import Tenant
from tenants.rls import tenant_scope

__all__ = ["MAX_FROZEN", "attach_tool_context", "do_topic_switch", "observe_user_message"]

#: Frozen topics a session keeps; the oldest record goes first (its memories stay frozen until their TTL).
MAX_FROZEN = 5
FROZEN_TOPIC = "frozen_topic"
FROZEN_KEY = "frozen_key"


def _frozen_topics(session: ChatSession) -> list[dict[str, Any]]:
    return list((session.topic_state or {}).get("frozen") or [])


def _pick_frozen(
    frozen: list[dict[str, Any]], named: str | None, vector: Any, model: str
) -> tuple[dict[str, Any] | None, float]:
    """The frozen topic a message returns to: for an explicit return, the one its words name (or the newest when
    it names none); otherwise the one its vector is closest to. With the similarity (``1.0`` for words)."""
    if named is not None:
        words = named.lower()
        for record in reversed(frozen):
            topic = str(record.get("topic") or "").lower()
            if not words or (topic and (words in topic or topic in words)):
                return record, 1.0
    best: tuple[dict[str, Any] | None, float] = (None, -1.0)
    if vector is None:
        return best
    for record in frozen:
        if record.get("model") == model and record.get("vectors"):
            similarity = topic_similarity(vector, record["vectors"])
            if similarity > best[1]:
                best = (record, similarity)
    return best


@require_session_id
def observe_user_message(
    tenant: Tenant, session: ChatSession, text: str, *, previous_text: str = ""
) -> TopicSwitch | None:
    """Decide whether the user's message ``text`` switches topic, returns to a frozen one, or stays; apply it
    (freeze, thaw, the record, ``context_reset_pending``) and return the switch, ``None`` when it stays.
    ``previous_text`` is the agent's message before it (an answer to its question stays on the topic).

    Evidence, strongest first (``memory.topics.detect``): an explicit switch or return; a message whose domain
    differs from the topic's (``memory.topics.domains``); and, without domain evidence, distance from the topic,
    which only marks the message as a possible switch (``pending``) — the next message confirms it or clears it."""
    state = dict(session.topic_state or {})
    model = embeddings.model_for(tenant, MemoryType.SESSION_STATE)
    current = state.get("vectors") if state.get("model") == model else None
    topic_domains = list(state.get("domains") or []) if current else []
    topic_likely = list(state.get("likely") or []) if current else []
    pending = state.pop("pending", None) if current else None
    # A topic's first message is embedded even when short; later, a follow-up costs no embedding.
    embed = model_reads(text, model) and (not current or shift_applies(text, model))
    vector = embeddings.embed_one(text, model=model, kind="query") if embed else None
    guess = classify(vector, model) if vector is not None else None
    domain, likely = (guess.domain, guess.likely) if guess else (None, None)
    frozen = _frozen_topics(session)
    switch = detect_topic_switch(text, previous_topic=session.topic or None)
    named = detect_topic_return(text)
    if switch is None and named is not None and frozen:
        record, _ = _pick_frozen(frozen, named, vector, model)
        if record is not None:
            switch = TopicSwitch(record.get("topic", ""), f"return to {record.get('topic')!r}", "return", record["id"])
    vectors = [pack_vector(vector)] if vector is not None else []
    if switch is None and vector is not None and current:
        similarity = topic_similarity(vector, current)
        if pending and confirms_switch(
            domain=domain, pending_domain=pending.get("domain"), topic_domains=topic_domains,
            similarity_old=similarity, similarity_pending=topic_similarity(vector, [pending["vector"]]), model=model,
        ):  # fmt: skip
            switch = TopicSwitch(
                new_topic_of(str(pending.get("text") or text)),
                f"confirmed by a second message: {pending.get('reason', '')}",
                kind="shift",
            )
            vectors = [pending["vector"], *vectors]
            domain = domain or pending.get("domain")
        else:
            verdict = judge_message(
                text, similarity=similarity, model=model, domain=domain, topic_domains=topic_domains,
                named=sorted(named_domains(text)), frozen_domains=[d for r in frozen for d in r.get("domains") or []],
                topic_likely=topic_likely, after_question=asks_a_question(previous_text),
            )  # fmt: skip
            was = f" from {session.topic!r}" if session.topic else ""
            if verdict.outcome == "return":  # the newest frozen topic of that domain
                record = next(r for r in reversed(frozen) if domain in (r.get("domains") or []))
                switch = TopicSwitch(record.get("topic", ""), verdict.reason, "return", record["id"])
            elif verdict.outcome == "switch":
                switch = TopicSwitch(new_topic_of(text), f"intent shift{was}: {verdict.reason}", kind="shift")
            elif verdict.outcome == "maybe":  # distance alone: wait for a second message before freezing anything
                mark = {"vector": pack_vector(vector), "text": text[:200], "domain": domain, "reason": verdict.reason}
                _save_state(tenant, session, {**state, "pending": mark})
                return None
        if switch is not None and switch.kind != "return" and frozen:
            record, closeness = _pick_frozen(frozen, None, vector, model)
            if record is not None and closeness >= RETURN_THRESHOLD:
                note = f"return to {record.get('topic')!r}: similarity {closeness:.2f}"
                switch = TopicSwitch(record.get("topic", ""), note, "return", record["id"])
    if switch is None:
        if vector is not None:  # the topic's first message stays; its latest follows the conversation
            first = current[0] if current else pack_vector(vector)
            domains = [*topic_domains, domain] if domain and domain not in topic_domains else topic_domains
            likelies = [*topic_likely, likely] if likely and likely not in topic_likely else topic_likely
            vectors = [first, pack_vector(vector)]
            _save_state(
                tenant, session, {**state, "model": model, "vectors": vectors, "domains": domains, "likely": likelies}
            )
        elif pending:
            _save_state(tenant, session, state)  # the possible switch was not confirmed
        return None
    vectors = vectors if switch.new_topic else []
    opened = {"domains": [domain] if domain else [], "likely": [likely] if likely else []}
    return do_topic_switch(
        tenant, session, switch, model=model, vectors=vectors, **({} if switch.kind == "return" else opened)
    )


def _save_state(tenant: Tenant, session: ChatSession, state: dict[str, Any], **fields: Any) -> None:
    with tenant_scope(tenant):
        ChatSession.objects.for_tenant(tenant).filter(pk=session.pk).update(topic_state=state, **fields)
    session.topic_state = state
    for name, value in fields.items():
        setattr(session, name, value)


@require_session_id
def do_topic_switch(
    tenant: Tenant,
    session: ChatSession,
    switch: TopicSwitch,
    *,
    model: str = "",
    vectors: list | None = None,
    domains: list[str] | None = None,
    likely: list[str] | None = None,
) -> TopicSwitch:
    """Freeze the current topic (its live ``session_state`` memories and its record), thaw the frozen topic a
    return names, set the new topic and mark the session so the next prompt carries ``<|context_reset|>``.
    Facts about the user are never touched. Returns ``switch`` with ``frozen_as`` (the record the old topic
    became) and, for a return, ``tool_context`` (the returning topic's frozen tool call)."""
    state = dict(session.topic_state or {})
    frozen = _frozen_topics(session)
    returning = next((r for r in frozen if r["id"] == switch.frozen_id), None) if switch.kind == "return" else None
    frozen_id = uuid.uuid4().hex[:8]
    now = timezone.now()
    with tenant_scope(tenant):
        live = list(
            MemoryUnit.objects.for_tenant(tenant)
            .select_for_update()
            .filter(fetch.valid_q(now), session=session, type=MemoryType.SESSION_STATE, superseded_at__isnull=True)
            .exclude(data__has_key=FROZEN_TOPIC)
        )
        for memory in live:
            _freeze(memory, frozen_id, note=f"topic switch: {switch.reason}"[:200])
        if returning is not None:
            frozen.remove(returning)
            for memory in (
                MemoryUnit.objects.for_tenant(tenant)
                .select_for_update()
                .filter(session=session, data__contains={FROZEN_TOPIC: returning["id"]})
            ):
                _thaw(tenant, memory, note=f"back to topic {returning.get('topic')!r}"[:200])
        if live or state.get("vectors") or session.topic:
            record = {
                "id": frozen_id, "topic": session.topic, "model": state.get("model", model),
                "vectors": state.get("vectors") or [], "domains": state.get("domains") or [],
                "likely": state.get("likely") or [],
                "frozen_at": now.isoformat(), "memories": len(live), "tool_context": None,
            }  # fmt: skip
            frozen = [*frozen, record][-MAX_FROZEN:]
        new_state = {"model": model or state.get("model", ""), "frozen": frozen}
        new_state["vectors"] = (returning or {}).get("vectors") or vectors or []
        new_state["domains"] = (returning or {}).get("domains") or domains or []
        new_state["likely"] = (returning or {}).get("likely") or likely or []
        if returning is not None:
            new_state["model"] = returning.get("model", new_state["model"])
        _save_state(tenant, session, new_state, context_reset_pending=True, topic=switch.new_topic[:200])
    tool_context = (returning or {}).get("tool_context")
    return dataclasses.replace(switch, frozen_as=frozen_id, tool_context=tool_context)


def _freeze(memory: MemoryUnit, frozen_id: str, *, note: str) -> None:
    before = snapshot(memory)
    data = {**memory.data, FROZEN_TOPIC: frozen_id}
    if memory.key:
        data[FROZEN_KEY] = memory.key
    memory.data, memory.key, memory.updated_at = data, None, timezone.now()
    memory.save(update_fields=["data", "key", "updated_at"])
    record_event(memory, Kind.EDIT, audit.SYSTEM, before=before, after=snapshot(memory), note=f"frozen: {note}"[:200])


def _thaw(tenant: Tenant, memory: MemoryUnit, *, note: str) -> None:
    """Back into recall; a keyed memory back into its slot unless the slot was filled meanwhile (it then stays
    keyless: the one live memory per key wins)."""
    before = snapshot(memory)
    data = dict(memory.data)
    data.pop(FROZEN_TOPIC, None)
    key = data.pop(FROZEN_KEY, None)
    if key and (
        MemoryUnit.objects.for_tenant(tenant)
        .filter(session=memory.session_id, type=memory.type, key=key, superseded_at__isnull=True)
        .exists()
    ):
        key = None
    memory.data, memory.key, memory.updated_at = data, key or memory.key, timezone.now()
    memory.save(update_fields=["data", "key", "updated_at"])
    record_event(memory, Kind.EDIT, audit.SYSTEM, before=before, after=snapshot(memory), note=f"thawed: {note}"[:200])


@require_session_id
def attach_tool_context(tenant: Tenant, session: ChatSession, frozen_id: str, tool_context: dict[str, Any]) -> None:
    """Save the execution context's tool call ``tool_context`` with the frozen topic ``frozen_id`` (the chat
    runtime calls it right after a switch, and clears the live context)."""
    with tenant_scope(tenant):
        locked = ChatSession.objects.for_tenant(tenant).select_for_update().get(pk=session.pk)
        state = dict(locked.topic_state or {})
        frozen = _frozen_topics(locked)
        record = next((r for r in frozen if r["id"] == frozen_id), None)
        if record is None:  # a topic that left nothing else behind: the tool call alone is its record
            record = {"id": frozen_id, "topic": "", "model": "", "vectors": [], "memories": 0}
            frozen = [*frozen, record][-MAX_FROZEN:]
        record["tool_context"] = tool_context
        _save_state(tenant, session, {**state, "frozen": frozen})
