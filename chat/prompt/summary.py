"""The summary channel of the prompt (S6): a keyword-weighted LexRank summary of the last 10 turns.

A turn is an exchange (「对最近 10 轮对话做摘要」): a user message and what answered it (the reply, tool
messages). The prompt's raw channel already carries the last 5 exchanges, so a window of 10 messages would
summarise only what the model sees verbatim; the summary reaches back 10 exchanges.

``summarize`` ranks the sentences of the last :data:`WINDOW` exchanges with sumy's LexRank (rjieba words for Chinese,
a code such as BCD-470 one word; a regex for English; sumy's own English tokenizer needs nltk's punkt data, which
memdesk never downloads), multiplies the rating of every sentence that carries a keyword by :data:`KEYWORD_WEIGHT`,
and keeps the best sentences that fit in about 120 characters, in conversation order, behind
:data:`SUMMARY_PREFIX`.

Security red line: every turn is redacted before anything else, and the result once more, so the summary never
carries an API key, a token or a password. Phone numbers, e-mail addresses and identity numbers are masked the
same way (「138****1234」, ``memory.text.masking.mask_text``): the summary rides in every prompt, like the anchor.
Pure and deterministic.

Cost: a turn's window is mostly last turn's window, so the per-sentence work (cleaning, the filler test, the
words, the keyword test — POS tagging, the expensive part) is memoised on the redacted sentence, in bounded LRU
caches of pure functions; the stop words are normalised once per process.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy
from sumy.models.dom import ObjectDocumentModel, Paragraph, Sentence
from sumy.summarizers.lex_rank import LexRankSummarizer
from sumy.utils import get_stop_words

from memory.text import (
    CJK_RE,
    PLACEHOLDER_RE,
    clean,
    compress,
    cut,
    detect_language,
    entities,
    is_filler,
    mask_text,
    redact,
)

__all__ = ["KEYWORD_WEIGHT", "SUMMARY_PREFIX", "WINDOW", "SentenceTokenizer", "last_exchanges", "summarize"]

SUMMARY_PREFIX = "【对话摘要】以下为本次会话的关键事实提炼："
KEYWORD_WEIGHT = 5.0
#: Exchanges (user message and what answered it) the summary reads.
WINDOW = 10
MIN_COMPRESSED = 12  # below this many characters a compressed sentence says nothing useful

_SENTENCE_RE = re.compile(r"[^。！？!?；;\n]+?(?:[。！？!?；;]+|\.(?=\s|$)|$)|[^\n]+", re.S)
_EN_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:['’.-][A-Za-z0-9]+)*")
_ROLE_LABELS = {
    "user": ("用户", "User"),
    "customer": ("用户", "User"),
    "assistant": ("客服", "Agent"),
    "agent": ("客服", "Agent"),
}
_SKIPPED_ROLES = frozenset({"system", "tool"})  # tool results travel in the execution context (S1), not here


#: Distinct sentences remembered per cache: a few hundred live conversations' windows.
_CACHE_SIZE = 4096


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _words(sentence: str) -> tuple[str, ...]:
    if CJK_RE.search(sentence):
        return tuple(word for word in (w.strip() for w in cut(sentence)) if re.search(r"\w", word))
    return tuple(_EN_WORD_RE.findall(sentence))


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _has_keyword(sentence: str) -> bool:
    return bool(entities(sentence))


_clean = functools.lru_cache(maxsize=_CACHE_SIZE)(clean)
_is_filler = functools.lru_cache(maxsize=_CACHE_SIZE)(is_filler)


class SentenceTokenizer:
    """The tokenizer object sumy expects (``to_sentences``, ``to_words``), with no nltk data behind it."""

    def to_sentences(self, text: str) -> tuple[str, ...]:
        return tuple(s.strip() for s in _SENTENCE_RE.findall(text) if s.strip())

    def to_words(self, sentence: str) -> tuple[str, ...]:
        return _words(sentence)


class _WeightedLexRank(LexRankSummarizer):
    """LexRank that exposes the rating of every sentence instead of only the top ones."""

    def _create_matrix(
        self,
        sentences: list[list[str]],
        threshold: float,
        tf_metrics: list[dict[str, float]],
        idf_metrics: dict[str, float],
    ) -> numpy.ndarray:
        """sumy's similarity graph, computed as one matrix product instead of a Python loop over every pair of
        sentences (the pairs grow with the square of the window, and this runs on every turn): the idf-modified
        cosine of two sentences is the cosine of their tf·idf vectors; an edge where it exceeds ``threshold``; each
        row divided by its degree."""
        index = {term: column for column, term in enumerate(idf_metrics)}
        weights = numpy.zeros((len(sentences), len(index)))
        for row, (words, tf) in enumerate(zip(sentences, tf_metrics, strict=True)):
            for term in set(words):
                weights[row, index[term]] = tf[term] * idf_metrics[term]
        norms = numpy.sqrt((weights**2).sum(axis=1))
        nonzero = norms > 0
        both = numpy.outer(nonzero, nonzero)
        cosine = numpy.zeros((len(sentences), len(sentences)))
        cosine[both] = (weights @ weights.T)[both] / numpy.outer(norms, norms)[both]
        edges = (cosine > threshold).astype(float)
        degrees = edges.sum(axis=1)
        degrees[degrees == 0] = 1
        return edges / degrees[:, None]

    def rate(self, document: ObjectDocumentModel) -> list[float]:
        sentences_words = [self._to_words_set(s) for s in document.sentences]
        if not any(sentences_words):
            return [1.0] * len(sentences_words)
        tf_metrics = self._compute_tf(sentences_words)
        idf_metrics = self._compute_idf(sentences_words)
        matrix = self._create_matrix(sentences_words, self.threshold, tf_metrics, idf_metrics)
        # With one or two sentences every idf is ≤ 0 and the similarity graph can be empty: the power method
        # then divides by zero (silenced: numpy warned into the server's log on every short conversation).
        # No centrality to measure means every sentence is equally central.
        with numpy.errstate(divide="ignore", invalid="ignore"):
            scores = [float(x) for x in self.power_method(matrix, self.epsilon)]
        if not all(math.isfinite(x) for x in scores) or not any(scores):
            return [1.0] * len(scores)
        return scores


@functools.cache
def _summarizer() -> _WeightedLexRank:
    """One LexRank for the process: rating reads its settings and never changes them, so threads may share it.
    Normalising sumy's Chinese and English stop-word lists (thousands of words) is done here, once."""
    summarizer = _WeightedLexRank()
    summarizer.stop_words = get_stop_words("chinese") | get_stop_words("english")
    return summarizer


@dataclass
class _Candidate:
    position: int  # order in the conversation
    turn: int
    role: str
    text: str
    rating: float = 0.0


def _label(role: str, language: str) -> str:
    zh, en = _ROLE_LABELS.get(role, (role, role))
    return f"{zh}：" if language == "zh" else f"{en}: "


def _with_end(text: str, language: str) -> str:
    if re.search(r"[。！？!?.;；…]$", text):
        return text
    return text + ("。" if language == "zh" else ".")


def _render(chosen: list[_Candidate], language: str) -> str:
    parts: list[str] = []
    previous_turn: int | None = None
    for candidate in sorted(chosen, key=lambda c: c.position):
        sentence = _with_end(candidate.text, language)
        if candidate.turn != previous_turn:
            parts.append(("" if language == "zh" or not parts else " ") + _label(candidate.role, language) + sentence)
        else:
            parts.append(("" if language == "zh" else " ") + sentence)
        previous_turn = candidate.turn
    return "".join(parts)


def last_exchanges(turns: Sequence[tuple[str, str]], count: int) -> list[tuple[str, str]]:
    """The messages of the last ``count`` exchanges: from the ``count``-th last user message on (all of them
    when there are fewer)."""
    turns = list(turns)
    starts = [index for index, (role, _) in enumerate(turns) if role == "user"]
    return turns[starts[-count] :] if len(starts) > count else turns


def summarize(
    turns: Sequence[tuple[str, str]],
    *,
    target_chars: int = 120,
    language: str | None = None,
) -> str:
    """Summarise the ``(role, text)`` messages of the last 10 exchanges into ``SUMMARY_PREFIX`` + at most
    ``target_chars`` characters. An exchange starts at a ``user`` message.

    * Every text is redacted first; the result never contains a secret. Personal values are masked
      (「138****1234」, ``z***@example.com``).
    * Sentences are cleaned of fillers (:func:`memory.text.compression.clean`); pure filler (「好的，谢谢」) and any
      sentence that contained a secret are dropped; a sentence said twice counts once, at its latest position;
      ``system`` and ``tool`` turns are skipped.
    * Rating = LexRank centrality × ``KEYWORD_WEIGHT`` (5.0) when the sentence contains a keyword — a name, an order
      number or code, an amount, a date, i.e. anything :func:`memory.text.compression.entities` finds — else × 1.
      Ties go to the earlier sentence.
    * The best sentences are taken while the body stays within ``target_chars`` (a sentence too long for the room
      left is compressed into it when at least 12 characters remain), then shown in conversation order, each turn
      labelled by its speaker (「用户：」「客服：」 or "User: "/"Agent: " when ``language`` is ``"en"``).
    * No turns, or nothing but filler: the prefix alone.

    Deterministic: the same turns give the same summary.
    """
    if target_chars < 1:
        raise ValueError("target_chars must be at least 1")
    exchanges = last_exchanges(turns, WINDOW)
    window = [(role, mask_text(redact(text or ""))) for role, text in exchanges if role not in _SKIPPED_ROLES]
    code = (language or "").lower()
    lang = (
        "zh"
        if code.startswith("zh")
        else "en"
        if code.startswith("en")
        else detect_language(" ".join(text for _, text in window))
    )
    tokenizer = SentenceTokenizer()

    by_text: dict[str, _Candidate] = {}
    position = 0
    for turn, (role, text) in enumerate(window):
        for sentence in tokenizer.to_sentences(text):
            # A sentence that held a secret only tells the model that a secret exists: it never enters the summary.
            if _is_filler(sentence) or PLACEHOLDER_RE.search(sentence):
                continue
            cleaned = _clean(sentence)
            by_text.pop(cleaned, None)  # a repeated sentence moves to its latest position
            by_text[cleaned] = _Candidate(position, turn, role, cleaned)
            position += 1
    candidates = sorted(by_text.values(), key=lambda c: c.position)
    if not candidates:
        return SUMMARY_PREFIX

    document = ObjectDocumentModel([Paragraph([Sentence(c.text, tokenizer) for c in candidates])])
    for candidate, rating in zip(candidates, _summarizer().rate(document), strict=True):
        candidate.rating = rating * (KEYWORD_WEIGHT if _has_keyword(candidate.text) else 1.0)

    chosen: list[_Candidate] = []
    for candidate in sorted(candidates, key=lambda c: (-c.rating, c.position)):
        trial = [*chosen, candidate]
        if len(_render(trial, lang)) <= target_chars:
            chosen = trial
            continue
        overflow = len(_render(trial, lang)) - target_chars
        room = len(candidate.text) - overflow - 1  # one character for the sentence end it may gain
        if room >= MIN_COMPRESSED:
            shortened = compress(candidate.text, limit=room)
            trial = [*chosen, _Candidate(candidate.position, candidate.turn, candidate.role, shortened)]
            if len(_render(trial, lang)) <= target_chars:
                chosen = trial
    return SUMMARY_PREFIX + mask_text(redact(_render(chosen, lang)))
