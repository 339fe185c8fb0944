"""Recall's tuning knobs: a typed, frozen :class:`RecallTuning`, its defaults, and the deployment's overrides
(``settings.MEMDESK_RECALL``) checked like input.

A deployment changes a knob by naming it in ``MEMDESK_RECALL``; a name that is not a knob, or a value of the
wrong type, raises :class:`~django.core.exceptions.ImproperlyConfigured` naming it, at start
(``memory.apps.MemoryConfig.ready``): a misspelt knob never silently leaves the default in force.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Literal, get_args

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

StaleScope = Literal["topic", "any"]


@dataclasses.dataclass(frozen=True)
class RecallTuning:
    """``rrf_k`` chosen on LoCoMo (bench/quality/locomo_recall.py, grid on half the conversations, checked on the
    other half): 10 beat 60. ``w_lexical`` 2.0 and ``request_answer_weight`` chosen on the fit half of MultiWOZ
    (bench/quality/woz_facts.py) and checked on LoCoMo and our Chinese set through the chat path, where equal
    weights had been chosen before the conversation units carried their context; bench/RESULTS.md has the
    figures."""

    w_vector: float = 1.0
    #: The lexical leg's weight in the fusion: twice the vector leg's. MiniLM ranks any sentence about trains
    #: near a question about a train; the route, the day and the id are the lexical leg's.
    w_lexical: float = 2.0
    rrf_k: int = 10
    #: Rows each leg hands to the fusion. 100 rather than 50: a memory ranked moderately by both legs makes the
    #: fused top 10 more often — through the chat path on LoCoMo, on each half of the conversations
    #: (bench/RESULTS.md).
    candidates: int = 100
    #: Both legs read the end user's newest rows valid at ``as_of``, at most this many (the window; see
    #: "Long histories" in docs/memory.md); the lexical leg also searches older rows for rare words.
    vector_window: int = 2000
    #: Past the window, the lexical leg searches the whole history (through the GIN index) for the query
    #: words found in at most this share of the window's rows: a word common in the window weighs little in
    #: BM25 and would make the search read thousands of older rows; 1.0, every word (docs/memory.md, "Long
    #: histories", has the trade-off).
    rare_share: float = 0.05
    #: A conversation unit that asks (``data["question"]``) weighs this much of a statement in the rerank.
    question_weight: float = 0.5
    #: A customer's statement found by the query brings the agent's reply to it (what it asked for: "I need a
    #: train from Ely to Cambridge on Saturday" → "TR1036 leaves at 14:36"), ranked as the statement would
    #: be times this; 0 turns it off (questions always bring their answers).
    request_answer_weight: float = 1.1
    #: A query asking for an attribute of the value vocabulary by its name ("what kind of food", 「哪道菜」:
    #: ``memory.topics.values.asked_attributes``) weighs a candidate giving a value of it 1 + this: "Yes, can we try
    #: the south?" answers "which area did I want", though it shares none of its words. 0 turns it off.
    asked_value_weight: float = 0.5
    #: A Chinese query naming the label of a candidate's value (「评分是多少」 and 「评分是4.5分以上」:
    #: ``claims.names_label``) weighs that candidate 1 + this. 0 turns it off.
    labelled_value_weight: float = 0.5
    #: A query about the present (「现在」, "currently") lifts newer candidates: the newest by this share.
    recency_weight: float = 1.0
    #: A candidate naming an identifier the query quotes (BATCH-2031, an order number) weighs 1 + this.
    identifier_weight: float = 1.0
    #: A newer unit that changes or corrects something (``data["update"]``) overtakes an older candidate
    #: unit at least this similar (cosine, same model); for a query about the present any newer unit at
    #: least ``now_similarity`` similar does. An overtaken unit stays just below the unit that overtook it (see
    #: ``overtaken_last``).
    update_similarity: float = 0.3
    now_similarity: float = 0.35
    #: Where an overtaken unit goes: False, just after the unit that overtook it; True, after every current hit
    #: (only those a unit saying it changes something overtook, and only with ``marked_last`` off).
    overtaken_last: bool = False
    #: A unit marked no longer current for the question (overtaken and shown about the same thing, or answered
    #: anew) follows every current hit, unless the question asks about the past. Off: it keeps its place. On since
    #: likeness alone stopped marking what changes nothing (``alike_needs_change``, ``update_needs_value``): before,
    #: LoCoMo's chat lost answers marked by a newer remark and R@10 fell below 0.70 (bench/RESULTS.md).
    marked_last: bool = True
    #: An overtaken unit is marked no longer current (the API's ``current``, the prompt's "no longer current") when
    #: the unit that overtook it is at least this similar, or is shown to be about the same thing by the values
    #: and words the two share (``currency._same_thing``). 0: every overtaken unit is marked.
    overtaken_mark_similarity: float = 0.55
    #: Likeness alone marks an overtaken unit only when the unit that overtook it says it changes something
    #: (``data["update"]``) or gives an attribute both give another value: two alike remarks, the newer merely
    #: newer ("Wow, that painting's amazing!", then "That's stunning! What made you paint it?"), leave the older
    #: current. False: likeness alone marks.
    alike_needs_change: bool = True
    #: With ``alike_needs_change``, a newer unit saying it changes something counts only where it gives a value or
    #: names what it replaces: "it changed the game for me", "coconut milk instead" change no value.
    update_needs_value: bool = True
    #: An overtaken unit is also marked when the form of the unit that overtook it says it changes it: a number
    #: respelt with one slip fixed, the act it awaited done, another named state, its validity ended
    #: (``supersede.changes_in_form``). False: only the likeness, values and words of ``_same_thing``.
    overtaken_in_form: bool = True
    #: An overtaken unit every value of which the unit that overtook it gives again is not marked for their likeness
    #: alone: a confirmation of what it said ("No, it's 3 bedrooms", then "I've updated it to 3 bedrooms").
    restated_current: bool = True
    #: An overtaken unit shown changed by a value (one replaced, said to be wrong, or one value to another) is marked
    #: only when the clause of it the question's words find best holds that value: the rest of it is as true as it
    #: was. False: marked whole.
    mark_asked_part: bool = True
    #: A customer's question proposing a value the agent's reply in the same turn did not keep (said it wrong or
    #: expired, or gave another of its kind: 「还是6800吧？」, 「现在是7200元」) is marked no longer current, unless the
    #: question asks about the past, and follows the reply where both are among the hits
    #: (``currency.answered_otherwise``). Off by default: chosen on the fit halves, it marks nothing on the blind
    #: report halves and CrossWOZ's, and one answer on MultiWOZ's (bench/RESULTS.md). Off, a question and its reply
    #: share a moment and neither overtakes.
    answered_otherwise: bool = False
    #: For a question asking for an attribute (``claims.asked_attrs``), an older candidate unit giving it a value
    #: that a newer one of the same conversation, at least this similar, gives another value is stale for the
    #: question and ranks after every current hit (``currency.answered_anew``, where the other conditions are).
    #: Above 1: off. 0.25 to 0.35 mark the same units on the fit halves; the conditions, not the similarity,
    #: decide (bench/RESULTS.md).
    asked_similarity: float = 0.35
    #: A newer unit that gives an asked attribute the older's one value and one other ("由300M改为500M", "from 10 to
    #: 12 panels") answers anew for it, in another conversation too: the old value said again links the two
    #: (``currency.answered_anew``). False: only another value, in one conversation or under one identifier.
    anew_from_to: bool = True
    #: Which conversation units stating a value that is no longer current rank after the current hits:
    #: "topic", those whose out-of-date value the query asks about (``memory.conversation.units.KEY_TOPICS``);
    #: "any", every one, whatever the query asks.
    stale_scope: StaleScope = "topic"
    #: A unit that keys nothing but says again a value the customer's keyed fact once held and no longer holds (the
    #: agent's 「结果会发到hejing.work@…」 after the default e-mail changed) is stale for a question about that key
    #: (``currency.ECHOED_KEYS``). False: only units that key the value.
    echoed_stale: bool = True
    min_similarity: float = 0.2
    #: When the query's mood is negative (``memory.text.mood``), a care memory (a promised callback, a coupon or
    #: compensation given, a complaint on record) weighs up to 1 + this in the rerank, scaled by the mood's
    #: score: for that turn only, stored scores untouched. 0 turns it off (docs/memory-intelligence.md).
    mood_care_lift: float = 1.0
    #: BM25's term frequency of a query term found only in a memory's context (its message and the one it
    #: answers), and only in the turns around it (a conversation unit's earlier exchanges), against 2 for a
    #: term of its own text: the context finds a memory, its own words decide among those found.
    context_tf: float = 1.0
    around_tf: float = 1.0
    bm25_k1: float = 1.2
    bm25_b: float = 0.75
    #: A query the intent table leaves alone is classified by its embedding against labelled intent examples
    #: and rewritten when one is near enough (``memory.recall.rewrite.rewrite_and_embed``;
    #: docs/memory-intelligence.md). False: the table alone.
    intent_embedding: bool = True

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, Any], *, source: str = "MEMDESK_RECALL") -> RecallTuning:
        """The defaults with ``overrides`` applied, each checked: an unknown name or a value of the wrong type
        raises ``ImproperlyConfigured`` naming it (and, for a misspelling, the knobs there are)."""
        if not isinstance(overrides, Mapping):
            raise ImproperlyConfigured(
                f"{source} must be a dict of knob names to values, not {type(overrides).__name__}"
            )
        known = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(str(name) for name in overrides if name not in known)
        if unknown:
            raise ImproperlyConfigured(
                f"{source}: unknown knob{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                f"the knobs are {', '.join(known)} (memory/recall/tuning.py)"
            )
        return cls(**{name: _checked(source, name, str(known[name].type), value) for name, value in overrides.items()})


def _checked(source: str, name: str, kind: str, value: Any) -> Any:
    """``value`` as the knob's type ``kind`` (the field's type as source text, ``from __future__ import
    annotations``): an int is a float too, nothing else converts (a string "10" is refused)."""
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "float" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if kind == "StaleScope" and value in get_args(StaleScope):
        return value
    expected = {
        "bool": "true or false",
        "int": "an integer",
        "float": "a number",
        "StaleScope": " or ".join(map(repr, get_args(StaleScope))),
    }.get(kind, kind)
    raise ImproperlyConfigured(f"{source}[{name!r}] must be {expected}, not {value!r}")


DEFAULT_TUNING = RecallTuning()


def tuning() -> RecallTuning:
    """The knobs in force: the defaults with ``settings.MEMDESK_RECALL`` applied (read each call, so a test's
    ``settings`` override applies; built once per distinct override)."""
    overrides = settings.MEMDESK_RECALL
    try:
        key = tuple(sorted(overrides.items()))
        hash(key)
    except (AttributeError, TypeError):
        return RecallTuning.from_overrides(overrides)  # raises with the reason
    return _cached(key)


@lru_cache(maxsize=16)
def _cached(items: tuple[tuple[str, Any], ...]) -> RecallTuning:
    return RecallTuning.from_overrides(dict(items))
