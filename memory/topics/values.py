"""Which attribute a word is a value of: the vocabulary of values that labelled dialogue states give each attribute.

Word vectors place co-hyponyms no nearer each other than the matter's own words: "college" and "museum" (two
kinds of attraction), "scottish" and "italian" (two cuisines), "expensive" and "moderate" (two price levels) are
less alike by single-word vectors than "restaurant" and "food". A labelled corpus knows better: its dialogue
states give each attribute the values customers chose for it. Two words that are values of one attribute fill one
slot: a customer who asked for a college and then says "how about a museum?" has changed the kind of attraction.

The vocabulary (``data/woz_values.json``) is the values of MultiWOZ 2.1's belief states in its validation split's
**fit half** (``bench/quality/value_vocabulary_build.py``): food, attraction and lodging types, areas, price ranges
and train stations; and CrossWOZ's fit half's hotel facilities, hotel types and dishes with those its venue
database offers (the catalogue a tenant would have: what a customer can ask for, whichever dialogue asks), found
in a Chinese text by the value itself (``zh_values_in``: rjieba cuts 「公共区域提供wifi」 and 「京味爆肚」 unlike any
frame), between its words and outside the catalogue's venue names.

A value's word has other senses outside its slot: "German" is a cuisine in "german food" and a language in "I'm
learning German". The fit half also gives each attribute the words customers say along with a new value of it
(``senses``: "food", "serves", "restaurant" for a cuisine; "train", "leaving", "arrive" for a station), words said
with it far more often than in the customer's turns at large (``senses_of``). A value is read in its attribute's
sense only in words that say one of them, or in a statement whose own matter is a domain the attribute is a
slot of (``attributes_in``: "Is there something like a museum?" is an attraction's, whatever its words).

An English word that is a whole value belongs to that value's attribute ("north": an area, though "north american"
is food); any other word of a value, to the one attribute whose values hold it ("sports" of "multiple sports"). A
word two attributes claim alike belongs to neither, for it tells no slot; function words (sumy's English stop
words: "the", "new") belong to none.

An attribute's name ends in the word a question names it by ("food", "price range", 「推荐菜」): ``asked_attributes``
reads which attributes a question asks for, and ``attribute_names`` are the English ones, which name a slot and
are never a choice.
"""

from __future__ import annotations

import json
import re
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from memory.text import cut
from memory.text.language import stop_words

__all__ = [
    "asked_attributes",
    "attribute_names",
    "attributes_in",
    "attributes_of",
    "senses",
    "senses_of",
    "vocabulary",
    "vocabulary_of",
    "zh_values_in",
]

DATA = Path(__file__).with_name("data") / "woz_values.json"
_WORD = re.compile(r"[a-z][a-z'-]*[a-z]")


@cache
def _data() -> dict[str, Any]:
    """The shipped vocabulary file, read once per process."""
    return json.loads(DATA.read_text(encoding="utf-8"))


@cache
def vocabulary() -> dict[str, str]:
    """Each word of the shipped values → the one attribute it belongs to (lower-cased)."""
    return vocabulary_of(_data()["attributes"])


def vocabulary_of(attributes: dict[str, list[str]]) -> dict[str, str]:
    """Each word of ``attributes``' values (attribute → its values) → the one attribute it belongs to: a whole
    value's, else the one whose values hold it; words two attributes claim alike, function words and words of
    fewer than three letters left out."""
    stop = stop_words("en")
    whole: dict[str, set[str]] = {}
    part: dict[str, set[str]] = {}
    for attribute, values in attributes.items():
        for value in values:
            words = _WORD.findall(value.lower())
            for word in words:
                (whole if len(words) == 1 else part).setdefault(word, set()).add(attribute)
    out = {w: next(iter(a)) for w, a in part.items() if len(a) == 1 and w not in whole}
    out.update({w: next(iter(a)) for w, a in whole.items() if len(a) == 1})
    return {w: a for w, a in out.items() if w not in stop and len(w) >= 3}


#: A word is a sense word of an attribute when it was said with at least this many of the attribute's new values …
SENSE_COUNT = 5
#: … and this many times more often than in the customer's turns at large.
SENSE_LIFT = 2.0


def senses_of(turns: list[tuple[str, frozenset[str]]], vocabulary: dict[str, str]) -> dict[str, list[str]]:
    """Each attribute's sense words from labelled customer turns: ``turns`` is each turn's text with the
    attributes it gave a new value, said in its words. A sense word is said in at least ``SENSE_COUNT`` of the
    turns that state the attribute, ``SENSE_LIFT`` times as often there as in all the turns; no function word, no
    word of the vocabulary, nothing shorter than three letters."""
    stop = stop_words("en")
    everywhere: dict[str, int] = {}
    stating: dict[str, dict[str, int]] = {}
    counts: dict[str, int] = {}
    for text, attributes in turns:
        words = {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in stop and w not in vocabulary}
        for word in words:
            everywhere[word] = everywhere.get(word, 0) + 1
        for attribute in attributes:
            counts[attribute] = counts.get(attribute, 0) + 1
            said = stating.setdefault(attribute, {})
            for word in words:
                said[word] = said.get(word, 0) + 1
    out = {}
    for attribute, said in stating.items():
        out[attribute] = sorted(
            w
            for w, n in said.items()
            if n >= SENSE_COUNT and (n / counts[attribute]) / (everywhere[w] / len(turns)) >= SENSE_LIFT
        )
    return out


@cache
def senses() -> dict[str, frozenset[str]]:
    """Each attribute → the words that say a value of it is meant in its sense (the shipped ``senses_of``)."""
    data = _data()
    return {a: frozenset(words) for a, words in data.get("senses", {}).items()}


@cache
def _domains() -> dict[str, frozenset[str]]:
    data = _data()
    out: dict[str, set[str]] = {}
    for attribute, domains in data.get("domains", {}).items():
        for domain in domains:
            out.setdefault(domain, set()).add(attribute)
    return {d: frozenset(a) for d, a in out.items()}


def attributes_in(domain: str | None) -> frozenset[str]:
    """The attributes that are slots of ``domain`` (``memory.topics.domains``: "restaurant" → food, area, price
    range); none for ``None`` or a domain the vocabulary has no slot of."""
    return _domains().get(domain, frozenset()) if domain else frozenset()


def attributes_of(word: str) -> str | None:
    """The attribute ``word`` (any case) is a value of, or ``None``."""
    return vocabulary().get(word.lower())


@cache
def _zh_values() -> tuple[tuple[str, str], ...]:
    data = _data()
    pairs = {(v, a) for a, values in data.get("attributes_zh", {}).items() for v in values if len(v) >= 2}
    return tuple(sorted(pairs, key=lambda p: (-len(p[0]), p[0])))


@cache
def _zh_names() -> tuple[str, ...]:
    return tuple(sorted(_data().get("names_zh", ()), key=lambda n: (-len(n), n)))


def zh_values_in(text: str) -> dict[str, frozenset[str]]:
    """The Chinese values of the vocabulary a text says, by attribute (a hotel's facilities, its type, a dish),
    longest first: 「公共区域和部分房间提供wifi」 is one value, not also 「部分房间提供wifi」."""
    return dict(_zh_values_said(text.lower()))


@cache
def _zh_catalogue() -> tuple[dict[str, str], int, dict[str, tuple[str, ...]]]:
    """The catalogue as ``_zh_values_said`` reads it: each value → its attribute (the first in ``_zh_values``' order),
    the longest value's length, and the venue names by their first character, longest first."""
    attribute: dict[str, str] = {}
    for value, attr in _zh_values():
        attribute.setdefault(value, attr)
    names: dict[str, list[str]] = {}
    for name in _zh_names():
        names.setdefault(name[:1], []).append(name)
    return attribute, max(map(len, attribute), default=0), {c: tuple(n) for c, n in names.items()}


@lru_cache(maxsize=4096)
def _zh_values_said(text: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """``zh_values_in`` of a lower-cased text. Cached: a statement is compared with many. A value counts only where
    it starts and ends between the text's words: 「饭煲」 (a dish) is not said in 「电饭煲」 (a rice cooker); so only
    the spans between two of its words are looked up, not the catalogue's thousands of values one by one."""
    attribute, longest, names = _zh_catalogue()
    taken = [False] * len(text)
    # A venue's name holds no value: 「北京烤鸭(前门店)的评分怎么样」 asks about a venue, not for a dish.
    for i, character in enumerate(text):
        name = next((n for n in names.get(character, ()) if text.startswith(n, i)), None)
        if name is not None:
            taken[i : i + len(name)] = [True] * len(name)
    bounds, at = [0], 0
    for word in cut(text):
        at += len(word)
        bounds.append(at)
    spans = [
        (text[start:end], start)
        for i, start in enumerate(bounds)
        for end in bounds[i + 1 :]
        if end - start <= longest and text[start:end] in attribute
    ]
    # Longest first, then as the catalogue orders them: 「公共区域和部分房间提供wifi」 is one value, not also
    # 「部分房间提供wifi」.
    out: dict[str, set[str]] = {}
    for value, start in sorted(spans, key=lambda s: (-len(s[0]), s[0], s[1])):
        end = start + len(value)
        if not any(taken[start:end]):
            taken[start:end] = [True] * (end - start)
            out.setdefault(attribute[value], set()).add(value)
    return tuple((a, frozenset(v)) for a, v in out.items())


@cache
def _heads() -> tuple[tuple[str, str], ...]:
    """(the word that names an attribute, the attribute): an attribute's name ends in what it is — "food",
    "area", "price range", "lodging type"; 「推荐菜」, 「酒店设施」 — so its last word names it in a question."""
    data = _data()
    names = [*data.get("attributes", {}), *data.get("attributes_zh", {})]
    heads = []
    for name in names:
        # 「酒店设施」 is one word to rjieba: its last two characters are what it is.
        head = name.split()[-1] if name.isascii() else cut(name)[-1]
        heads.append((head if head != name or name.isascii() else name[-2:], name))
    return tuple(heads)


@cache
def attribute_names() -> frozenset[str]:
    """The English words that name an attribute of the vocabulary ("food", "area", "type", "range", "place")."""
    return frozenset(head for head, _ in _heads() if head.isascii())


def asked_attributes(query: str, domains: set[str]) -> frozenset[str]:
    """The attributes of the vocabulary ``query`` asks for by the word that names them ("What kind of food",
    "which area", 「哪道菜」, 「什么设施」): of an English word naming several ("type": a lodging's, an attraction's),
    those that are slots of a domain in ``domains`` (the query's, ``memory.topics.domains.named_domains``) when it
    names one."""
    words = set(_WORD.findall(query.lower()))
    # A Chinese word ending in the name's last word names it (「哪道菜」 cut as 「哪」「道菜」, 「招牌菜」); one
    # that only starts with it does not (「菜鸟驿站」).
    zh_words = [w for w in cut(query) if not w.isascii()]
    asked = {
        name
        for head, name in _heads()
        if (head in words if head.isascii() else any(w.endswith(head) for w in zh_words))
    }
    by_domain = _domains()
    slots = {a for d in domains for a in by_domain.get(d, ())}
    english = {a for a in asked if a.isascii()}
    if slots and english & slots:
        asked = (asked - english) | (english & slots)
    return frozenset(asked)
