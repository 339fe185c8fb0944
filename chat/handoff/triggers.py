"""A chat turn's side of the handoff: deferring to a person, and the triggers that ask for one.

The turn reads what the handoff needs (:func:`read_turn`: the session's state and what the stateful triggers
need, in one statement) in the transaction that stores the user message, then calls :func:`handoff_turn`, which
writes only when there is something to write:

- **A person has the conversation** (state ``waiting_for_human`` or ``with_human``): the turn ends there. The
  message is stored (it always is, first), its facts extracted and its conversation units written like any
  user message; the staff consoles get it; no recall, no prompt, no model call. The REST endpoint answers
  202 ``{"message_id", "state"}``, the socket ``ack`` then ``{"type": "state", …}``. While nobody can answer
  (``chat.handoff.offline``) the message is one left for the team: it goes to the tenant's webhook, signed.
- **A trigger fires** (the tenant's settings, ``chat.handoff.options``): the end user asks for a person
  (「转人工」, 「人工客服」, "talk to a person", "human agent"); the tenant's keyword rule; the last
  ``confirmation_streak`` replies all needed the user's confirmation; an amnesia alert fired and recall still
  finds nothing (the session's ``amnesia_alerted``); ``negative_mood_turns`` negative messages in a row
  (``memory.text.mood.detect_mood``, counted back to the last staff message). The session starts waiting and the
  turn's reply, written here rather than by the model, tells the end user in their language that a person will
  take over and their place in the queue — or, when nobody can, to leave a message with a contact.

The model's own request — the built-in ``handoff_to_human`` tool, a structured tool call — is
:func:`model_handoff`, called by the turn when the model asks for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from chat.handoff import state as handoff
from chat.handoff.offline import availability, left_message_body, post_left_message
from chat.handoff.options import HANDOFF_TOOL, HandoffSettings, handoff_settings
from chat.prompt.build import BuiltPrompt
from chat.prompt.prepared import PreparedTurn
from chat.sessions import events
from config.db.sql import fetch_row, unit_of_work
from conversations.access import SessionNotFound, require_session_id
from conversations.models import ChatSession, Message
from memory.extraction import extract_and_store
from memory.text import detect_language, detect_mood
from tenants.models import Tenant
from tenants.rls import tenant_scope

State = ChatSession.State

# The end user asks for a person. A negation just before it (「不用转人工」, "I don't need a human agent") does not.
_ASK_ZH = re.compile(r"转人工|转接人工|人工客服|人工服务|找人工|要人工|接人工|真人客服|人工坐席|人工座席")
# In English the words also describe people ("so cool to talk to someone who gets it", "we as human beings"):
# a phrase followed by who/that is not asked for, and one in a longer message counts only in a sentence that
# asks (want, need, can I, please, connect me …).
_ASK_EN = re.compile(
    r"\b(?:talk|speak|chat)\s+(?:to|with)\s+(?:a\s+|an\s+|the\s+)?(?:real\s+|actual\s+|live\s+)?"
    r"(?:person|human|agent|representative|someone)\b(?!\s+(?:who|that|which|whom|about|like)\b)"
    r"|\bhuman\s+(?:agent|support)\b|\blive\s+agent\b|\breal\s+person\b(?!\s+(?:who|that)\b)",
    re.IGNORECASE,
)
_REQUEST_EN = re.compile(
    r"\b(?:want|wanna|would\s+like|'d\s+like|need|can|could|may|let\s+me|please|get\s+me|connect\s+me|"
    r"transfer\s+me|put\s+me\s+through|rather|is\s+there|give\s+me|demand)\b",
    re.IGNORECASE,
)
#: A message this short that names a person to talk to asks for one ("human agent", "real person please").
_SHORT_ASK_WORDS = 6
_SENTENCE_END = re.compile(r"[.!?。！？\n]")
_NEGATED_ZH = re.compile(r"(?:不用|不要|不需要|无需|别|不必|没要)\s*$")
_NEGATED_EN = re.compile(r"\b(?:don'?t|do\s+not|no\s+need\s+to|not|never)\s+(?:\w+\s+){0,2}$", re.IGNORECASE)

_WAITING = {
    "zh": "好的，正在为您转接人工客服，请稍候。您目前排在第 {position} 位。",
    "en": "Sure, I'm connecting you to a person. You are number {position} in the queue; please stay here.",
}
_LEAVE = {
    "zh": "抱歉，{why}，暂时没有人工客服可以接待。请留下您的问题和联系方式（电话或邮箱），我们会尽快联系您。",
    "en": (
        "Sorry, {why}, so no one from our team can take over right now. Please leave your question and a phone "
        "number or e-mail address, and we will get back to you."
    ),
}
_WHY = {
    "closed": {"zh": "现在是非工作时间", "en": "we are outside business hours"},
    "offline": {"zh": "目前没有客服在线", "en": "nobody is online"},
}


@dataclass
class HandoffTurn(PreparedTurn):
    """A turn answered without the model because it was handed to a person: the reply's words."""

    reply_text: str = ""


@dataclass(frozen=True)
class TurnHandoff:
    """What the handoff makes of a turn: ``deferred`` (a person has it: no reply), or a ``notice`` (a trigger
    fired: the reply to stream instead of the model's), or neither (the AI answers)."""

    deferred: bool = False
    state: str = State.AI
    position: int | None = None
    leave_message: bool = False
    notice: HandoffTurn | None = None
    webhook: tuple[str, bytes] | None = None  # (url, body) of a message left for the team


def asks_for_person(text: str, conf: HandoffSettings) -> bool:
    """Whether the end user asks for a person (memdesk's phrases and the tenant's ``phrases``)."""
    english = [m for m in _ASK_EN.finditer(text) if _asks_in_english(text, m)]
    for match in (*_ASK_ZH.finditer(text), *english):
        before = text[max(0, match.start() - 30) : match.start()]
        if not (_NEGATED_ZH.search(before) or _NEGATED_EN.search(before)):
            return True
    folded = text.casefold()
    return any(phrase in folded for phrase in conf.phrases)


def _asks_in_english(text: str, match: re.Match[str]) -> bool:
    """An English phrase asks for a person in a short message, or in a sentence with a word that asks."""
    if len(text.split()) <= _SHORT_ASK_WORDS:
        return True
    starts = [m.end() for m in _SENTENCE_END.finditer(text, 0, match.start())]
    end = _SENTENCE_END.search(text, match.end())
    sentence = text[starts[-1] if starts else 0 : end.start() if end else len(text)]
    return bool(_REQUEST_EN.search(sentence))


def keyword_in(text: str, conf: HandoffSettings) -> str | None:
    folded = text.casefold()
    return next((k for k in conf.keywords if k in folded), None)


def notice_text(language: str, position: int | None, *, leave_message: bool, closed: bool) -> str:
    """The reply that tells the end user a person will take over (and their place), or to leave a message."""
    language = "en" if language == "en" else "zh"
    if leave_message:
        return _LEAVE[language].format(why=_WHY["closed" if closed else "offline"][language])
    return _WAITING[language].format(position=position or 1)


def _notice(text: str) -> HandoffTurn:
    return HandoffTurn(
        prompt=BuiltPrompt(messages=[], prompt_tokens=0, budget=0), recalled=[], needs_confirmation=False,
        recall_empty=False, context_size=0, recalled_memories=[], reply_text=text,
    )  # fmt: skip


# The session's state and what the stateful triggers read, in one statement: the needs_confirmation flags of
# the last replies, and the last user messages back to the last staff message (a NULL marks a staff message).
_TURN_STATE = """
SELECT s.state, s.amnesia_alerted, s.handoff_at,
       ARRAY(SELECT (m.data -> 'needs_confirmation') = 'true'::jsonb FROM chat_message m
             WHERE m.tenant_id = s.tenant_id AND m.session_id = s.id AND m.role = 'assistant' AND m.seq < %(seq)s
             ORDER BY m.seq DESC LIMIT %(replies)s) AS confirmations,
       ARRAY(SELECT CASE WHEN m.role = 'user' THEN m.text END FROM chat_message m
             WHERE m.tenant_id = s.tenant_id AND m.session_id = s.id AND m.role IN ('user', 'staff')
               AND m.seq < %(seq)s
             ORDER BY m.seq DESC LIMIT %(said)s) AS said
FROM chat_chatsession s WHERE s.tenant_id = %(tenant)s AND s.id = %(session)s
"""


def _trigger(conf: HandoffSettings, text: str, negative: bool, row: dict[str, Any]) -> tuple[str, str] | None:
    """The trigger that fires for this message and its reason, or None; the first that applies, in the order
    of the module docstring."""
    if conf.user_request and asks_for_person(text, conf):
        return "user_request", "the end user asked for a person"
    keyword = keyword_in(text, conf)
    if keyword is not None:
        return "keyword", f"the message contains the keyword {keyword!r}"
    streak = conf.confirmation_streak
    if streak and len(row["confirmations"]) == streak and all(row["confirmations"]):
        return "confirmation", f"{streak} replies in a row needed the end user's confirmation"
    if conf.amnesia and row["amnesia_alerted"]:
        return "amnesia", "an amnesia alert fired and recall still finds nothing"
    turns = conf.negative_mood_turns
    if negative and turns:
        before = row["said"][: turns - 1]
        if len(before) == turns - 1 and all(t is not None and detect_mood(t).negative for t in before):
            return "negative_mood", f"{turns} negative messages in a row"
    return None


@dataclass(frozen=True)
class HandoffCheck:
    """What the handoff read for a stored user message: the session's state and the trigger that fires."""

    state: str
    handoff_at: Any
    fired: tuple[str, str] | None  # (trigger, reason)
    conf: HandoffSettings

    @property
    def answers(self) -> bool:
        """The AI answers the message as usual: nothing for the handoff to write."""
        return self.state == State.AI and self.fired is None


@require_session_id
def read_turn(tenant: Tenant, session: ChatSession, message: Message) -> HandoffCheck:
    """The handoff's read for a stored user message, in one statement of the caller's transaction under the
    tenant's scope: the turn runs it in the transaction that stores the message (``chat.sessions.messages``'s
    ``then``), so the common turn, which the AI answers, costs the handoff no transaction of its own."""
    conf = handoff_settings(tenant)
    negative = bool(conf.negative_mood_turns) and detect_mood(message.text).negative
    params = {
        "tenant": tenant.pk, "session": session.pk, "seq": message.seq, "replies": conf.confirmation_streak,
        "said": conf.negative_mood_turns - 1 if negative else 0,
    }  # fmt: skip
    row = fetch_row(_TURN_STATE, params)
    if row is None:
        raise SessionNotFound("No such session.")
    fired = _trigger(conf, message.text, negative, row) if row["state"] == State.AI else None
    return HandoffCheck(row["state"], row["handoff_at"], fired, conf)


@require_session_id
def apply_check(tenant: Tenant, session: ChatSession, message: Message, check: HandoffCheck) -> TurnHandoff:
    """The handoff's decision for a stored user message (see the module docstring) from what
    :func:`read_turn` found, with its writes in one transaction."""
    if check.answers:
        return TurnHandoff()
    with tenant_scope(tenant):
        if check.state != State.AI:
            session.state, session.handoff_at = check.state, check.handoff_at
            return _defer(tenant, session, message, check.conf)
        assert check.fired is not None
        done = handoff.do_request_handoff(tenant, session, trigger=check.fired[0], reason=check.fired[1])
    text = notice_text(
        detect_language(message.text), done.position, leave_message=done.leave_message, closed=done.closed
    )
    return TurnHandoff(state=done.state, position=done.position, leave_message=done.leave_message, notice=_notice(text))


def _defer(tenant: Tenant, session: ChatSession, message: Message, conf: HandoffSettings) -> TurnHandoff:
    """A message to a conversation a person has: kept, remembered and shown to staff, not answered by the AI."""
    # The turn that stored it ends here: a retry of its client_msg_id must not wait for a lease nobody renews.
    Message.objects.for_tenant(tenant).filter(pk=message.pk).update(turn_lease_until=None)
    # Re-read, as a turn's prepare step does: extraction reads and writes the session's topic state.
    fresh = ChatSession.objects.for_tenant(tenant).select_related("tenant", "end_user").get(pk=session.pk)
    extract_and_store(tenant, fresh, message)
    handoff.index_soon(tenant, session, [message])
    events.after_commit(staff=[(tenant.pk, handoff.message_event(message))])
    if session.state != State.WAITING_FOR_HUMAN:
        return TurnHandoff(deferred=True, state=session.state)
    now = timezone.now()
    position = handoff.queue_position(tenant, session, now)
    offline = availability(tenant, now, waiting_since=session.handoff_at, wait_s=conf.offline_wait_s)
    webhook = None
    if offline.leave_message and conf.webhook_url:
        webhook = (conf.webhook_url, left_message_body(tenant, session, message, offline))
    return TurnHandoff(
        deferred=True, state=session.state, position=position, leave_message=offline.leave_message, webhook=webhook
    )


async def handoff_turn(tenant: Tenant, session: ChatSession, message: Message, check: HandoffCheck) -> TurnHandoff:
    """The handoff's decision for a stored user message from ``check`` (:func:`read_turn`, made when it was
    stored): a unit of work only when there is something to write; a message left for the team then goes to
    the tenant's webhook."""
    if check.answers:
        return TurnHandoff()
    decided = await unit_of_work(apply_check)(tenant, session, message, check)
    if decided.webhook is not None:
        await post_left_message(tenant, *decided.webhook)
    return decided


def _reason(arguments: Any) -> str:
    raw = arguments.get("reason") if isinstance(arguments, dict) else None
    try:
        reason = handoff.check_reason(raw[: handoff.MAX_REASON_CHARS] if isinstance(raw, str) else None)
    except handoff.InvalidHandoff:
        reason = ""
    return reason or "the model asked for a person"


async def model_handoff(
    tenant: Tenant, session: ChatSession, message: Message, prepared: PreparedTurn, calls: list[dict[str, Any]]
) -> str | None:
    """When the model called the built-in ``handoff_to_human`` (offered to it this turn), hand the session off
    with the model's reason and return the words that tell the end user; otherwise None. The turn's other
    calls of that round are not run: a person takes over."""
    if not any(t["function"]["name"] == HANDOFF_TOOL for t in prepared.builtin_tools):
        return None
    for call in calls:
        function = call.get("function") or {}
        if function.get("name") == HANDOFF_TOOL:
            reason = _reason(function.get("arguments"))
            done = await unit_of_work(handoff.do_request_handoff)(tenant, session, trigger="model", reason=reason)
            language = detect_language(message.text)
            return notice_text(language, done.position, leave_message=done.leave_message, closed=done.closed)
    return None
