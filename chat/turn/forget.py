"""「忘掉我的地址」 / "forget my phone number" said in chat: forgotten at once, and the reply says so, without the
model.

``chat.turn.run`` asks :func:`forget_turn` before preparing a turn. A message that is a forget request
(``memory.end_user.forget``: parsed in the event loop, no database for the others) has the end user's matching
current memories expired, with ``end_user`` events (``memory.end_user.memories``), and gets a :class:`ForgetTurn`
in place of a prepared prompt: the reply's words, which the turn streams and stores like any reply. The model is
not called: it cannot forget for us, and a reply it wrote might repeat the value just forgotten.

What the reply says: each kind forgotten, named in the message's language (「您的地址」, "your address"), never
the value (the reply is part of the next prompts' recent turns); each kind there was nothing of, plainly.
The request itself is marked as indexed, so it never becomes a conversation unit of its own (「忘掉我的手机号
13812345678」 would store the number again); the reply does, and says what was forgotten.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from chat.prompt.build import BuiltPrompt
from chat.prompt.prepared import PreparedTurn
from config.db.sql import unit_of_work
from conversations.access import require_session_id
from conversations.models import ChatSession, Message
from memory.end_user import ForgetRequest, Kind, do_forget_matching, parse_forget_request
from memory.text import Language
from tenants.models import Tenant
from tenants.rls import tenant_scope

_FORGOTTEN = {
    "zh": "好的，我已经忘掉了您的{what}，以后不会再用到。需要时请再告诉我。",
    "en": "Done: I've forgotten your {what} and won't use it again. Tell me again whenever it's needed.",
}
_NOTHING = {
    "zh": "我这里没有记着您的{what}，没有需要忘掉的。",
    "en": "I don't have your {what} on record, so there was nothing to forget.",
}
_EVERYTHING = {
    "zh": "好的，我已经忘掉了之前记住的关于您的所有信息（{count} 条），以后不会再用到。",
    "en": "Done: I've forgotten everything I remembered about you ({count} items) and won't use it again.",
}
_NOTHING_AT_ALL = {
    "zh": "我这里没有记着关于您的任何信息，没有需要忘掉的。",
    "en": "I don't have anything about you on record, so there was nothing to forget.",
}


@dataclass
class ForgetTurn(PreparedTurn):
    """A turn answered without the model: no prompt, nothing recalled, and the reply's words."""

    reply_text: str = ""


def _names(kinds: list[Kind], language: Language) -> str:
    """「地址和电话号码」, "address, phone number and birthday"."""
    labels = [kind.label(language) for kind in kinds]
    if len(labels) == 1:
        return labels[0]
    if language == "zh":
        return "、".join(labels[:-1]) + "和" + labels[-1]
    return ", ".join(labels[:-1]) + " and " + labels[-1]


def reply_text(request: ForgetRequest, forgotten: dict[Kind, int]) -> str:
    """The reply to ``request`` when ``forgotten`` memories of each kind were expired (0: none matched)."""
    language = request.language
    if request.everything:
        count = sum(forgotten.values())
        return _EVERYTHING[language].format(count=count) if count else _NOTHING_AT_ALL[language]
    done = [kind for kind in request.kinds if forgotten.get(kind)]
    missing = [kind for kind in request.kinds if not forgotten.get(kind)]
    sentences = []
    if done:
        sentences.append(_FORGOTTEN[language].format(what=_names(done, language)))
    if missing:
        sentences.append(_NOTHING[language].format(what=_names(missing, language)))
    return ("" if language == "zh" else " ").join(sentences)


@require_session_id
def do_forget_in_chat(tenant: Tenant, session: ChatSession, message: Message, request: ForgetRequest) -> ForgetTurn:
    """Expire what ``request`` names, kind by kind (the reply says which had anything), and mark the request
    indexed, in one transaction."""
    note = f"the end user asked in chat to forget it (message {message.pk})"
    with tenant_scope(tenant):
        forgotten: dict[Kind, int] = {}
        for kind in request.kinds:
            single = ForgetRequest((kind,), request.language)
            forgotten[kind] = len(do_forget_matching(tenant, session, single, note=note))
        Message.objects.for_tenant(tenant).filter(pk=message.pk).update(memory_indexed_at=timezone.now())
    return ForgetTurn(
        prompt=BuiltPrompt(messages=[], prompt_tokens=0, budget=0),
        recalled=[],
        needs_confirmation=False,
        recall_empty=False,
        context_size=0,
        recalled_memories=[],
        reply_text=reply_text(request, forgotten),
    )


async def forget_turn(tenant: Tenant, session: ChatSession, message: Message) -> ForgetTurn | None:
    """The turn of a forget request (see the module's docstring), or None for any other message."""
    request = parse_forget_request(message.text)
    if request is None:
        return None
    return await unit_of_work(do_forget_in_chat)(tenant, session, message, request)
