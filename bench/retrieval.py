"""The benchmarks' one lexical baseline and one fusion, on the product's parameters and tokens.

The product ranks memories with BM25 computed in SQL and fuses its vector and lexical legs by weighted
reciprocal rank (``memory/recall/pipeline.py``). A baseline over a dataset's raw turns needs the same in Python: k1 and
b, the fusion's ``rrf_k``, weights and candidate depth come from ``memory.recall.tuning.DEFAULT_TUNING``, and the
tokens from ``memory.text.language`` (rjieba segments for Chinese, lower-case words otherwise; a question's distinct
terms without stop words), so that a baseline moves when the product's parameters do and no benchmark keeps
a second copy of them. Django must be set up before these are called (the parameters live in a Django app).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any


def product_tuning() -> dict[str, float]:
    """The product's default recall parameters (what a tenant without ``MEMDESK_RECALL`` gets)."""
    from memory.recall.tuning import DEFAULT_TUNING

    return DEFAULT_TUNING.as_dict()


def doc_tokens(text: str) -> list[str]:
    """A stored text's words, as the product segments them for its lexical index."""
    from memory.text.language import segment

    return segment(text)


def query_tokens(text: str) -> list[str]:
    """A question's terms, as the product's recall takes them from a query."""
    from memory.text.language import query_terms

    return query_terms(text)


class BM25:
    """Okapi BM25 with the non-negative idf ln(1 + (N − n + 0.5)/(n + 0.5)), as recall's SQL computes it;
    ``k1`` and ``b`` default to the product's (``bm25_k1``, ``bm25_b``)."""

    def __init__(self, docs: Sequence[Sequence[str]], k1: float | None = None, b: float | None = None) -> None:
        knobs = product_tuning()
        self.k1 = float(knobs["bm25_k1"] if k1 is None else k1)
        self.b = float(knobs["bm25_b"] if b is None else b)
        self.tfs = [Counter(d) for d in docs]
        self.lens = [len(d) for d in docs]
        self.avg = max(sum(self.lens) / max(1, len(docs)), 1e-9)
        df: Counter[str] = Counter()
        for tf in self.tfs:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in df.items()}

    def score(self, query: Sequence[str], doc: int) -> float:
        tf, length = self.tfs[doc], self.lens[doc]
        norm = self.k1 * (1 - self.b + self.b * length / self.avg)
        total = 0.0
        for w in query:
            f = tf.get(w)
            if f:
                total += self.idf[w] * f * (self.k1 + 1) / (f + norm)
        return total

    def scores(self, query: Sequence[str], docs: Sequence[int] | None = None) -> list[float]:
        """Scores of ``docs`` (indexes; all by default) for ``query``: a subset is ranked on the statistics
        of the whole collection."""
        return [self.score(query, i) for i in (range(len(self.tfs)) if docs is None else docs)]


def rank_by(scores: Sequence[float], ids: Sequence[str]) -> list[str]:
    """``ids`` from the best score to the worst, ties in their given order."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    return [ids[i] for i in order]


def rrf_term(rank: Any, *, weight: float, rrf_k: float) -> Any:
    """One leg's share of recall's fused score for a 1-based ``rank``: ``weight / (rrf_k + rank)`` (floats or
    numpy arrays); a candidate's score is the sum over the legs that returned it."""
    return weight / (rrf_k + rank)


def rrf(
    vector: Sequence[str],
    lexical: Sequence[str],
    *,
    w_vector: float | None = None,
    w_lexical: float | None = None,
    rrf_k: float | None = None,
    depth: int | None = None,
) -> list[str]:
    """Fuse two rankings as recall does: the top ``depth`` of each leg (recall's ``candidates``), weights and
    ``rrf_k`` defaulting to the product's."""
    knobs = product_tuning()
    weights = (
        float(knobs["w_vector"] if w_vector is None else w_vector),
        float(knobs["w_lexical"] if w_lexical is None else w_lexical),
    )
    k = float(knobs["rrf_k"] if rrf_k is None else rrf_k)
    top = int(knobs["candidates"] if depth is None else depth)
    fused: dict[str, float] = defaultdict(float)
    for ranking, weight in zip((vector, lexical), weights, strict=True):
        for rank, item in enumerate(ranking[:top], start=1):
            fused[item] += rrf_term(rank, weight=weight, rrf_k=k)
    return [item for item, _ in sorted(fused.items(), key=lambda x: (-x[1], x[0]))]
