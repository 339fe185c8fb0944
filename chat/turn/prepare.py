"""A turn's second step: the stored user message becomes the prompt (``prepare_turn``).

In one transaction: the session's state in one read (``_TURN_STATE``); the tenant's knowledge searched beside
what follows, on a thread and connection of its own (``chat.turn.knowledge``); extraction of the message's facts
(``memory.extraction.run``, which also handles a topic switch) and the user's reaction to the previous reply as
feedback on the memories it used (S13); recall (``memory.recall.pipeline``, its query embedding started before the
extraction so the two overlap); the anchor's facts; the summary channel; and the two-channel prompt, with the
knowledge's passages, built within the model's context less ``REPLY_RESERVE`` (``chat.prompt.build``). The
result is a ``PreparedTurn``; in grounded mode, a question about the business no passage answers gets one whose
``fixed_reply`` says so and offers a person (``chat.turn.knowledge``).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from chat.handoff.options import builtin_tools
from chat.llm import structured_answer
from chat.models import ExecutionContext, Tool
from chat.prompt import build as prompt_mod
from chat.prompt.build import ANCHOR_KEYS, RECALL_K, SUMMARY_MESSAGES
from chat.prompt.prepared import PreparedTurn
from chat.prompt.summary import summarize
from chat.tools import registry as tools_mod
from chat.tools.context import execution_context
from chat.tools.topic_context import do_switch_tool_context
from chat.turn import knowledge as knowledge_mod
from config.db.sql import load_models
from conversations.access import SessionNotFound, require_session_id
from conversations.models import ChatSession, Message
from memory.conversation import TERM
from memory.extraction import extract_and_store
from memory.models import MemoryUnit
from memory.recall import RecallResult, embed_query_soon, recall
from memory.store import anchor_facts, apply_feedback, memory_enabled_for_session
from memory.text import mask_text, redact
from tenants.models import Tenant
from tenants.rls import tenant_scope

RECENT_MESSAGES = 10  # the last 5 turns: 5 user messages and 5 replies (S2)

#: Tokens kept free for the reply in every prompt.
REPLY_RESERVE = 1024


def _masked_anchor(memories: list[tuple[str, str]]) -> list[str]:
    """The anchor's facts (``memory.store.anchor_facts``: the best per key, in ``ANCHOR_KEYS`` order), personal
    values masked.

    The anchor rides in every prompt of the session, so it shows 「手机号 138****1234」 (seed §4.2), never the
    whole number: that reaches a prompt only when the turn needs it (a recalled memory, the user's own recent
    words) and a tool only through ``chat.turn.tool_rounds``, which puts the stored value back for a masked one."""
    return [mask_text(content) for _key, content in memories]


def _missing_facts(result: RecallResult) -> list[str]:
    """The user facts the question asks about (the rule stage's keys) that recall found no memory of: the
    prompt asks the user for them rather than letting the model answer blind (「我的订单到哪了」 with no order)."""
    found = {h.memory.key for h in result.hits if h.stage == "rule"}
    return [k for k in result.rule_keys if k in prompt_mod.MISSING_FACT_NAMES and k not in found]


def _memory_line(memory: MemoryUnit, *, stale: bool = False) -> str:
    """A recalled memory as the prompt shows it; one that is no longer current (recall's ``stale``: a later
    statement changed it) says so, so the model can tell "your old address was …" from "your address is …"; a
    word a later statement replaced says what replaced it (the rest of the statement may still hold)."""
    if not stale:
        return f"[{memory.type}] {memory.content}"
    replaced = [
        f"{attr.removeprefix(TERM)} → {change['to']}"
        for attr, change in sorted(((memory.data or {}).get("changed") or {}).items())
        if attr.startswith(TERM) and isinstance(change, dict) and change.get("to")
    ]
    if replaced:
        return f"[{memory.type}, no longer current: since changed {'; '.join(replaced)}] {memory.content}"
    return f"[{memory.type}, no longer current] {memory.content}"


def _previous_reply_memories(tenant: Tenant, session: ChatSession, before_seq: int) -> tuple[Message | None, list]:
    reply = (
        Message.objects.for_tenant(tenant)
        .filter(session=session, role=Message.Role.ASSISTANT, seq__lt=before_seq)
        .exclude(status=Message.Status.FAILED)
        .order_by("-seq")
        .first()
    )
    if reply is None:
        return None, []
    return reply, list(reply.data.get("used", []))


@dataclass(frozen=True)
class _TurnState:
    """What ``prepare_turn`` reads before extraction, in one query."""

    session: ChatSession  # re-read: the topic and the reset flag change between turns
    end_user_id: str  # the tenant's own id for the end user
    context: ExecutionContext | None  # None before the session's first turn
    history: list[dict[str, Any]]  # role, text, used: the last SUMMARY_MESSAGES before the message, oldest first
    has_tools: bool
    has_knowledge: bool  # the tenant has articles (knowledge search runs)


# The session row with its end user's id, its execution context, its recent
# messages (not failed ones) and whether the tenant has tools and articles.
_TURN_STATE = """
SELECT s.*, u.external_id AS end_user_external_id,
       (SELECT jsonb_build_object('current_tool', c.current_tool, 'tool_args', c.tool_args,
                                  'last_tool_result', c.last_tool_result, 'session_variables', c.session_variables)
        FROM chat_executioncontext c WHERE c.tenant_id = s.tenant_id AND c.session_id = s.id) AS context_fields,
       EXISTS (SELECT 1 FROM chat_tool t WHERE t.tenant_id = s.tenant_id) AS has_tools,
       EXISTS (SELECT 1 FROM knowledge_article a WHERE a.tenant_id = s.tenant_id) AS has_knowledge,
       ARRAY(SELECT jsonb_build_object('role', m.role, 'text', m.text, 'used', m.data -> 'used')
             FROM chat_message m
             WHERE m.tenant_id = s.tenant_id AND m.session_id = s.id AND m.seq < %(before)s AND m.status <> 'failed'
             ORDER BY m.seq DESC LIMIT %(limit)s) AS recent
FROM chat_chatsession s JOIN tenants_enduser u ON u.tenant_id = s.tenant_id AND u.id = s.end_user_id
WHERE s.tenant_id = %(tenant)s AND s.id = %(session)s
"""


def _json(value: Any) -> Any:
    """A jsonb value read outside a model field (Django's driver setup leaves it as text)."""
    return json.loads(value) if isinstance(value, str) else value


def _turn_state(tenant: Tenant, session: ChatSession, before_seq: int) -> _TurnState:
    """Everything ``prepare_turn`` needs before extraction, in one round trip
    instead of five (``load_models`` still converts the session's own fields)."""
    params = {"tenant": tenant.pk, "session": session.pk, "before": before_seq, "limit": SUMMARY_MESSAGES}
    rows = load_models(ChatSession, _TURN_STATE, params)  # not cross-tenant: the SQL names the tenant
    if not rows:
        raise SessionNotFound("No such session.")
    fresh = rows[0]
    fresh.tenant = tenant
    fields = _json(fresh.context_fields)
    context = None if fields is None else ExecutionContext(session=fresh, tenant=tenant, **fields)
    history = [_json(row) for row in reversed(fresh.recent)]
    return _TurnState(
        fresh, fresh.end_user_external_id, context, history, bool(fresh.has_tools), bool(fresh.has_knowledge)
    )


def _previously_used(tenant: Tenant, state: _TurnState, before_seq: int) -> list[str]:
    """The memories the agent's previous reply used (their ids), for the
    user's reaction to it. That reply is nearly always among the recent
    messages; only a long run of tool messages or unanswered messages since
    needs a query of its own."""
    for row in reversed(state.history):
        if row["role"] == Message.Role.ASSISTANT:
            return _used_ids(row["used"])
    if len(state.history) < SUMMARY_MESSAGES:
        return []  # the whole session is in the history: no reply yet
    return _previous_reply_memories(tenant, state.session, before_seq)[1]


def _used_ids(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


@require_session_id
def prepare_turn(
    tenant: Tenant,
    session: ChatSession,
    message: Message,
    context_size: int,
    early_search: knowledge_mod.EarlySearch | None = None,
) -> PreparedTurn:
    """Step 2 of ``chat.turn.run`` (DESIGN.md's steps 2–4): extraction and feedback, recall, and the prompt.
    ``early_search``: the knowledge search the turn started when it began (``chat.turn.knowledge.search_early``)."""
    with tenant_scope(tenant):
        query_embedding = embed_query_soon(tenant, message.text)  # overlaps the extraction below
        state = _turn_state(tenant, session, message.seq)
        session = state.session
        # Beside extraction and recall, not after them: joined only when the prompt is built.
        search = knowledge_mod.search_for_turn(tenant, session, message.text, state.has_knowledge, early_search)
        previously_used = _previously_used(tenant, state, message.seq)
        before = state.history[-1]["text"] if state.history else ""
        extraction = extract_and_store(tenant, session, message, previous_text=before, ask_model=structured_answer)
        if extraction.topic_switch is not None:  # the old topic's tool call is frozen with it (S10)
            state = dataclasses.replace(state, context=do_switch_tool_context(tenant, session, extraction.topic_switch))
        _feedback_from_user(tenant, extraction, previously_used)

        result = recall(tenant, session, message.text, k=RECALL_K, embedding=query_embedding, record=False)
        recalled = [h.memory.pk for h in result.hits]  # counted as recalled in the anchor's statement
        profile = anchor_facts(tenant, session, ANCHOR_KEYS, as_of=timezone.now(), count_recalled=recalled)
        # Secrets a user typed never travel on into later prompts (S6's red line). A staff member's replies
        # (chat.handoff.state) are the agent's words to the model: what the person said and promised stays in view.
        turns = [
            (Message.Role.ASSISTANT if m["role"] == Message.Role.STAFF else m["role"], redact(m["text"]))
            for m in state.history
            if m["role"] in (Message.Role.USER, Message.Role.ASSISTANT, Message.Role.STAFF)
        ]
        context = state.context or execution_context(tenant, session)  # for sessions opened before it was made at open
        passages = knowledge_mod.labelled(knowledge_mod.finished(search))
        grounding = _grounding(tenant, message.text, result, passages) if search is not None else None
        parts = prompt_mod.PromptParts(
            role_text=tenant.agent_role,
            # Memory off for this end user (memory.store.consent): recall returns nothing, and the anchor shows nothing.
            anchor_facts=_masked_anchor(profile) if memory_enabled_for_session(tenant, session) else [],
            execution_context=context.as_dict(),
            summary=summarize(turns, language=tenant.language) if turns else "",
            memories=[_memory_line(h.memory, stale=h.stale) for h in result.hits],
            recent_turns=turns[-RECENT_MESSAGES:],
            user_input=message.text,
            context_reset=session.context_reset_pending,
            needs_confirmation=result.needs_confirmation,
            language=tenant.language,
            forgotten=extraction.forgotten,
            missing_facts=_missing_facts(result),
            knowledge=knowledge_mod.prompt_lines(passages),
        )
        tools = {t.name: t for t in Tool.objects.for_tenant(tenant).order_by("name")} if state.has_tools else {}
        builtin = builtin_tools(tenant, tools)  # handoff_to_human, where the tenant turned it on
        built = prompt_mod.build_prompt(
            parts, context_size=context_size, reply_reserve=REPLY_RESERVE,
            tools=[*tools_mod.ollama_tools(list(tools.values())), *builtin] or None,
        )  # fmt: skip
        rule_or_vector_empty = not result.hits
        return PreparedTurn(
            prompt=built,
            recalled=[str(h.memory.pk) for h in result.hits],
            needs_confirmation=result.needs_confirmation,
            recall_empty=rule_or_vector_empty,
            context_size=context_size,
            parts=parts,
            tools=tools,
            end_user_id=state.end_user_id,
            recalled_memories=[h.memory for h in result.hits],
            previous_text=before,
            builtin_tools=builtin,
            knowledge=passages,
            content_gap=grounding,
            **_grounded_reply(tenant, grounding),
        )


def _grounding(tenant: Tenant, text: str, result: RecallResult, passages: list[tuple[str, Any]]) -> float | None:
    """The best passage's score when ``text`` asks about the business and no passage reaches the tenant's
    threshold (a content gap, ``chat.turn.knowledge``); None otherwise."""
    best = knowledge_mod.best_score([hit for _, hit in passages])
    if best >= knowledge_mod.settings_of(tenant).threshold:
        return None
    return best if knowledge_mod.asks_the_business(text, result.rule_keys) else None


def _grounded_reply(tenant: Tenant, gap: float | None) -> dict[str, Any]:
    """In grounded mode, a content gap is answered without the model: "I do not know", and a person offered."""
    if gap is None or not knowledge_mod.settings_of(tenant).grounded:
        return {}
    text, offer = knowledge_mod.grounded_reply(tenant)
    return {"fixed_reply": text, "offer_handoff": offer}


def _feedback_from_user(tenant: Tenant, extraction: Any, previously_used: list[str]) -> None:
    """The user's reaction to what the agent said last turn (S13):
    a confirmation confirms the memories it used (never lowers a score); a
    correction of one of them counts as ``misled`` (−0.3)."""
    if not previously_used or not (extraction.changed_keys or extraction.confirmation):
        return  # neither a correction nor a confirmation: nothing to record
    used = MemoryUnit.objects.for_tenant(tenant).filter(pk__in=previously_used).values_list("pk", "key")
    changed = set(extraction.changed_keys)
    misled = [pk for pk, key in used if key and key in changed]
    apply_feedback(tenant, misled, "misled", note="the user corrected it")
    if extraction.confirmation:
        confirmed = [pk for pk, key in used if not (key and key in changed)]
        apply_feedback(tenant, confirmed, "confirmed", note="the user confirmed it")
