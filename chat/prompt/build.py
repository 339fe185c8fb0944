"""Prompt assembly within an exact token budget (S1, S6, S10, S15, S19).

The prompt for one turn is::

    system:    <|memory_anchor|>{core user facts}          ← always first (S10, seed §4.2)
               {the tenant's role text}
               <|execution_context|>{compact JSON}          ← channel 1 (S1, S6)
               【对话摘要】…                                  ← channel 2 (S6)
               {recalled memories, best first}
               【知识库】{the tenant's passages, best first, each [K1]…}  ← knowledge (docs/knowledge.md)
               {cite-the-ids instruction}                   ← with the passages
               {ask-to-confirm instruction}                 ← best relevance_score below 0.7 (S7)
               {ask-for-the-fact instruction}               ← the question's user fact is not in memory
               <|context_reset|> {what it means}            ← after a topic switch (S10)
    user/assistant: the recent turns, oldest first (S2: at most 5)
    user:      the user's input

and must fit ``context_size − reply_reserve`` tokens, counted exactly with
Qwen2.5's tokenizer (``chat.prompt.tokens``). Over budget, parts are cut whole — never
``text[:n]`` (S3) — in this order, re-counting after each cut:

1. the summary (S19: the least critical part);
2. the execution context's ``last_tool_result``, then its other keys except
   ``current_tool`` and ``tool_args`` (S19);
3. the recent turns, oldest first;
4. the knowledge passages, lowest-ranked (last) first; the cite instruction goes
   with the last one. A passage is the tenant's own text, found again by the
   next question; a memory below is the customer's, and nothing else holds it;
5. the recalled memories, lowest-ranked (last) first. Memories go after the
   turns: each is a compressed, ranked fact — the seed's whole point is that a
   few key facts beat raw history, so raw turns are cheaper to lose.

Each passage carries a label (``K1``, ``K2``… per prompt, in rank order, kept when
a lower one is cut): the model cites the labels it used (``[K1]``) and
``chat.turn.knowledge`` maps them back to the passages; a label a passage cut to
fit the budget had is not in the prompt and is not a citation.

The system role, the anchor and the user input are never cut: if the prompt
still does not fit, :class:`ContextOverflow` (413 ``context_overflow``).

Text that comes from end users (anchor facts, context values, summary,
memories, turns, input) and the tenant's passages has marker-like markup defused first (``<|`` becomes
``< |``): otherwise a user could type ``<|context_reset|>`` or ``<|im_end|>``
(which Qwen2.5 reads as its real special token) and rewrite the prompt's
structure. The tenant's role text is trusted and kept as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from chat.prompt.tokens import count_messages, count_tools
from chat.tools.compact import dumps_compact
from config.errors import ApiError

MEMORY_ANCHOR = "<|memory_anchor|>"
EXECUTION_CONTEXT = "<|execution_context|>"
CONTEXT_RESET = "<|context_reset|>"

#: Short-term memory is the last 5 turns (S2) — a turn being the user's
#: message and the agent's reply, so 10 entries; older ones are the summary's job.
MAX_RECENT_TURNS = 10

# The last 10 exchanges feed the summary channel (S6): their replies and tool messages take more than 20.
SUMMARY_MESSAGES = 40
#: Memories recall hands a prompt (and a handoff note).
RECALL_K = 5

#: Keys whose memories anchor the prompt, in this order (seed §4.2).
ANCHOR_KEYS = ("name", "phone", "email", "order_id", "address", "current_topic")

#: Execution-context keys that survive trimming (S19): what the runtime is doing now.
KEPT_CONTEXT_KEYS = ("current_tool", "tool_args")

# Seed §4.2's role, for customer service. Unlike the seed's wording ("forget
# every anchor when <|context_reset|> appears"), the anchor here is rebuilt
# every turn from current memories, after the reset has frozen session_state,
# so it stays valid; what the reset voids is the earlier conversation.
DEFAULT_ROLE = {
    "zh": (
        "你是一个拥有精准短期记忆的客服助手。你的记忆锚点是 <|memory_anchor|> 后的信息，所有回答必须与之保持一致。"
        "你不会编造 <|memory_anchor|> 和系统提供的记忆之外的用户事实；"
        "<|execution_context|> 后的 JSON 是系统记录的工具调用状态，以它为准。"
        "当 <|context_reset|> 出现时，之前的话题已经结束，不要延续其中未完成的事项。"
    ),
    "en": (
        "You are a customer-service assistant with a precise short-term memory. Your memory anchor is the "
        "information after <|memory_anchor|>; every answer must stay consistent with it. You never invent facts "
        "about the user beyond <|memory_anchor|> and the memories the system gives you; the JSON after "
        "<|execution_context|> is the system's record of tool calls and is authoritative. When <|context_reset|> "
        "appears, the previous topic is over: do not carry on its unfinished business."
    ),
}

_TEXT = {
    "zh": {
        "no_facts": "（暂无）",
        "fact_sep": "，",
        "memories": "【相关记忆】",
        "confirm": "召回的记忆不够可靠：如果回答依赖用户的订单、账户或之前提到的信息，请先向用户确认，不要猜测。",
        "forgotten": "用户说以下信息不是他本人的，已从记忆中删除；请在回复中告诉用户已删除：",
        "ask_missing": "记忆中没有回答这个问题所需的用户信息，请先请用户提供，不要猜测：",
        "reset": "用户切换了话题：下面较早的对话属于上一个话题，仅作背景；<|memory_anchor|> 中的用户事实仍然有效。",
        "knowledge": "【知识库】本企业的资料（关于企业、产品和政策的问题以此为准）：",
        "cite": (
            "回答用到知识库中的资料时，在相应句子后用方括号注明其编号，例如 [K1]；只能注明上面列出的编号。"
            "知识库中没有的企业信息不要编造。"
        ),
    },
    "en": {
        "no_facts": "(none yet)",
        "fact_sep": "; ",
        "memories": "[Relevant memories]",
        "confirm": (
            "The recalled memories are not reliable enough: if your answer depends on the user's orders, account "
            "or anything said earlier, ask the user to confirm it first instead of guessing."
        ),
        "reset": (
            "The user has switched topic: the earlier conversation below belongs to the previous topic and is "
            "background only; the user facts in <|memory_anchor|> still hold."
        ),
        "forgotten": (
            "The user says the following is not theirs; it has been removed from memory. Tell the user in your "
            "reply that it was removed: "
        ),
        "ask_missing": "Memory holds none of the user's facts this question needs; ask the user for it, do not guess: ",
        "knowledge": "[Knowledge base] The business's own articles (authoritative on the business, its products and "
        "policies):",
        "cite": (
            "When your answer uses a passage of the knowledge base, cite its label in square brackets after the "
            "sentence, e.g. [K1]; cite only labels listed above. Do not invent facts about the business that the "
            "knowledge base does not give."
        ),
    },
}

#: The user facts a question can need (the rule stage's keys, ``memory.recall.rewrite.rule_keys``), as the prompt asks
#: for them when memory has none.
MISSING_FACT_NAMES = {
    "order_id": {"zh": "订单号", "en": "the order number"},
    "tracking_number": {"zh": "物流单号", "en": "the tracking number"},
    "phone": {"zh": "手机号", "en": "the phone number"},
    "email": {"zh": "邮箱", "en": "the e-mail address"},
    "address": {"zh": "收货地址", "en": "the delivery address"},
    "name": {"zh": "姓名", "en": "the name"},
}

_MARKUP = re.compile(r"<(?=\||/?tool_call>|/?tool_response>|/?tools>)")


class ContextOverflow(ApiError):
    """The prompt cannot fit even with everything optional cut: the user input
    (with the role and anchor) alone is over budget."""

    status = 413
    code = "context_overflow"

    def __init__(self, prompt_tokens: int, budget: int) -> None:
        super().__init__(
            f"The message is too long for the model: the prompt needs {prompt_tokens} tokens "
            f"and at most {budget} are available. Please send a shorter message."
        )
        self.prompt_tokens = prompt_tokens
        self.budget = budget


@dataclass
class PromptParts:
    """Everything one turn's prompt is made of. ``recent_turns`` are
    ``(role, text)`` with role ``"user"`` or ``"assistant"``, oldest first;
    only the last 5 are used. ``memories`` are ranked best first.
    ``summary`` comes already prefixed by the summariser (【对话摘要】…).
    ``role_text`` empty means the default role for ``language``."""

    role_text: str
    anchor_facts: list[str]
    execution_context: dict[str, Any]
    summary: str
    memories: list[str]
    recent_turns: list[tuple[str, str]]  # (role, text) oldest first, at most 5
    user_input: str
    context_reset: bool = False
    needs_confirmation: bool = False
    language: str = "zh"
    #: Memories the user disowned this turn (「这不是我的电话」): the reply must acknowledge their removal.
    forgotten: list[str] = field(default_factory=list)
    #: Keys of user facts the question needs and memory does not hold (「我的订单到哪了」 with no ``order_id``):
    #: the model asks for them (``MISSING_FACT_NAMES``) instead of answering blind.
    missing_facts: list[str] = field(default_factory=list)
    #: The tenant's passages for this question, best first: ``(label, text)`` with the label the model cites
    #: (``K1``…) and the text as the prompt shows it (``knowledge_line``).
    knowledge: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class BuiltPrompt:
    """The messages for Ollama, their exact token count (including the tool
    definitions when tools were given), the budget they fit, and what was
    cut to fit, in the order it was cut (e.g. ``["summary",
    "execution_context.last_tool_result", "recent_turns[0]"]``)."""

    messages: list[dict[str, str]]
    prompt_tokens: int
    budget: int
    trimmed: list[str] = field(default_factory=list)


def knowledge_line(title: str, heading_path: tuple[str, ...] | list[str], text: str) -> str:
    """A passage as the prompt shows it: where it comes from (title › headings), then its text on one line."""
    source = " › ".join(part for part in (title, *heading_path) if part)
    body = " ".join(text.split())
    return f"{source}: {body}" if source else body


def defuse_markup(text: str) -> str:
    """``text`` with anything that looks like a prompt marker or a Qwen special
    token (``<|…|>``, ``<tool_call>``…) broken up, so untrusted text cannot
    forge prompt structure."""
    return _MARKUP.sub("< ", text)


@dataclass
class _State:
    summary: str
    context: dict[str, Any]
    turns: list[tuple[int, tuple[str, str]]]
    memories: list[tuple[int, str]]
    knowledge: list[tuple[int, tuple[str, str]]] = field(default_factory=list)

    def trim_once(self) -> str | None:
        """Cut the next part in S19's order; its name, or None when nothing
        optional is left."""
        if self.summary:
            self.summary = ""
            return "summary"
        if "last_tool_result" in self.context:
            del self.context["last_tool_result"]
            return "execution_context.last_tool_result"
        for key in list(self.context):
            if key not in KEPT_CONTEXT_KEYS:
                del self.context[key]
                return f"execution_context.{key}"
        if self.turns:
            index, _ = self.turns.pop(0)
            return f"recent_turns[{index}]"
        if self.knowledge:
            index, _ = self.knowledge.pop()
            return f"knowledge[{index}]"
        if self.memories:
            index, _ = self.memories.pop()
            return f"memories[{index}]"
        return None


def _language(language: str) -> str:
    return "zh" if language.lower().startswith("zh") else "en"


def _system_text(parts: PromptParts, state: _State, lang: str) -> str:
    text = _TEXT[lang]
    facts = text["fact_sep"].join(defuse_markup(f) for f in parts.anchor_facts if f.strip()) or text["no_facts"]
    sections = [
        MEMORY_ANCHOR + facts,
        parts.role_text.strip() or DEFAULT_ROLE[lang],
        EXECUTION_CONTEXT + defuse_markup(dumps_compact(state.context)),
    ]
    if state.summary:
        sections.append(defuse_markup(state.summary))
    if state.memories:
        sections.append("\n".join([text["memories"], *(f"- {defuse_markup(m)}" for _, m in state.memories)]))
    if state.knowledge:
        lines = [f"[{label}] {defuse_markup(passage)}" for _, (label, passage) in state.knowledge]
        sections.append("\n".join([text["knowledge"], *lines, text["cite"]]))
    if parts.needs_confirmation:
        sections.append(text["confirm"])
    missing = [MISSING_FACT_NAMES[k][lang] for k in parts.missing_facts if k in MISSING_FACT_NAMES]
    if missing:
        sections.append(text["ask_missing"] + text["fact_sep"].join(missing))
    if parts.forgotten:
        sections.append(text["forgotten"] + text["fact_sep"].join(defuse_markup(f) for f in parts.forgotten))
    if parts.context_reset:
        # Last in the system message, i.e. right before the recent turns: it
        # divides what is current (the anchor, context and memories above, all
        # rebuilt after the reset froze session_state) from the earlier talk
        # below. It cannot be a message of its own between the turns: Ollama
        # hoists every system message to the top of Qwen's template, and in a
        # user message it would read as something the user typed.
        sections.append(f"{CONTEXT_RESET}{text['reset']}")
    return "\n".join(sections)


def _messages(parts: PromptParts, state: _State, lang: str) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": _system_text(parts, state, lang)}]
    messages.extend({"role": role, "content": defuse_markup(text)} for _, (role, text) in state.turns)
    messages.append({"role": "user", "content": defuse_markup(parts.user_input)})
    return messages


def build_prompt(
    parts: PromptParts,
    *,
    context_size: int,
    reply_reserve: int = 1024,
    tools: list[dict[str, Any]] | None = None,
) -> BuiltPrompt:
    """The messages for this turn, fitted to ``context_size − reply_reserve``
    tokens by cutting optional parts in the module's documented order.

    ``context_size`` is the model's window (``OllamaChat.context_size()``) and
    must also be sent as ``num_ctx``; ``reply_reserve`` is kept free for the
    reply. ``tools``, if the turn offers any, count against the budget as the
    template renders them into the system message. ``prompt_tokens`` equals
    ``count_messages(messages)`` (plus ``count_tools(tools)``).

    Raises ContextOverflow when even role + anchor + input do not fit, and
    ValueError for a budget ≤ 0 or a turn whose role is not user/assistant.
    """
    budget = context_size - reply_reserve
    if budget <= 0:
        raise ValueError(f"reply_reserve ({reply_reserve}) leaves no room in a {context_size}-token context")
    for role, _ in parts.recent_turns:
        if role not in ("user", "assistant"):
            raise ValueError(f"a recent turn's role must be 'user' or 'assistant', not {role!r}")
    lang = _language(parts.language)
    first_kept = max(0, len(parts.recent_turns) - MAX_RECENT_TURNS)
    state = _State(
        summary=parts.summary.strip(),
        context=dict(parts.execution_context),
        turns=list(enumerate(parts.recent_turns))[first_kept:],
        memories=[(i, m) for i, m in enumerate(parts.memories) if m.strip()],
        knowledge=[(i, k) for i, k in enumerate(parts.knowledge) if k[1].strip()],
    )
    tool_tokens = count_tools(tools)
    trimmed: list[str] = []
    while True:
        messages = _messages(parts, state, lang)
        prompt_tokens = count_messages(messages) + tool_tokens
        if prompt_tokens <= budget:
            return BuiltPrompt(messages=messages, prompt_tokens=prompt_tokens, budget=budget, trimmed=trimmed)
        cut = state.trim_once()
        if cut is None:
            raise ContextOverflow(prompt_tokens, budget)
        trimmed.append(cut)
