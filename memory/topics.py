"""Explicit topic-switch detection (S10): when it fires, the runtime inserts ``<|context_reset|>`` and clears
the session's ``session_state`` memories.

Only explicit switches count, because a false positive throws away the session's working memory:

* a dismissal of the old matter followed by a new request — 「账单的事先不说了，我要投诉客服」,
  「先不管订单了，我想问…」, "forget the bill, I want to complain about …";
* an announcement of a new topic — 「换个话题」, 「另外一个问题」, "let's talk about something else",
  "another question:".

A dismissal with no new request is a goodbye, not a switch: 「不说了，谢谢」, 「好的不说了」, "never mind, thanks".
Plain questions never switch. Pure and deterministic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory.compression import compress

__all__ = ["TopicSwitch", "detect_topic_switch"]

TOPIC_LIMIT = 60


@dataclass(frozen=True)
class TopicSwitch:
    """A detected switch. ``new_topic`` is the user's new request, or ``""`` when not said yet (「换个话题」)."""

    new_topic: str
    reason: str


_PUNCT = "，,。.；;！!？?：:、…~～\\s"

# "<old matter> is dropped": needs a new request after it to be a switch.
_DISMISS_ZH = re.compile(
    r"(?P<old>[^，,。.；;！!？?]{0,20}?)(?:的事情?|的问题|这事|这个事|那事)?(?:就|先|暂时|也)?"
    r"(?:不说了|不谈了|不聊了|不管了|不查了|不问了|放一放|放一边|先放着|不用管了|不用查了)"
    r"|(?:先|暂时)?不(?:说|谈|聊|管|查|问)(?P<old2>[^，,。.；;！!？?]{1,20}?)了"
)
_DISMISS_EN = re.compile(
    r"(?<![A-Za-z])(?<!don't )(?<!do not )(?:forget(?: about)?|never ?mind(?: about)?|nevermind|enough about)"
    r"(?P<old>(?: (?:the|my|that|this|it|about)?[^,.;!?:]{0,40}?)?)(?=[,.;!?:—-]|$)"
    r"|(?<![A-Za-z])I don'?t want to talk about (?P<old2>[^,.;!?]{1,40}?) anymore",
    re.IGNORECASE,
)
# "A new topic starts here": a switch even when the new request comes later.
_ANNOUNCE_ZH = re.compile(
    r"换个(?:话题|问题|事情?)|说点别的|聊点别的|问(?:个|点)别的|另外(?:一个|还有个?)问题|我还有(?:另外|另)一个问题|"
    r"还有个别的问题|另一件事"
)
_ANNOUNCE_EN = re.compile(
    r"(?<![A-Za-z])(?:let'?s (?:talk about|discuss) something else|let'?s change the (?:subject|topic)|"
    r"change (?:of )?(?:the )?(?:subject|topic)|"
    r"(?:another|a different|a separate|an unrelated) (?:question|issue|topic)|"
    r"on (?:a|another) (?:different|separate|unrelated) note|switching (?:topics|gears)|new topic|"
    r"something else entirely)(?![A-Za-z])",
    re.IGNORECASE,
)
_REQUEST_ZH = re.compile(
    r"^(?:我要|我想|想问|问一下|问下|帮我|请|麻烦|我需要|能不能|可以|可不可以|怎么|为什么|查|投诉|退|换|办理|咨询|"
    r"还有|另外|我有|我还有|有没有|是否)|[吗？?][。.！!]*$"
)
_REQUEST_EN = re.compile(
    r"^(?:I want|I'?d like|I need|can you|could you|would you|please|let'?s|how|what|why|when|where|who|is there|"
    r"are there|do you|does|I have|tell me|check|complain|cancel|help|I'?m (?:calling|writing|here) about)"
    r"|\?[.!]*$",
    re.IGNORECASE,
)
_GOODBYE = re.compile(
    r"^(?:谢谢|多谢|感谢|再见|拜拜|好的|好|没事了?|没有了|就这样吧?|算了|不用了|"
    r"thanks?(?: you)?|thank you|bye|goodbye|ok(?:ay)?|that'?s all|no thanks|all good|cheers)"
    r"(?:[" + _PUNCT + r"]*(?:谢谢|再见|拜拜|了|啦|哈|啊|呀|thanks|bye))*[" + _PUNCT + r"]*$",
    re.IGNORECASE,
)
_LEAD_IN = re.compile(
    r"^(?:(?:那|那么|so|and|but|now|then)(?![A-Za-z])[\s,，]*)?"
    r"(?:我?还?有(?:一|另一|另外一)?个问题|(?:I have )?(?:another|one more) question)?[\s,，:：]*"
    r"(?:我想问(?:一下|下)?|想问(?:一下|下)?|问一下|问下|我要|我想|我需要|"
    r"I(?:'d| would) like to (?:ask about |talk about )?|I want to (?:ask about |talk about )?|I need to |"
    r"let'?s talk about |can you |could you |please )?",
    re.IGNORECASE,
)


def _remainder(text: str, position: int) -> str:
    """What follows a marker, without the punctuation that separates it (trailing 「？」 is kept: it is a question)."""
    return text[position:].lstrip(_PUNCT.replace("\\s", "") + " \t\n").rstrip()


def _is_request(remainder: str) -> bool:
    if not remainder or _GOODBYE.match(remainder):
        return False
    return bool(_REQUEST_ZH.search(remainder) or _REQUEST_EN.search(remainder))


def _topic(remainder: str) -> str:
    first = re.split(r"[。.！!？?；;\n]", remainder, maxsplit=1)[0].strip()
    topic = _LEAD_IN.sub("", first).strip(" ，,：:")
    return compress(topic, limit=TOPIC_LIMIT) if topic else ""


def _same_topic(new_topic: str, previous: str | None) -> bool:
    if not previous or not new_topic:
        return False
    a, b = new_topic.lower(), previous.lower()
    return a in b or b in a


def detect_topic_switch(text: str, *, previous_topic: str | None = None) -> TopicSwitch | None:
    """Return the explicit topic switch in ``text``, or ``None``.

    ``new_topic`` is the new request without its lead-in (「我要投诉客服」 → 「投诉客服」), compressed to at most 60
    characters; ``""`` when the user announced a switch without saying to what yet. When ``previous_topic`` is
    given and the "new" topic is the same matter (one contains the other), there is no switch.
    """
    stripped = text.strip()
    if not stripped:
        return None
    for pattern, lang in ((_DISMISS_ZH, "zh"), (_DISMISS_EN, "en")):
        for match in pattern.finditer(stripped):
            remainder = _remainder(stripped, match.end())
            if not _is_request(remainder):
                continue
            new_topic = _topic(remainder)
            if _same_topic(new_topic, previous_topic):
                return None
            old = (match.group("old") or match.group("old2") or previous_topic or "").strip(" ，,")
            marker = match.group(0).strip()
            reason = (
                f"dismissed {old!r} ({marker!r}) and asked for {new_topic!r}"
                if old
                else (f"dismissal {marker!r} followed by a new request {new_topic!r}")
            )
            return TopicSwitch(new_topic, f"{lang}: {reason}")
    for pattern, lang in ((_ANNOUNCE_ZH, "zh"), (_ANNOUNCE_EN, "en")):
        match = pattern.search(stripped)
        if match:
            remainder = _remainder(stripped, match.end())
            new_topic = _topic(remainder) if remainder and not _GOODBYE.match(remainder) else ""
            if _same_topic(new_topic, previous_topic):
                return None
            return TopicSwitch(new_topic, f"{lang}: announced a new topic ({match.group(0)!r})")
    return None
