"""Values with no form of their own: a cuisine, an area, a price range, a kind of place ("a Panasian place",
"in the south", "a cinema"). No pattern finds them, but a conversation shows them: a customer who asks "How
about a cheap Chinese place?" just after asking for "a cheap Panasian place" replaces one word with another of
the same kind, and keeps the rest.

A **term** is a content word of a statement: a word of letters that is not a function word or a common verb
(sumy's English stop-word list), and not part of a value (the masked text is read). Two statements of the same
matter said close together, where a term of the newer takes the place of a term of the older, change that term:
the pair is the one each word finds nearest in the other statement, and at least ``SAME_KIND`` alike by word
vectors (co-hyponyms — two cuisines, two areas, two price levels — are; a cuisine and "restaurant" are less).

Word vectors are the sentence model's vectors of the single words: measured for English words only. The
Chinese sentence model's word vectors place 「额度」 (a card's limit) nearest 「账单」 (its bill), so Chinese words
are not compared here; their values are mostly typed (amounts, scores, hours: ``memory.conversation.claims``).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from functools import cache
from typing import Any

import numpy as np

from memory.embeddings import models as embeddings

#: Word vectors at least this alike make two terms of the same kind (fitted on MultiWOZ's fit half); more alike
#: than ``SYNONYM`` they are one thing said two ways ("centre", "center").
SAME_KIND = 0.45
SYNONYM = 0.85
#: Two terms in the same frame (a word around them in common) need only be this alike.
FRAMED_KIND = 0.1
#: A statement with more terms than this is not a brief revision of one choice: its terms are not compared.
MAX_TERMS = 10
#: A revision brings at most this many terms the older statement did not say ("How about a cheap *Chinese*
#: place?" after "a cheap Panasian place"): more is another request, not the same one revised.
MAX_NEW = 3
#: Word vectors kept per process: a word is embedded once per model.
CACHE_SIZE = 20_000

_MASK = re.compile(r"⟨\w+⟩")
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]")
#: Participles ("leaving", "booked") describe what is done, not a choice made.
_VERB_FORM = re.compile(r"(?:ing|ed)$")

_lock = threading.Lock()
_vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()


@cache
def _stop_words() -> frozenset[str]:
    from sumy.utils import get_stop_words

    return frozenset(w.lower() for w in get_stop_words("english"))


@cache
def _stemmer() -> Any:
    from nltk.stem.snowball import SnowballStemmer

    return SnowballStemmer("english")


def _stem(word: str) -> str:
    return str(_stemmer().stem(word))


def terms_of(masked: str) -> frozenset[str]:
    """The content words of a masked statement (``claims.Claim.masked``), lower-cased: no value, no function
    word, no common verb; plural ``-s`` kept (word vectors read "restaurants" as they read "restaurant")."""
    stop = _stop_words()
    words = (w.lower() for w in _LATIN_WORD.findall(_MASK.sub(" ", masked)))
    return frozenset(
        w for w in words if len(w) >= 3 and w not in stop and _stem(w) not in stop and not _VERB_FORM.search(w)
    )


def word_vectors(words: Iterable[str], model: str) -> dict[str, np.ndarray]:
    """Unit vectors of single words by ``model``, each computed once per process."""
    wanted = list(dict.fromkeys(words))
    out: dict[str, np.ndarray] = {}
    missing = []
    with _lock:
        for word in wanted:
            vector = _vectors.get((model, word))
            if vector is None:
                missing.append(word)
            else:
                _vectors.move_to_end((model, word))
                out[word] = vector
    if missing:
        computed = embeddings.embed(missing, model=model)
        with _lock:
            for word, vector in zip(missing, computed, strict=True):
                _vectors[(model, word)] = vector
                out[word] = vector
            while len(_vectors) > CACHE_SIZE:
                _vectors.popitem(last=False)
    return out


def _frames(masked: str) -> dict[str, frozenset[str]]:
    """Each content word's frame: the stems of the content words just before and just after it, each on its
    side ("a cheap Panasian *place*", "*serves* Polynesian food", "the expensive *price* range")."""
    stop = _stop_words()
    content = [w.lower() for w in _LATIN_WORD.findall(_MASK.sub(" , ", masked))]
    content = [w for w in content if w not in stop and _stem(w) not in stop]
    out: dict[str, set[str]] = {}
    for i, word in enumerate(content):
        around = out.setdefault(word, set())
        if i > 0:
            around.add("<" + _stem(content[i - 1]))
        if i + 1 < len(content):
            around.add(">" + _stem(content[i + 1]))
    return {w: frozenset(a) for w, a in out.items()}


def replaced(old_masked: str, new_masked: str, model: str) -> list[tuple[str, str]]:
    """The terms of the older statement that a term of the newer takes the place of, as ``(old term, new
    term)``: terms only one of them holds, each the other's best match and alike enough — by word vectors
    (``SAME_KIND``), or, in the same frame (a word around them in common: "Indian *food*" after "Polynesian
    *food*"), by less (``FRAMED_KIND``): single-word vectors place "korean" no nearer "afghan" than
    "restaurant", the frame says they fill one slot. Nothing when either says more than ``MAX_TERMS`` terms or
    the newer brings more than ``MAX_NEW`` (not a revision of one choice)."""
    old, new = terms_of(old_masked), terms_of(new_masked)
    stems = {w: _stem(w) for w in old | new}
    kept_old, kept_new = {stems[w] for w in old}, {stems[w] for w in new}
    # A word said in both, in any of its forms ("restaurants", "restaurant"), was not replaced.
    gone = sorted(w for w in old - new if stems[w] not in kept_new)
    came = sorted(w for w in new - old if stems[w] not in kept_old)
    if not gone or not came or len(came) > MAX_NEW or len(old) > MAX_TERMS or len(new) > MAX_TERMS:
        return []
    vectors = word_vectors([*gone, *came], model)
    alike = np.stack([vectors[w] for w in gone]) @ np.stack([vectors[w] for w in came]).T
    old_frames, new_frames = _frames(old_masked), _frames(new_masked)
    framed = np.array(
        [[bool(old_frames.get(u, frozenset()) & new_frames.get(w, frozenset())) for w in came] for u in gone]
    )
    # One word gone and one come: the revision changed one slot, and the frame is the whole statement.
    framed |= len(gone) == 1 and len(came) == 1
    fits = (alike < SYNONYM) & ((alike >= SAME_KIND) | (framed & (alike >= FRAMED_KIND)))
    score = np.where(fits, alike + framed, -1.0)  # a framed pair before an unframed one
    out = []
    for i, j in zip(*np.nonzero(fits), strict=True):
        if score[i].argmax() == j and score[:, j].argmax() == i:
            out.append((gone[i], came[j]))
    return out


__all__ = ["FRAMED_KIND", "MAX_NEW", "MAX_TERMS", "SAME_KIND", "replaced", "terms_of", "word_vectors"]
