"""What memdesk remembers about an end user, as the end user sees and changes it: the list, "forget this", "this
is wrong" and a forget request said in chat. Every change is the end user's: its ``MemoryEvent``
rows have the actor ``end_user`` and are written in the transaction that makes the change.

An end user reaches only their own memories, whichever of their sessions they come from: every read names the
tenant and the session's end user, and another end user's memory is :class:`MemoryNotFound`, as a missing one
(its existence is not revealed).

- **Forget** expires the memory now (kept as history, no longer recalled, ``memory.store.lifecycle``). A keyed fact
  takes with it the conversation units that state its value (「我的地址是…」), which would bring it back at the
  next recall (``memory.end_user.forget.units_stating``).
- **Correct** supersedes the memory with a new version holding the corrected words (same type and key), as a
  replacement by the store does: the old version keeps its history, recall serves the new one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from config.ids import parse_uuid
from conversations.access import require_session_id
from conversations.models import ChatSession
from memory.conversation.units import KEY_PREFIX, is_conversation_key, message_units
from memory.end_user.forget import ForgetRequest, matching_memories, units_stating
from memory.extraction.rules import extract_facts
from memory.models import MAX_CONTENT, MemoryUnit
from memory.store import audit, lifecycle
from memory.store import write as store
from memory.store.read import HEAVY_FIELDS, MemoryNotFound, is_valid_at, valid_q
from memory.text.compression import compress
from memory.text.redaction import redact, redact_obj
from tenants.models import Tenant
from tenants.rls import tenant_scope

#: At most this many memories in the end user's list, newest first.
LIST_LIMIT = 500


def _current(tenant: Tenant, session: ChatSession, now: datetime) -> QuerySet[MemoryUnit]:
    """The end user's memories valid at ``now``, across all their sessions (call in the tenant's scope)."""
    return (
        MemoryUnit.objects.for_tenant(tenant)
        .filter(end_user_id=session.end_user_id)
        .filter(valid_q(now))
        .defer(*HEAVY_FIELDS)
        .order_by("-created_at", "-id")
    )


@require_session_id
def list_end_user_memories(tenant: Tenant, session: ChatSession, *, limit: int = LIST_LIMIT) -> list[MemoryUnit]:
    """What memdesk remembers now about the session's end user: their current memories from every session of
    theirs, newest first, at most ``limit``. Content as stored; the caller masks what it shows."""
    with tenant_scope(tenant):
        return list(_current(tenant, session, timezone.now())[:limit])


def _own_memory(tenant: Tenant, session: ChatSession, memory_id: Any) -> MemoryUnit:
    """The end user's memory ``memory_id`` (any session of theirs); :class:`MemoryNotFound` otherwise."""
    pk = parse_uuid(str(memory_id), MemoryNotFound("No such memory."))
    memory = MemoryUnit.objects.for_tenant(tenant).filter(pk=pk, end_user_id=session.end_user_id).first()
    if memory is None:
        raise MemoryNotFound("No such memory.")
    return memory


def _expire(tenant: Tenant, memory: MemoryUnit, note: str) -> MemoryUnit:
    return lifecycle.do_expire_memory(tenant, memory, actor=audit.END_USER, note=note)


@require_session_id
def do_forget_memory(tenant: Tenant, session: ChatSession, memory_id: Any) -> MemoryUnit:
    """The end user's "forget this": the memory expires now, with the conversation units that state its value
    (a keyed fact's). Forgetting what is already forgotten changes nothing. Returns the memory."""
    with tenant_scope(tenant):
        memory = _own_memory(tenant, session, memory_id)
        forgotten = _expire(tenant, memory, "the end user asked to forget it")
        units = _current(tenant, session, timezone.now()).filter(key__startswith=KEY_PREFIX)
        for unit in units_stating(memory, list(units)):
            _expire(tenant, unit, f"states {memory.pk}, which the end user asked to forget")
    return forgotten


@require_session_id
def do_forget_matching(tenant: Tenant, session: ChatSession, request: ForgetRequest, *, note: str) -> list[MemoryUnit]:
    """A forget request said in chat (``memory.end_user.forget``): every current memory of the end user it
    names expires now. Returns them, oldest first (none: nothing matched)."""
    with tenant_scope(tenant):
        matched = matching_memories(request, list(_current(tenant, session, timezone.now())))
        for memory in matched:
            _expire(tenant, memory, note)
    return matched


def _label(content: str) -> str:
    """The label of a keyed fact's sentence (「用户手机号：138…」 → 「用户手机号」, "User's phone: …" → "User's
    phone"), or "" when it has none."""
    for separator in ("：", ": "):
        head, found, _ = content.partition(separator)
        if found and 0 < len(head) <= 30:
            return head
    return ""


def _corrected(memory: MemoryUnit, text: str, now: datetime) -> tuple[str, dict[str, Any]]:
    """The corrected version's content and data. A keyed fact whose correction states the same kind of fact
    (「13900001111」 for a phone) is written as extraction writes it, so its structured value is right too;
    otherwise the corrected words stand for the value under the old label (「用户姓名：李四」). A conversation
    unit keeps its data with the facts its new words state. Secrets are redacted as in every memory."""
    text = redact(text).strip()
    if memory.key and not is_conversation_key(memory.key):
        for fact in extract_facts(text, role="user", now=now):
            if fact.key == memory.key:
                return compress(redact(fact.content), limit=MAX_CONTENT), redact_obj(fact.data)
        label = _label(memory.content)
        separator = "：" if label and "：" in memory.content else ": "
        content = f"{label}{separator}{text}" if label and not _label(text) else text
        return compress(content, limit=MAX_CONTENT), {memory.key: text}
    data = dict(memory.data or {})
    if is_conversation_key(memory.key):
        data["facts"] = {key: value for unit in message_units(text, "user", now) for key, value in unit.facts.items()}
    return compress(text, limit=MAX_CONTENT), data


@require_session_id
def do_correct_memory(tenant: Tenant, session: ChatSession, memory_id: Any, content: str) -> MemoryUnit:
    """The end user's "this is wrong": a new version of the memory holds ``content`` (already checked at the
    edge: non-empty, at most 150 characters, no control characters), the old one is superseded by it and kept
    as history, and both events name the end user. Only a memory remembered now can be corrected
    (:class:`MemoryNotFound` otherwise, as for another end user's). Returns the new version (the memory itself
    when the corrected words are what it already says)."""
    now = timezone.now()
    with tenant_scope(tenant):  # one transaction: the new version and the old one's end, or neither
        memory = _own_memory(tenant, session, memory_id)
        if not is_valid_at(memory, now) or memory.superseded_at is not None:
            raise MemoryNotFound("No such memory.")
        new_content, data = _corrected(memory, content, now)
        # A session's own memory (session_state, batch progress) is written in its own session's slot.
        owner = session
        if memory.session_id is not None and memory.session_id != session.pk:
            owner = ChatSession.objects.for_tenant(tenant).get(pk=memory.session_id)
        lifetime = max(int((memory.expires_at - memory.created_at).total_seconds()), 1)
        fields = {"type": memory.type, "content": new_content, "data": data, "expires_in": lifetime}
        if memory.key:
            # The store replaces the slot's live version (the advisory lock, the history, both events).
            result = store.do_write_memory(tenant, owner, key=memory.key, actor=audit.END_USER, **fields)
            if result.memory.pk == memory.pk:
                return result.memory  # the same words: refreshed, nothing to correct
            if result.replaced is None or result.replaced.pk != memory.pk:
                raise MemoryNotFound("No such memory.")  # replaced meanwhile: rolled back, nothing changes
            return result.memory
        return _supersede_unkeyed(tenant, owner, memory, fields)


def _supersede_unkeyed(tenant: Tenant, owner: ChatSession, memory: MemoryUnit, fields: dict[str, Any]) -> MemoryUnit:
    """What the store does for a keyed replacement, for a memory without a key (one the tenant's API wrote
    so): the new version written, the old one locked, cut at this moment and pointed at its successor."""
    locked = MemoryUnit.objects.for_tenant(tenant).select_for_update().get(pk=memory.pk)
    now = timezone.now()
    if not is_valid_at(locked, now) or locked.superseded_at is not None:
        raise MemoryNotFound("No such memory.")
    new = store.do_write_memory(tenant, owner, actor=audit.END_USER, **fields).memory
    before = audit.snapshot(locked)
    locked.superseded_at = now
    locked.superseded_by = new
    locked.expires_at = max(min(locked.expires_at, now), locked.created_at)
    locked.updated_at = now
    locked.save(update_fields=["superseded_at", "superseded_by", "expires_at", "updated_at"])
    audit.record_event(
        locked,
        audit.Kind.REPLACE,
        audit.END_USER,
        before=before,
        after=audit.snapshot(new),
        note=f"replaced by {new.pk}",
    )
    return new
