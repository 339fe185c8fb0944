"""``PreparedTurn``: what a turn's model calls need, made by ``chat.turn.prepare``, handed by ``chat.turn.run`` to its
tool calls (``chat.turn.tool_rounds``), which rebuild the prompt around the updated execution context, and to
``chat.turn.finish``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chat.models import Tool
from chat.prompt import build as prompt_mod
from chat.tools import registry as tools_mod
from knowledge import KnowledgeHit
from memory.models import MemoryUnit


@dataclass
class PreparedTurn:
    """What the model call(s) of one turn need. ``parts`` and ``tools`` let a
    turn with tool calls rebuild its prompt around the updated execution
    context; ``end_user_id`` is the tenant's own id for the end user."""

    prompt: prompt_mod.BuiltPrompt
    recalled: list[str]
    needs_confirmation: bool
    recall_empty: bool
    context_size: int
    parts: prompt_mod.PromptParts | None = None
    tools: dict[str, Tool] = field(default_factory=dict)
    end_user_id: str = ""
    #: The recalled memories as the prompt showed them (``recalled`` are their
    #: ids); ``finish_turn`` checks the reply against these.
    recalled_memories: list[MemoryUnit] | None = None
    #: The message before the user's (the lexical context of its conversation units).
    previous_text: str = ""
    #: memdesk's own tools offered beside the tenant's (``chat.handoff.options.builtin_tools``).
    builtin_tools: list[dict[str, Any]] = field(default_factory=list)
    #: The tenant's passages the prompt was given, best first, each with its label (``K1``…): what a reply's
    #: citations are read against (``chat.turn.knowledge.citations``).
    knowledge: list[tuple[str, KnowledgeHit]] = field(default_factory=list)
    #: A question about the business no passage answered: the best passage's score (a content gap); else None.
    content_gap: float | None = None
    #: The reply's words when the model is not called (grounded mode: "I do not know", ``chat.turn.knowledge``).
    fixed_reply: str | None = None
    #: The fixed reply offers the end user a person.
    offer_handoff: bool = False

    def tool_definitions(self) -> list[dict[str, Any]] | None:
        return [*tools_mod.ollama_tools(list(self.tools.values())), *self.builtin_tools] or None
