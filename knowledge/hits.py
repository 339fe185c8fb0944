"""What knowledge search answers: one passage of an article version valid at the time asked. Pure (no Django):
the chat runtime may hold these without importing the models."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class KnowledgeHit:
    """A passage found by ``knowledge.search_knowledge``, best first.

    ``article_id`` (the article's UUID, as text), ``version`` (the version's number), ``title`` (that version's),
    ``url`` (the article's, or ""), ``passage_id`` (short and stable: what a reply cites), ``text`` (the passage,
    sanitised), ``score`` (in (0, 1]: 1 is first in both the lexical and the vector leg). ``heading_path`` and
    ``similarity`` (cosine similarity to the query, 0 when the vector leg did not find it) are for the caller
    that builds a prompt."""

    article_id: str
    version: int
    title: str
    url: str
    passage_id: str
    text: str
    score: float
    heading_path: tuple[str, ...] = field(default=())
    similarity: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """The API's result item (API.md "Knowledge"): exactly the contract's fields."""
        return {
            "article_id": self.article_id,
            "version": self.version,
            "title": self.title,
            "url": self.url,
            "passage_id": self.passage_id,
            "text": self.text,
            "score": self.score,
        }

    def citation(self) -> dict[str, Any]:
        """A reply's citation of this passage (API.md: ``citations``)."""
        return {
            "article_id": self.article_id,
            "version": self.version,
            "title": self.title,
            "url": self.url,
            "passage_id": self.passage_id,
        }
