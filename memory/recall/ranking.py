"""The rerank's weights: what multiplies a candidate's fused rank and relevance score — an identifier the query
quotes, a value of the attribute the query names, a question unit's lower weight, recency for a question about the
present, care for a negative mood."""

from __future__ import annotations

import re
from typing import Any

from memory.conversation.claims import names_a_label
from memory.conversation.terms import asks_a_value_zh, attributes_stated
from memory.conversation.units import is_conversation_key, squash
from memory.models import MemoryUnit
from memory.recall.candidates import RecallHit
from memory.recall.tuning import tuning
from memory.text.language import has_cjk
from memory.text.mood import Mood, care_reason
from memory.topics.domains import named_domains
from memory.topics.values import asked_attributes

#: An identifier a customer may quote (BATCH-2031, DD20231128457, HT2405010288): letters and digits, or a
#: long run of digits.
_IDENTIFIER = re.compile(
    r"(?<![A-Za-z0-9])(?:(?=[A-Za-z0-9-]*\d)(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9-]{3,}|\d{8,})(?![A-Za-z0-9])"
)


def query_identifiers(query: str) -> list[str]:
    """The identifiers ``query`` quotes, squashed as ``memory.conversation.units.squash`` does (「BATCH-2031 导完了吗」
    → ``["batch2031"]``)."""
    return [squash(m) for m in _IDENTIFIER.findall(query)]


def names_any(memory: MemoryUnit, identifiers: list[str]) -> bool:
    squashed = squash(memory.content)
    return any(i in squashed for i in identifiers)


#: Words of a question about the present state of things: the newest statement is likeliest to hold.
_ABOUT_NOW = re.compile(
    r"现在|目前|当前|最新|最后|最终|如今|改成|改到|换成|调整|更新|还是"
    r"|(?i:\b(?:now|currently|current|latest|most recent|at the moment|these days|still|final|anymore)\b)"
)


#: Words of a question about how things were before: the answer is the earlier statement, superseded or not.
_ABOUT_PAST = re.compile(
    r"最早|最初|之前|以前|原来|原先|当初|起初|一开始|第一次|旧的|老的|"
    r"(?i:\b(?:originally|at first|used to|previous(?:ly)?|before|earlier|first|old|former(?:ly)?)\b)"
)


def about_past(query: str) -> bool:
    """Whether ``query`` asks how things were before (「我最早那个套餐」, "what was my original booking")."""
    return bool(_ABOUT_PAST.search(query))


def about_now(query: str) -> bool:
    """Whether ``query`` asks how things stand now (「现在」, 「最后」, "currently")."""
    return bool(_ABOUT_NOW.search(query))


def care_lift(mood: Mood | None, memory: MemoryUnit) -> float:
    """1 + ``mood_care_lift`` x the mood's score for a care memory when the query is negative, else 1."""
    if mood is None or not mood.negative or care_reason(memory.key, memory.content) is None:
        return 1.0
    return 1 + max(0.0, float(tuning().mood_care_lift)) * mood.score


def rerank_weights(query: str, hits: list[RecallHit], mood: Mood | None = None) -> dict[Any, float]:
    """Per candidate, what multiplies its fused rank and relevance score: a question unit weighs
    ``question_weight``; one naming an identifier the query quotes 1 + ``identifier_weight``; one giving a value of
    an attribute the query names (``memory.topics.values.asked_attributes``) 1 + ``asked_value_weight``, else one
    giving a value under a label a Chinese query asking for a value names (「评分是多少」, ``claims.names_label``) 1 +
    ``labelled_value_weight``; for a query
    about the present, the candidates' recency (newest 1, oldest 0) adds up to ``recency_weight``; for a
    negative ``mood``, a care memory's lift (``care_lift``)."""
    knobs = tuning()
    weights = {}
    order = sorted(hits, key=lambda h: h.memory.created_at)
    # Units said at the same moment (one message's) share its recency: the mean of their places, so that
    # which of them ranks first never depends on their random ids.
    places: dict[Any, list[int]] = {}
    for i, hit in enumerate(order):
        places.setdefault(hit.memory.created_at, []).append(i)
    recent = {
        h.memory.pk: sum(places[h.memory.created_at]) / len(places[h.memory.created_at]) / max(1, len(order) - 1)
        for h in order
    }
    now = about_now(query)
    identifiers = query_identifiers(query)
    value_weight = float(knobs.asked_value_weight)
    asked = asked_attributes(query, named_domains(query)) if value_weight else frozenset()
    # A question asking for a value (an interrogative pronoun): 「退款到账了吗」 names 退款 and asks for none.
    label_weight = float(knobs.labelled_value_weight) if has_cjk(query) and asks_a_value_zh(query) else 0.0
    for hit in hits:
        weight = 1.0
        if asked and attributes_stated(hit.memory.content, asked):
            weight *= 1 + value_weight
        elif label_weight and names_a_label(query, hit.memory.content):
            weight *= 1 + label_weight
        if identifiers and names_any(hit.memory, identifiers):
            weight *= 1 + float(knobs.identifier_weight)
        if is_question_unit(hit.memory):
            weight *= float(knobs.question_weight)
        if now:
            weight *= 1 + float(knobs.recency_weight) * recent[hit.memory.pk]
        weights[hit.memory.pk] = weight * care_lift(mood, hit.memory)
    return weights


def is_question_unit(memory: MemoryUnit) -> bool:
    return is_conversation_key(memory.key) and bool((memory.data or {}).get("question"))


def weighted_score(hit: RecallHit, weights: dict[Any, float]) -> float:
    return hit.fused * hit.memory.relevance_score * weights.get(hit.memory.pk, 1.0)
