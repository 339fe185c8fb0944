"""Which attribute a word is a value of: the vocabulary of values that labelled dialogue states give each attribute.

Word vectors place co-hyponyms no nearer each other than the matter's own words: "college" and "museum" (two
kinds of attraction), "scottish" and "italian" (two cuisines), "expensive" and "moderate" (two price levels) are
less alike by single-word vectors than "restaurant" and "food". A labelled corpus knows better: its dialogue
states give each attribute the values customers chose for it. Two words that are values of one attribute fill one
slot: a customer who asked for a college and then says "how about a museum?" has changed the kind of attraction.

The vocabulary (``data/woz_values.json``) is the values of MultiWOZ 2.1's belief states in its validation split's
**fit half** (``bench/quality/value_vocabulary_build.py``): food, attraction and lodging types, areas, price ranges
and train stations. A word that is a whole value belongs to that value's attribute ("north": an area, though
"north american" is food); any other word of a value, to the one attribute whose values hold it ("sports" of
"multiple sports"). A word two attributes claim alike belongs to neither, for it tells no slot; function words
(sumy's English stop words: "the", "new") belong to none.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

__all__ = ["attributes_of", "vocabulary", "vocabulary_of"]

DATA = Path(__file__).with_name("data") / "woz_values.json"
_WORD = re.compile(r"[a-z][a-z'-]*[a-z]")


@cache
def vocabulary() -> dict[str, str]:
    """Each word of the shipped values → the one attribute it belongs to (lower-cased)."""
    return vocabulary_of(json.loads(DATA.read_text(encoding="utf-8"))["attributes"])


def vocabulary_of(attributes: dict[str, list[str]]) -> dict[str, str]:
    """Each word of ``attributes``' values (attribute → its values) → the one attribute it belongs to: a whole
    value's, else the one whose values hold it; words two attributes claim alike, function words and words of
    fewer than three letters left out."""
    from sumy.utils import get_stop_words

    stop = frozenset(w.lower() for w in get_stop_words("english"))
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


def attributes_of(word: str) -> str | None:
    """The attribute ``word`` (any case) is a value of, or ``None``."""
    return vocabulary().get(word.lower())
