"""What matter a message is about: its *domain* (billing, delivery, hotel, taxi …), by its nearest examples.

A topic switch needs evidence of a new matter, and a message's vector alone is a poor witness: sentence
embeddings place 「景点的电话是多少啊？」 near 「酒店的电话是多少？」 (the same form) and far from 「这个景点在哪」 (the
same matter). The domain model is knowledge taken from data instead of a word list: labelled examples of what
customers write about each matter, and a k-nearest-neighbour vote over their vectors.

The examples (``memory/topics/data/``):

* ``woz_domains.json`` — user turns of two public task-oriented corpora (CrossWOZ, Chinese; MultiWOZ 2.1, English),
  labelled with the domain their dialogue acts name; ``none`` for turns that name no matter (greetings, thanks).
  Built from the corpora's fit halves only by ``bench/quality/topic_domains_build.py``.
* ``service_domains.json`` — customer-service messages by service domain (billing, complaint, delivery …), zh and
  en, written for memdesk.

A vote is trusted only when the neighbours agree (``MIN_SHARE`` of the ``K`` nearest) and the nearest is close
(``MIN_SIMILARITY``): a message unlike every example, or between two domains, has no domain — the caller then has
no domain evidence either way. The thresholds are fitted on the corpora's fit halves
(``bench/quality/topic_switch_public.py``); ``none`` is never a domain.

Vectors come from the tenant's session-state model (the one the topic vectors use), embedded once per process and
model on first use (``warm_up``); a model that reads no Chinese (MiniLM) gets the English examples only.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from memory.embeddings import models as embeddings
from memory.text.language import segment

__all__ = ["DomainGuess", "NONE", "classify", "domain_bank", "leaning", "named_domains", "warm_up"]

DATA_DIR = Path(__file__).with_name("data")
SOURCES = ("woz_domains.json", "service_domains.json")
#: The label of examples that name no matter; never returned as a domain.
NONE = "none"
#: Neighbours that vote, the share of them a domain needs, and how close the nearest must be.
K = 9
MIN_SHARE = 7 / 9
MIN_SIMILARITY = 0.45
#: A word *names* a domain when at least this many examples hold it and this share of them are that domain's
#: (「酒店」, "taxi", 「话费」); attributes that every domain has (「电话」, "postcode", "people") name none.
MIN_NAMING_COUNT = 3
MIN_NAMING_SHARE = 0.85
#: A word *leans* to a domain when at least ``MIN_NAMING_COUNT`` examples hold it and this share of them are that
#: domain's (「餐馆」 restaurant, 「酒店」 hotel, "museum" attraction): weaker evidence than naming, enough to tell
#: two words of different matters apart.
MIN_LEANING_SHARE = 0.6
#: Models that read English only: the Chinese examples are not embedded for them.
_ENGLISH_ONLY = frozenset({embeddings.DEFAULT_MODEL})

_lock = threading.Lock()


@dataclass(frozen=True)
class DomainGuess:
    """``domain`` is ``None`` when the evidence is weak; ``likely`` is the vote's winner all the same (``None`` for
    ``none``); ``share`` is its share of the vote and ``similarity`` the nearest example's cosine similarity."""

    domain: str | None
    share: float
    similarity: float
    likely: str | None = None

    @property
    def no_matter(self) -> bool:
        """Whether the neighbours agree the message names no matter at all (thanks, a greeting, "that is all")."""
        return self.likely is None and self.share >= MIN_SHARE


@cache
def _examples() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(texts, labels, languages)`` of every example file."""
    texts: list[str] = []
    labels: list[str] = []
    languages: list[str] = []
    for name in SOURCES:
        path = DATA_DIR / name
        if not path.exists():
            continue
        for domain, by_language in json.loads(path.read_text(encoding="utf-8"))["domains"].items():
            for language, items in by_language.items():
                for text in items:
                    texts.append(text)
                    labels.append(domain)
                    languages.append(language)
    return tuple(texts), tuple(labels), tuple(languages)


_banks: dict[str, tuple[np.ndarray, np.ndarray, tuple[str, ...]]] = {}


def domain_bank(model: str) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """``(vectors, label ids, label names)`` of the examples ``model`` reads, embedded once per process."""
    bank = _banks.get(model)
    if bank is not None:
        return bank
    with _lock:
        if model not in _banks:
            texts, labels, languages = _examples()
            keep = [i for i, lang in enumerate(languages) if not (model in _ENGLISH_ONLY and lang == "zh")]
            names = tuple(sorted({labels[i] for i in keep}))
            vectors = np.asarray(embeddings.embed([texts[i] for i in keep], model=model), dtype=np.float32)
            ids = np.asarray([names.index(labels[i]) for i in keep], dtype=np.int32)
            _banks[model] = (vectors.reshape(len(keep), -1), ids, names)
    return _banks[model]


def classify(vector: np.ndarray, model: str) -> DomainGuess:
    """The domain of a message embedded as ``vector`` by ``model`` (the K-nearest-neighbour vote)."""
    vectors, ids, names = domain_bank(model)
    query = np.asarray(vector, dtype=np.float32)
    if not len(vectors) or vectors.shape[1] != query.shape[-1]:
        return DomainGuess(None, 0.0, -1.0)
    similarities = vectors @ query
    nearest = np.argpartition(-similarities, min(K, len(similarities) - 1))[:K]
    votes = np.bincount(ids[nearest], minlength=len(names))
    winner = int(votes.argmax())
    share = float(votes[winner]) / len(nearest)
    top = float(similarities[nearest].max())
    likely = names[winner] if names[winner] != NONE else None
    trusted = share >= MIN_SHARE and top >= MIN_SIMILARITY
    return DomainGuess(likely if trusted else None, share, top, likely)


def _words(text: str) -> set[str]:
    """The message's words, an English plural folded into its singular ("hotels" → "hotel")."""
    return {w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w for w in segment(text)}


_DIGIT = re.compile(r"\d")


@cache
def _counts() -> dict[str, dict[str, int]]:
    """Word → domain → how many examples of that domain hold it (``none`` included)."""
    texts, labels, _ = _examples()
    counts: dict[str, dict[str, int]] = {}
    for text, label in zip(texts, labels, strict=True):
        for word in _words(text):
            by_label = counts.setdefault(word, {})
            by_label[label] = by_label.get(label, 0) + 1
    return counts


def _leading(word: str, share: float) -> str | None:
    """The domain holding at least ``share`` of the examples with ``word`` (at least ``MIN_NAMING_COUNT`` of
    them), never ``none`` and never for a word with a digit; else None."""
    by_label = _counts().get(word)
    if not by_label or _DIGIT.search(word):
        return None
    label, count = max(by_label.items(), key=lambda item: item[1])
    if label == NONE or count < MIN_NAMING_COUNT or count / sum(by_label.values()) < share:
        return None
    return label


def leaning(text: str) -> set[str]:
    """The domains the words of ``text`` (a word or a phrase) lean to (``MIN_LEANING_SHARE``)."""
    return {d for w in _words(text) if (d := _leading(w, MIN_LEANING_SHARE)) is not None}


@cache
def _lexicon() -> dict[str, str]:
    """Word → the domain it names, counted over the examples (``none`` counts: a word of greetings names nothing).
    A word with a digit is a value (a time, a price, a count), never the name of a matter."""
    return {w: d for w in _counts() if (d := _leading(w, MIN_NAMING_SHARE)) is not None}


def named_domains(text: str) -> set[str]:
    """The domains ``text`` names by a word the examples tie to one domain: evidence that it is about that matter
    itself, not about an attribute (a phone number, a time, a number of people) that any matter has."""
    lexicon = _lexicon()
    return {lexicon[w] for w in _words(text) if w in lexicon}


def warm_up(model: str) -> None:
    """Embed ``model``'s examples now (a worker's start), not on its first customer's message."""
    domain_bank(model)
