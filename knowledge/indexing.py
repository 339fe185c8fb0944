"""What a passage's search columns hold, and the model that embeds it.

- **Lexical.** ``search_text`` is the passage's words, ``search_title`` its article's title and
  ``search_headings`` its heading path, each segmented as memory segments its own (``memory.text.document_text``:
  rjieba for Chinese, codes found written either way); ``search_vector`` is computed by PostgreSQL from the three,
  the passage's words at the default weight D, the title's at :data:`TITLE_WEIGHT` and the headings' at
  :data:`HEADINGS_WEIGHT`, so search tells a word of what the whole article is about from one of the passage's
  own words and from one of its section's heading (``knowledge.search``).
- **Vector.** The embedded text is the title, the heading path and the passage (:func:`embedding_text`): a
  passage that says "within 7 days" is about returns because its heading says so. The model is the tenant's
  for the pseudo memory type ``"knowledge"`` (``memory.embeddings.model_for``): a tenant's
  ``settings["embedding_models"]["knowledge"]``, then its ``settings["embedding_model"]``, then
  ``MEMDESK_EMBEDDING_MODELS["knowledge"]`` or ``["default"]``, then the tenant language's default
  (multilingual USE for Chinese tenants, MiniLM otherwise). Each passage records its model; search compares a
  query only with passages of the model it was embedded with.

Embedding takes time (a batch of passages, a second or more): callers embed before they open a transaction
(:func:`prepare_passages`), so no lock or connection is held meanwhile.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.postgres.search import SearchVector

from knowledge.content import Block
from knowledge.passages import PassageDraft, split
from memory.embeddings import embed, model_for
from memory.text import TS_CONFIG, document_text

#: The memory "type" whose embedding model knowledge uses (``memory.embeddings.model_for``).
KNOWLEDGE_EMBEDDING_TYPE = "knowledge"
#: ``search_vector`` weight of the article's title.
TITLE_WEIGHT = "A"
#: ``search_vector`` weight of the heading path.
HEADINGS_WEIGHT = "B"


@dataclass(frozen=True)
class PreparedPassage:
    """A passage ready to store: its draft, its search words and its embedding."""

    draft: PassageDraft
    search_text: str
    search_title: str
    search_headings: str
    embedding: list[float] | None


@dataclass(frozen=True)
class PreparedPassages:
    model: str
    passages: list[PreparedPassage]


def knowledge_model(tenant: Any) -> str:
    """The embedding model of the tenant's knowledge (see the module's docstring)."""
    return model_for(tenant, KNOWLEDGE_EMBEDDING_TYPE)


def passage_public_id(article_id: Any, number: int, position: int) -> str:
    """A passage's short id: the same article, version and position always give the same id (a re-index keeps
    it), twelve characters a prompt can carry and a reply cite."""
    digest = hashlib.sha256(f"{article_id}:{number}:{position}".encode()).hexdigest()
    return "k" + digest[:11]


def embedding_text(title: str, heading_path: Sequence[str], text: str) -> str:
    return "\n".join(part for part in (" › ".join([title, *heading_path]), text) if part)


def prepare_passages(
    tenant: Any, title: str, blocks: Sequence[Block], *, embed_passages: bool = True
) -> PreparedPassages:
    """The version's passages (``knowledge.passages.split``) with their search words and embeddings. No database.
    ``embed_passages=False`` leaves the embeddings out (the lexical leg still finds them)."""
    model = knowledge_model(tenant)
    drafts = split(blocks)
    vectors: Any = None
    if embed_passages and drafts:
        vectors = embed([embedding_text(title, d.heading_path, d.text) for d in drafts], model=model, kind="passage")
    passages = [
        PreparedPassage(
            draft=draft,
            search_text=document_text([draft.text]),
            search_title=document_text([title]),
            search_headings=document_text(draft.heading_path),
            embedding=vectors[index].tolist() if vectors is not None else None,
        )
        for index, draft in enumerate(drafts)
    ]
    return PreparedPassages(model=model if vectors is not None else "", passages=passages)


def search_vector() -> Any:
    """``search_vector`` from the row's own columns, for the ``UPDATE`` after the passages' ``INSERT``."""
    return (
        SearchVector("search_text", config=TS_CONFIG)
        + SearchVector("search_title", config=TS_CONFIG, weight=TITLE_WEIGHT)
        + SearchVector("search_headings", config=TS_CONFIG, weight=HEADINGS_WEIGHT)
    )
