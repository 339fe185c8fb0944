"""Topic-switch detection (S10): when it fires, the runtime inserts ``<|context_reset|>`` and freezes the old
topic's ``session_state`` memories (``memory.topics.freeze``).

A reset tells the model to drop the earlier conversation, so a false one costs more than a missed one: a switch
needs evidence of a new matter, not only distance from the current topic's text. The evidence, strongest first:

1. **Explicit phrases** (:func:`detect_topic_switch`, the fast path, no model): a dismissal of the old matter
   followed by a new request — 「账单的事先不说了，我要投诉客服」, "forget the bill, I want to complain about …"; an
   announcement of a new topic — 「换个话题」, "another question:". A dismissal with no new request is a goodbye,
   not a switch: 「不说了，谢谢」, "never mind, thanks".
2. **An explicit return** (:func:`detect_topic_return`): 「回到刚才账单的问题」, "back to the billing question".
3. **A new domain** (:func:`judge_message`): the message's domain (``memory.topics.domains``, nearest examples
   from data) differs from the topic's and the message names it — bill → complaint, hotel → taxi. Words of the same
   domain, elliptical follow-ups (「那10月的呢？」), pointers back (「这笔」, "that one") and answers to the agent's
   question never switch.
4. **Distance alone** (similarity to the topic's first and latest message below ``SHIFT_THRESHOLDS``) is only a
   *maybe*: nothing is frozen until the next message confirms it (:func:`confirms_switch`), so a drift to a new
   matter resets once, on its second message.

Everything here is pure: vectors come in as arguments (``memory.topics.freeze`` embeds and stores).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memory.embeddings.models import DEFAULT_MODEL, USE_MODEL
from memory.text.compression import compress

__all__ = [
    "TopicSwitch",
    "Verdict",
    "asks_a_question",
    "confirms_switch",
    "detect_topic_return",
    "detect_topic_switch",
    "is_brief",
    "is_follow_up",
    "judge_message",
    "model_reads",
    "new_topic_of",
    "points_back",
    "shift_applies",
    "topic_similarity",
]

TOPIC_LIMIT = 60

#: Below this cosine similarity to every vector of the current topic, a message is on another topic. Per model:
#: vectors of different models are not comparable. Chosen on bench/data/topic_switch_labels.json
#: (bench/quality/topic_switch.py prints precision and recall); a model without a threshold never detects a shift.
SHIFT_THRESHOLDS: dict[str, float] = {USE_MODEL: 0.30, DEFAULT_MODEL: 0.25}
#: A shifted message at least this close to a frozen topic returns to it instead of opening a new one.
RETURN_THRESHOLD = 0.5
#: Without domains, a message confirms a possible switch only when at least this close to the message that made it.
CONFIRM_SIMILARITY = 0.5
#: MiniLM reads English only: a Chinese message's vector says nothing (memory/embeddings/minilm.py).
_ENGLISH_ONLY = frozenset({DEFAULT_MODEL})


@dataclass(frozen=True)
class TopicSwitch:
    """A detected switch. ``new_topic`` is the user's new request, or ``""`` when not said yet (「换个话题」).

    ``kind``: ``"phrase"`` (an explicit phrase), ``"shift"`` (the intent moved) or ``"return"`` (back to a frozen
    topic, ``frozen_id`` names which). ``memory.topics.freeze`` fills ``frozen_as`` (the record the topic left
    was frozen into) and, for a return, ``tool_context`` (the returning topic's frozen tool call, or ``None``).
    """

    new_topic: str
    reason: str
    kind: str = "phrase"
    frozen_id: str = ""
    frozen_as: str = ""
    tool_context: dict[str, Any] | None = None


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


# --- returns and follow-ups --------------------------------------------------

_RETURN_ZH = re.compile(
    r"(?:回到|回去|说回|再说回|接着说|继续说|继续聊|接着聊|再聊回|还是说)(?:刚才|之前|前面|刚刚|上面|一开始)?(?:的|说的|那个)?"
    r"(?P<what>[^，,。.；;！!？?]{0,12}?)(?:的)?(?:问题|事情?|那件事|话题)"
)
_RETURN_EN = re.compile(
    r"(?<![A-Za-z])(?:(?:go(?:ing)?|get(?:ting)?|come|coming) )?back to (?:the |my |our |that |your )?"
    r"(?:earlier |previous |first )?(?P<what>[\w -]{0,30}?)\s*(?:question|issue|topic|thing|matter|problem)"
    r"(?![A-Za-z])",
    re.IGNORECASE,
)
_FOLLOW_UP = re.compile(
    r"^(?:那|那么|还有|那如果|如果)?[^，,。.；;！!？?]{0,10}呢[？?。.！!]*$"
    r"|^(?:what|how) about\b|^and (?:the|what|how|if|when)\b|^(?:also|plus),? (?:the|what|how)\b",
    re.IGNORECASE,
)
# A message that points back at what was just said (「这笔」, "is it…", "a fee for that") is about the same matter.
_ANAPHORA = re.compile(
    r"[这那](?:笔|件|单|样|个(?!月|星期|礼拜|季度|年))|它"
    r"|(?<![A-Za-z])(?:it|that|this|these|those|them|there)(?![A-Za-z'])(?!\s+(?:is|are)\s+(?:a|an|my)\b)",
    re.IGNORECASE,
)
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_WORD = re.compile(r"[A-Za-z0-9]+")
#: Shorter than this says too little for its vector to mean a new topic (「嗯嗯」, 「在吗」, "ok sure").
_MIN_CJK, _MIN_WORDS = 4, 3


def detect_topic_return(text: str) -> str | None:
    """The topic an explicit return names (「回到刚才账单的问题」 → 「账单」, "back to the billing question" →
    "billing"), ``""`` when it names none (「回到刚才的问题」), ``None`` when ``text`` is no return."""
    for pattern in (_RETURN_ZH, _RETURN_EN):
        match = pattern.search(text)
        if match:
            return re.sub(r"^(?:刚才|之前|前面|刚刚|的)+", "", match.group("what")).strip(" 的")
    return None


def is_brief(text: str) -> bool:
    """Whether ``text`` is an acknowledgement, too short to mean anything alone, or an elliptical follow-up
    (「那运费呢」, "what about the fee?"): it continues the topic, and its vector says nothing of a matter."""
    stripped = text.strip()
    if not stripped or _GOODBYE.match(stripped) or _FOLLOW_UP.search(stripped):
        return True
    cjk = len(_CJK.findall(stripped))
    return cjk < _MIN_CJK if cjk else len(_WORD.findall(stripped)) < _MIN_WORDS


def points_back(text: str) -> bool:
    """Whether ``text`` points back at what was said (「这笔」, "is it still…"). Weaker than a domain it names:
    "a taxi from there to the restaurant" still leaves the hotel."""
    return bool(_ANAPHORA.search(text))


def is_follow_up(text: str) -> bool:
    """Whether ``text`` is brief (:func:`is_brief`) or points back at what was said (:func:`points_back`): without
    a new domain named, such a message continues the topic, whatever its vector says."""
    return is_brief(text) or points_back(text)


def pack_vector(vector: Any) -> str:
    """A topic vector as it is kept in the session's record: base64 of little-endian float16. A float16 keeps a
    unit vector's components to about 1e-5 (the similarity thresholds are two decimals), and a record of two
    such strings is a third the size of the same vectors as JSON numbers, which PostgreSQL parses one by one
    on every turn's update of the record."""
    return base64.b64encode(np.asarray(vector, dtype="<f2").tobytes()).decode("ascii")


def unpack_vectors(values: Sequence[Any]) -> np.ndarray:
    """The topic vectors of a record as a float32 matrix: ``pack_vector`` strings, or lists of numbers (records
    written before the packed form). A value neither can read (a hand-edited record) is left out."""
    rows = []
    for value in values:
        try:
            if isinstance(value, str):
                rows.append(np.frombuffer(base64.b64decode(value, validate=True), dtype="<f2").astype(np.float32))
            else:
                rows.append(np.asarray(value, dtype=np.float32))
        except (binascii.Error, ValueError, TypeError):
            continue
    sizes = {row.shape for row in rows}
    if not rows or len(sizes) != 1 or rows[0].ndim != 1:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack(rows)


def topic_similarity(vector: Any, topic_vectors: Sequence[Any]) -> float:
    """The highest cosine similarity of ``vector`` to the topic's unit vectors (packed or lists; ``-1.0`` for
    none, or for vectors of another size)."""
    matrix = unpack_vectors(topic_vectors)
    query = np.asarray(vector, dtype=np.float32)
    if not matrix.size or matrix.shape[1] != query.shape[-1]:
        return -1.0
    return float(np.max(matrix @ query))


def model_reads(text: str, model: str) -> bool:
    """Whether ``model`` has a shift threshold and reads ``text`` (MiniLM reads no Chinese)."""
    return model in SHIFT_THRESHOLDS and not (model in _ENGLISH_ONLY and _CJK.search(text))


def shift_applies(text: str, model: str) -> bool:
    """Whether the embedding check may run on ``text`` with ``model``: a model that reads it, and a message that
    is not brief (:func:`is_brief`)."""
    return model_reads(text, model) and not is_brief(text)


_QUESTION_END = re.compile(r"(?:[?？]|[吗呢么嘛][。.！!～~]*)\s*$")


def asks_a_question(text: str) -> bool:
    """Whether the agent's message ``text`` ends by asking something (「请问几位入住？」, "For how many nights?"):
    the customer's next message answers it, whatever its vector says."""
    return bool(_QUESTION_END.search(text.strip()))


@dataclass(frozen=True)
class Verdict:
    """What a message shows about the current topic: ``"stay"``, ``"switch"`` (evidence of a new matter) or
    ``"maybe"`` (far from the topic, no domain evidence: the next message must confirm it)."""

    outcome: str
    reason: str


def judge_message(
    text: str,
    *,
    similarity: float | None,
    model: str,
    domain: str | None,
    topic_domains: Sequence[str],
    named: Sequence[str] = (),
    frozen_domains: Sequence[str] = (),
    topic_likely: Sequence[str] = (),
    after_question: bool = False,
) -> Verdict:
    """Whether ``text`` leaves the current topic, from the evidence in order of strength:

    1. a brief follow-up (:func:`is_brief`: an acknowledgement, an elliptical question) stays;
    2. the message's domain (``domain``, ``memory.topics.domains``): the topic's own domain stays — 「景点的电话是多少」
       is still about the sight; a domain the message also names (``named``: a word the examples tie to that
       domain) is a switch ("I need a taxi from the hotel" leaves the hotel), or a return when a frozen topic had
       it (``frozen_domains``); a domain it does not name ("what is the postcode?" names no matter of its own)
       widens a topic it is close to;
    3. without that evidence, a message that points back at what was said (:func:`points_back`) or answers the
       agent's question (``after_question``) stays;
    4. a message further than the model's threshold (``similarity`` to the topic's vectors) is only a *maybe*:
       distance alone never resets; a second message on the new matter confirms it (:func:`confirms_switch`,
       applied by ``memory.topics.freeze``).
    """
    if is_brief(text):
        return Verdict("stay", "brief follow-up")
    threshold = SHIFT_THRESHOLDS.get(model)
    far = similarity is not None and threshold is not None and similarity < threshold
    if domain and domain in topic_domains:
        return Verdict("stay", f"same domain {domain!r}")
    if domain and topic_domains and domain in frozen_domains and domain in named:
        return Verdict("return", f"back to a frozen topic's domain {domain!r}")
    if domain and topic_domains and domain in named:
        return Verdict("switch", f"domain {'/'.join(topic_domains)!r} → {domain!r}, named")
    if domain and not topic_domains and topic_likely and domain not in topic_likely and domain in named and far:
        return Verdict("switch", f"likely domain {'/'.join(topic_likely)!r} → {domain!r}, named and far")
    if domain and not far:
        return Verdict("stay", f"the topic widens to {domain!r}")
    if points_back(text):
        return Verdict("stay", "points back at what was said")
    if after_question:
        return Verdict("stay", "answers the agent's question")
    if not far:
        return Verdict("stay", "close to the topic" if similarity is not None else "no vector")
    return Verdict("maybe", f"similarity {similarity:.2f} < {threshold:.2f}, domain {domain or 'unknown'!r}")


def confirms_switch(
    *,
    domain: str | None,
    pending_domain: str | None,
    topic_domains: Sequence[str],
    similarity_old: float | None,
    similarity_pending: float | None,
    model: str,
) -> bool:
    """Whether a message after a *maybe* confirms the switch: it is on the pending message's matter and not on
    the old topic's — its domain is the pending one's (and not the topic's), or, without domains, it is far from
    the topic and closer to the pending message than to the topic."""
    if domain and domain in topic_domains:
        return False
    if domain and pending_domain:
        return domain == pending_domain
    threshold = SHIFT_THRESHOLDS.get(model)
    if similarity_old is None or similarity_pending is None or threshold is None:
        return False
    return similarity_old < threshold and similarity_pending > max(similarity_old, CONFIRM_SIMILARITY)


def new_topic_of(text: str) -> str:
    """The topic a message opens: the message without its lead-in, compressed."""
    return _topic(text.strip())
