"""Changes and confirmations in the user's words (S13): does a message replace a fact, or only confirm it?

:func:`is_change` says whether a change marker (「我换号了」, 「改成」, 「不对，我的…」, "my new number is",
"changed my e-mail to", a rejected value: 「不是 159…，是 159…」) precedes a value in its sentence, so the replacement
is flagged ``change=True``. :func:`is_rejected` says whether the value itself is the one a correction rejects
(「不是 15921873306」, "not 646-555-0172"): it is nobody's fact.
:func:`is_confirmation` recognises a bare confirmation of what the agent just said (「对，就是这个号」, "yes that's
right"), which must not lower a fact's score. Pure.
"""

from __future__ import annotations

import re

from memory.text.redaction import redact

__all__ = ["is_change", "is_confirmation", "is_rejected"]

_CHANGE = re.compile(
    r"换号|换了|新号|新的(?:号码|手机|地址|邮箱)|新(?:手机|地址|邮箱|电话)|改成|改为|改到|更改|更换|变更|修改|更新为|更正|"
    r"不是这个|不是那个|搬家|搬到|以后(?:联系|用|发到?)|现在(?:用|改)|不对[，,。\s]*(?:我的|应该是|是)|不是我的|"
    r"(?:写|记|填|登记)错了|"
    # a rejected value before this one: 「不是 15921873306，…是 15921873307」, 「不是文三路 259 号，是…」
    r"(?:不是|并非)\s*(?=[+\d]|[\w.+-]+@)|(?:不是|并非)[^，。；,;！？!?]{1,40}[，,]\s*(?:而|应该|就)?是\s*$|"
    r"(?<![A-Za-z])(?:new (?:phone|number|mobile|cell|e-?mail|address)|changed?(?: (?:my|the) [\w-]+)? to|"
    r"updated?(?: (?:my|the) [\w-]+)? to|moved to|not that one|correction|instead|no longer|"
    r"(?:no|wrong)[,.]?\s+(?:it'?s|my (?:\w+ )?(?:number|phone|address|e-?mail) is)|"
    r"not my (?:number|phone|address|e-?mail)|isn't mine|"
    r"(?:not|isn't|wasn't)(?=\s+(?:\+\d|\(?\d{3}\)?[ .-]?\d{3})))(?![A-Za-z])",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[。！？!?\n]|\.(?:\s|$)")
# Right before a value, a denial rejects it: 「不是 15921873306，是 …」, "it's not 646-555-0172 but …".
_REJECTING = re.compile(
    r"(?:不是|并非|而非|而不是|(?i:(?<![A-Za-z])(?:not|isn't|wasn't|rather than|instead of)))\s*[「“\"']?\s*$"
)


def is_rejected(text: str, start: int) -> bool:
    """The value at ``text[start]`` follows a denial directly (「不是 159…」, "not 646-…"): a correction rejects it."""
    return bool(_REJECTING.search(text, max(0, start - 16), start))


def is_change(text: str, start: int) -> bool:
    """A change marker precedes the value inside the same sentence."""
    sentence_start = 0
    for match in _SENTENCE_END.finditer(text, 0, start):
        sentence_start = match.end()
    return bool(_CHANGE.search(text, sentence_start, start))


_CONFIRM_STRONG = re.compile(
    r"对的|对呀|对啊|对|是的|是啊|是|没错|正确|确认|无误|确定|(?<![A-Za-z])(?:yes|yeah|yep|yup|correct|right|"
    r"exactly|confirmed?|affirmative|indeed|absolutely|that'?s (?:the one|it))(?![A-Za-z])",
    re.IGNORECASE,
)
_CONFIRM_FILLER = re.compile(
    r"没错儿?|没问题|完全正确|一点没错|就是这个|就是它|就这个|就是|这个|那个|号码|号|手机号?|电话|地址|邮箱|订单号?|它|"
    r"嗯+|好的|了|呢|呀|啊|的|哈|吧|"
    r"(?<![A-Za-z])(?:that's|that is|it's|it is|this|that|the|one|number|address|email|e-mail|phone|order|all|"
    r"good|perfect|sure|ok|okay|is|it|so|that one|you got it|spot on)(?![A-Za-z])",
    re.IGNORECASE,
)


def is_confirmation(text: str) -> bool:
    """True for a bare confirmation of what the agent just said: 「对，就是这个号」「没错」「是的」, "yes that's right".

    A confirmation must not lower a fact's score (S13). Anything that adds or changes information is not a bare
    confirmation: 「是的，不过我换号了」, "yes, but my new number is …", 「对了，我想问…」, 「不对」, "no".
    """
    bare = redact(text).strip()
    if not bare or len(bare) > 40 or _CHANGE.search(bare):
        return False
    if re.match(r"对了", bare):  # 「对了」 means "by the way", not "right"
        return False
    without_idioms = re.sub(r"没错儿?|没问题|无误", "", bare)
    if re.search(
        r"[不没未别无非]|(?<![A-Za-z])(?:no|not|nope|wrong|but|however)(?![A-Za-z])|n't", without_idioms, re.IGNORECASE
    ):
        return False
    if not (_CONFIRM_STRONG.search(bare) or re.search(r"没错|没问题", bare)):
        return False
    residue = _CONFIRM_FILLER.sub(" ", bare)
    residue = _CONFIRM_STRONG.sub(" ", residue)
    # What is left may only be punctuation or the fact being confirmed (a number or code repeated back).
    residue = re.sub(r"[\s\W_]+", "", re.sub(r"[A-Za-z0-9][A-Za-z0-9@.+-]*\d[A-Za-z0-9@.+-]*", "", residue))
    return residue == ""
