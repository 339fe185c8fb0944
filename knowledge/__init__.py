"""The tenant's knowledge (docs/knowledge.md): articles, their versions with validity, passages, knowledge search.
It sits between ``memory`` (whose text segmentation and embeddings it uses) and ``chat`` (which may search it).

- ``models`` — ``Article``, ``ArticleVersion`` (an interval of validity each), ``Passage`` (indexed both ways).
- ``content`` — a body in Markdown or HTML sanitised (nh3) and read as headings and paragraphs.
- ``passages`` — where a version is cut into passages (headings, paragraphs, sentences; never mid-sentence).
- ``indexing`` — a passage's search words, its embedding model, its short stable id.
- ``services`` — the input checked; create, new version, retire (the validity rules); bulk import.
- ``search`` — hybrid search (BM25 and vectors fused) over the versions valid at ``as_of``.
- ``hits`` — ``KnowledgeHit``, what search answers.
- ``files`` — an import's input read: JSON Lines, or Markdown and HTML files.
- ``replies`` — what a chat turn records: a reply's citations, the questions that found nothing (content gaps).
- ``views``, ``admin``, ``labels``, ``apps`` — the REST API, the staff admin, the admin's names, the app.

What other apps import is exported here: :func:`search_knowledge`, :class:`KnowledgeHit`, :func:`has_knowledge`,
:func:`record_citations` and :func:`record_gap`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from knowledge.hits import KnowledgeHit

__all__ = ["KnowledgeHit", "has_knowledge", "record_citations", "record_gap", "search_knowledge"]


def search_knowledge(
    tenant: Any,
    query: str,
    *,
    as_of: datetime | None = None,
    k: int = 5,
    segment: str | None = None,
    embedding: Sequence[float] | None = None,
) -> list[KnowledgeHit]:
    """The tenant's ``k`` passages (at most 20) that best answer ``query``, best first, from the article versions
    valid at ``as_of`` (default now), of the articles for everyone and, with ``segment``, for that segment.
    ``embedding``: the query's vector under the tenant's knowledge model, when the caller has it. Opens its own
    row-level-security scope; call it outside a long transaction (it embeds the query)."""
    # Imported here: this package's __init__ is imported while Django loads the apps, before models may be.
    from knowledge.search import search

    return search(tenant, query, as_of=as_of, k=k, segment=segment, embedding=embedding)


def has_knowledge(tenant: Any) -> bool:
    """Whether the tenant has any article at all (a chat turn skips knowledge search when not). Call inside the
    tenant's row-level-security scope."""
    from knowledge.models import Article

    return Article.objects.for_tenant(tenant).exists()


def record_citations(tenant: Any, message_id: Any, cited: Sequence[tuple[str, KnowledgeHit]]) -> int:
    """Store which passages (and so which article versions) reply ``message_id`` cited, each under its prompt
    label; returns the rows written (``knowledge.replies.do_record_citations``)."""
    from knowledge.replies import do_record_citations

    return do_record_citations(tenant, message_id, cited)


def record_gap(tenant: Any, message_id: Any, text: str, best_score: float) -> None:
    """Store a question about the business that no passage answered (``knowledge.replies.do_record_gap``)."""
    from knowledge.replies import do_record_gap

    do_record_gap(tenant, message_id, text, best_score)
