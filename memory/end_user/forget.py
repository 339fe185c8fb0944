"""「忘掉我的地址」 / "forget my phone number": an end user's request, in chat, to forget what memdesk remembers.

Two pure steps, no database access:

- :func:`parse_forget_request` reads a message as a request to forget one or more *kinds* of fact
  (:data:`KINDS`: address, phone, e-mail, order number, name, birthday, or everything), in Chinese or English;
  anything else is None, and the turn goes on as usual;
- :func:`matching_memories` picks, among the end user's current memories, those the request names: the keyed
  facts of the kind's keys, and the conversation units that state such a fact (``data["facts"]``) or repeat one
  of those facts' values. A unit that still says 「我的地址是…」 would otherwise bring the address back at the next
  recall. :func:`units_stating` does the same for one forgotten memory (the panel's "Forget this").

What counts as a request is deliberately narrow, because a request is answered without the model: the message
must *be* the request — an imperative (「忘掉…」, 「把…删掉」, "forget …", "don't remember …"), the end user's own
fact named right after it, and nothing but politeness after that. "I forgot my password", 「别忘了我的地址」 and
"forget my address, ship it to 5 Main St instead" are not requests: the last one is a change of address, which
extraction handles. Deleting or removing an *order* (「删除我的订单」, "remove my order") means cancelling it, so
only "forget" verbs or the order's *number* make it one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memory.conversation.units import is_conversation_key, squash
from memory.models import MemoryUnit
from memory.text.language import Language, detect_language
from memory.text.phones import written_forms

#: Keys whose value is a phone number, written in texts in more ways than it is stored (E.164).
_PHONE_KEYS = frozenset({"phone", "contact_phone"})

__all__ = ["KINDS", "ForgetRequest", "Kind", "matching_memories", "parse_forget_request", "units_stating"]


@dataclass(frozen=True)
class Kind:
    """A kind of fact an end user can ask to forget: the memory keys it covers and how a reply names it."""

    name: str
    keys: frozenset[str]
    zh: str
    en: str

    @property
    def everything(self) -> bool:
        return not self.keys

    def label(self, language: Language) -> str:
        return self.zh if language == "zh" else self.en


KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        # A work address is the end user's own too (memory.extraction.rules); a relative's (contact_address) is not.
        Kind("address", frozenset({"address", "work_address"}), "地址", "address"),
        Kind("phone", frozenset({"phone"}), "电话号码", "phone number"),
        Kind("email", frozenset({"email"}), "邮箱", "e-mail address"),
        Kind("order", frozenset({"order_id"}), "订单号", "order number"),
        Kind("name", frozenset({"name"}), "名字", "name"),
        Kind("birthday", frozenset({"birthday"}), "生日", "birthday"),
        Kind("everything", frozenset(), "关于您的所有信息", "everything about you"),
    )
}


@dataclass(frozen=True)
class ForgetRequest:
    """What a message asks to forget, in the order said, and the message's language (for the reply)."""

    kinds: tuple[Kind, ...]
    language: Language

    @property
    def keys(self) -> frozenset[str]:
        return frozenset().union(*(kind.keys for kind in self.kinds))

    @property
    def everything(self) -> bool:
        return any(kind.everything for kind in self.kinds)


# --- parsing ----------------------------------------------------------------------------------------------

#: The nouns of each kind, longest first where one contains another (e-mail *address*, *order* number).
_ZH_NOUNS: tuple[tuple[str, str], ...] = (
    (
        "everything",
        r"关于我的(?:一切|所有(?:信息|资料|内容|事情?|记忆)?|全部(?:信息|资料|内容|记忆)?)|一切"
        r"|所有(?:的)?(?:信息|资料|内容|事情?|记忆)|全部(?:的)?(?:信息|资料|内容|记忆)",
    ),
    ("email", r"电子邮箱|邮箱地址|邮件地址|电子邮件|邮箱|(?i:e-?mail)"),
    ("order", r"订单号码|订单编号|订单号"),
    ("order_ambiguous", r"订单"),
    ("address", r"收货地址|收件地址|送货地址|家庭住址|家庭地址|公司地址|住址|地址"),
    ("phone", r"手机号码|电话号码|联系电话|手机号|手机|电话|号码|联系方式"),
    ("name", r"姓名|名字|全名|称呼"),
    ("birthday", r"出生日期|生日"),
)  # fmt: skip
_EN_NOUNS: tuple[tuple[str, str], ...] = (
    (
        "everything",
        r"everything(?:\s+about\s+me)?|all\s+(?:of\s+)?(?:my\s+)?(?:data|information|info|details|memories)"
        r"(?:\s+about\s+me)?|all\s+(?:that\s+)?you\s+know\s+about\s+me|what\s+you\s+know\s+about\s+me",
    ),
    ("email", r"e-?mail(?:\s+address(?:es)?)?"),
    ("order", r"order\s+(?:numbers?|ids?|nos?\.?)"),
    ("order_ambiguous", r"orders?"),
    ("address", r"(?:(?:home|shipping|delivery|mailing|postal|work)\s+)?address(?:es)?"),
    ("phone", r"(?:(?:cell|mobile|tele)?phone|mobile|cell)(?:\s+numbers?)?|numbers?"),
    ("name", r"(?:full\s+|first\s+|last\s+)?name"),
    ("birthday", r"birthday|date\s+of\s+birth|birth\s*date|dob"),
)  # fmt: skip


def _alternation(nouns: tuple[tuple[str, str], ...]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?P<{name}>{pattern})" for name, pattern in nouns), re.IGNORECASE)


_ZH_NOUN = _alternation(_ZH_NOUNS)
_EN_NOUN = _alternation(_EN_NOUNS)

_ZH_POLITE = (
    r"(?:(?:请|麻烦|拜托|劳驾)(?:你|您|你们)?|(?:你|您|你们)?(?:可以|能|能不能|可不可以|能否)|"
    r"我(?:要|想|希望)(?:让)?(?:你|您|你们)|帮我|帮忙|给我|那就|那|就)"
)
#: Verbs that forget; the 删/清 ones also cancel an order, so an order needs its number after them.
_ZH_FORGET = r"忘掉|忘记|忘了|别再?记(?:住|着|得)?|不要再?记(?:住|着|得)?|不用再?记(?:住|着|得)?"
_ZH_DELETE = r"删掉|删除|删了|清除|清掉|抹掉|抹去|去掉|移除"
_ZH_HEAD = re.compile(
    rf"\s*(?:{_ZH_POLITE}\s*)*(?:(?P<forget>{_ZH_FORGET})|(?P<delete>{_ZH_DELETE})|(?P<ba>把))\s*"
    r"|\s*我?(?:不想|不希望|不要)(?:让)?(?:你|您|你们)(?:再)?(?P<remember>记(?:住|着|得)?)\s*"
)
_ZH_BA_VERB = re.compile(rf"\s*(?:都|也|全)?\s*(?:给)?(?:(?P<forget>{_ZH_FORGET})|(?P<delete>{_ZH_DELETE}))(?:掉|了)?")
_ZH_OWNER = re.compile(r"\s*(?:我(?:的)?|关于我的|我们的)?\s*")
_ZH_JOIN = re.compile(r"\s*(?:和|跟|与|及|以及|还有|、|，|,|/)\s*")
_ZH_TAIL = re.compile(
    r"(?:[\s,.!?~。！？，、～…]|吧|了|哦|噢|啊|呀|嘛|吗|呢|掉|都|也|一下|全部|永久|彻底|从记忆里|从记录里|"
    r"谢谢(?:你|您)?|多谢|麻烦(?:你|您)?了|好吗|好不好|可以吗|行吗|行不行|不要再记着?了?|别再记着?了?)*"
)

_EN_POLITE = r"(?:please|kindly|hey|hi|ok(?:ay)?|so|then|now|and)\b[\s,!]*"
_EN_ASK = (
    r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?"
    r"|i\s+(?:want|would\s+like|'d\s+like|’d\s+like|need)\s+you\s+to\s+|please\s+)"
)
_EN_HEAD = re.compile(
    rf"\s*(?:{_EN_POLITE})*(?:{_EN_ASK})?"
    r"(?:(?P<forget>forget(?:\s+about)?|erase|wipe(?:\s+out)?|purge)"
    r"|(?P<delete>delete|remove|clear|drop)"
    r"|(?P<remember>(?:do\s+not|don't|don’t|stop|no\s+longer)\s+(?:remember(?:ing)?|stor(?:e|ing)|sav(?:e|ing)|keep(?:ing)?)))\s+",
    re.IGNORECASE,
)
_EN_OWNER = re.compile(r"(?:(?:all\s+(?:of\s+)?)?(?:my|the)\s+)?", re.IGNORECASE)
_EN_JOIN = re.compile(r"\s*(?:,\s*(?:and\s+)?|\s+and\s+|\s*&\s*|\s*/\s*|\s+or\s+)", re.IGNORECASE)
_EN_TAIL = re.compile(
    r"(?:[\s,.!?~…]|\b(?:please|thanks|thank\s+you|thx|now|right\s+now|for\s+me|too|as\s+well|permanently|"
    r"completely|entirely|for\s+good|from\s+(?:your\s+)?memory|from\s+your\s+records|you\s+have|you\s+know|"
    r"you\s+remember|you\s+stored|you\s+saved)\b)*",
    re.IGNORECASE,
)


def _nouns(
    text: str, at: int, noun: re.Pattern[str], owner: re.Pattern[str], join: re.Pattern[str]
) -> tuple[list[str], int]:
    """The kinds named from ``at`` on (``my address and phone number``), and where they end."""
    kinds: list[str] = []
    while True:
        found = _noun_at(text, at, noun, owner)
        if found is None:
            return kinds, at
        kinds.append(str(found.lastgroup))
        at = found.end()
        joined = join.match(text, at)
        if joined is None or _noun_at(text, joined.end(), noun, owner) is None:
            return kinds, at  # "…, thanks": what follows belongs to the tail
        at = joined.end()


def _noun_at(text: str, at: int, noun: re.Pattern[str], owner: re.Pattern[str]) -> re.Match[str] | None:
    """A noun at ``at``, itself (「一切」, "all my data") or after its owner (「我的」, "my")."""
    found = noun.match(text, at)
    if found is None:
        mine = owner.match(text, at)
        found = noun.match(text, mine.end()) if mine is not None and mine.end() > at else None
    return found if found is not None and found.lastgroup is not None else None


def _request(names: list[str], verb: str, language: Language) -> ForgetRequest | None:
    """The request for the nouns ``names`` said after a verb of type ``verb`` (forget, delete, remember,
    ba): an order with a delete verb and no number is a cancellation, not a request to forget."""
    kinds: list[Kind] = []
    for name in names:
        if name == "order_ambiguous":
            if verb == "delete":
                return None
            name = "order"
        kind = KINDS[name]
        if kind not in kinds:
            kinds.append(kind)
    return ForgetRequest(tuple(kinds), language) if kinds else None


#: A question (「…吗？」, "…?") is a request only when it asks for it (「可以…吗」, "could you …?"): 「你忘了我的
#: 地址吗？」 and "forget my address?" ask whether something was forgotten.
_QUESTION = re.compile(r"[?？]|吗|呢")
_ASKING = re.compile(
    r"请|麻烦|拜托|劳驾|可以|能|(?i:\b(?:can|could|would|will)\s+you\b|\bplease\b|\b(?:need|like|want)\s+you\b)"
)


def _asked(head: str, tail: str) -> bool:
    """Whether a request whose words before the nouns are ``head`` and after them ``tail`` is one: a question
    only when the head asks for it."""
    return _QUESTION.search(tail) is None or _ASKING.search(head) is not None


def _verb(match: re.Match[str]) -> str:
    return next(name for name in ("forget", "delete", "remember", "ba") if match.groupdict().get(name))


def _parse_zh(text: str) -> ForgetRequest | None:
    head = _ZH_HEAD.match(text)
    if head is None:
        return None
    names, end = _nouns(text, head.end(), _ZH_NOUN, _ZH_OWNER, _ZH_JOIN)
    if not names:
        return None
    verb = _verb(head)
    if verb == "ba":  # 把我的地址忘掉
        after = _ZH_BA_VERB.match(text, end)
        if after is None:
            return None
        verb, end = _verb(after), after.end()
    if _ZH_TAIL.fullmatch(text, end) is None or not _asked(head.group(0), text[end:]):
        return None
    return _request(names, verb, "zh")


def _parse_en(text: str) -> ForgetRequest | None:
    head = _EN_HEAD.match(text)
    if head is None:
        return None
    names, end = _nouns(text, head.end(), _EN_NOUN, _EN_OWNER, _EN_JOIN)
    if not names or _EN_TAIL.fullmatch(text, end) is None or not _asked(head.group(0), text[end:]):
        return None
    return _request(names, _verb(head), "en")


def parse_forget_request(text: str) -> ForgetRequest | None:
    """The kinds of fact ``text`` asks memdesk to forget, or None when it is not such a request (see the module's
    docstring). 「忘掉我的地址」→ address; 「请把我的手机号和邮箱删掉」→ phone, e-mail; "forget my phone number" →
    phone; "please don't remember my birthday" → birthday; 「忘掉关于我的一切」/"forget everything about me" →
    everything. The request's ``language`` is the message's (``memory.text.language.detect_language``)."""
    text = (text or "").strip()
    if not text or len(text) > 200:  # a request is a sentence; a long message is about something else
        return None
    request = _parse_zh(text) or _parse_en(text)
    if request is None:
        return None
    return ForgetRequest(request.kinds, detect_language(text))


# --- matching ---------------------------------------------------------------------------------------------


def _distinctive(value: str) -> bool:
    """A value long enough that finding it in a text means the text repeats it: 4 characters, or 2 of a
    Chinese name."""
    return len(value) >= 4 or (len(value) >= 2 and not value.isascii())


def _value_of(memory: MemoryUnit) -> str:
    """A keyed fact's value, squashed (``memory.conversation.units.squash``), or "" when it has none."""
    value = (memory.data or {}).get(memory.key or "")
    return squash(str(value)) if isinstance(value, str | int) and not isinstance(value, bool) else ""


def _states(unit: MemoryUnit, keys: Iterable[str], values: Iterable[str]) -> bool:
    facts = (unit.data or {}).get("facts") or {}
    if isinstance(facts, dict) and any(key in facts for key in keys):
        return True
    content = squash(unit.content)
    return any(_distinctive(value) and value in content for value in values)


def units_stating(memory: MemoryUnit, memories: Sequence[MemoryUnit]) -> list[MemoryUnit]:
    """The conversation units among ``memories`` that state the keyed fact ``memory``'s value: their
    ``data["facts"]`` give that value for its key, or their text repeats it. None for a memory that is not a
    keyed fact with a value (a conversation unit, a tool result)."""
    value = _value_of(memory)
    if not value or is_conversation_key(memory.key):
        return []
    found = []
    for unit in memories:
        if unit.pk == memory.pk or not is_conversation_key(unit.key):
            continue
        facts = (unit.data or {}).get("facts") or {}
        stated = isinstance(facts, dict) and squash(str(facts.get(memory.key, ""))) == value
        forms = written_forms(value) if memory.key in _PHONE_KEYS else [value]
        if stated or any(_distinctive(form) and form in squash(unit.content) for form in forms):
            found.append(unit)
    return found


def matching_memories(request: ForgetRequest, memories: Sequence[MemoryUnit]) -> list[MemoryUnit]:
    """The memories among ``memories`` (the end user's current ones) that ``request`` asks to forget, oldest
    first: every one for "everything"; otherwise the keyed facts of the request's keys and the conversation
    units that state such a fact or repeat one of their values."""
    if request.everything:
        chosen = list(memories)
    else:
        keys = request.keys
        keyed = [m for m in memories if m.key in keys]
        values = {value for value in (_value_of(m) for m in keyed) if value}
        values |= {form for m in keyed if m.key in _PHONE_KEYS for form in written_forms(_value_of(m))}
        units = [m for m in memories if is_conversation_key(m.key) and _states(m, keys, values)]
        chosen = keyed + [m for m in units if m not in keyed]
    return sorted(chosen, key=lambda m: (m.created_at, str(m.pk)))
