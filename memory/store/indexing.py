"""What a memory's search columns hold: ``search_text`` (its own words), ``search_context`` (the
conversation it came from: its message and the one it answers), ``search_around`` (for a conversation unit, the
turns before those) and ``search_vector`` (all three, for PostgreSQL's full-text search).

``search_vector`` is computed by PostgreSQL in the statement that writes the row, in two forms that must
agree, both here: :func:`search_vector` (an ORM expression, for ``save()``) and :func:`search_vector_sql`
(for the batch ``INSERT`` of ``memory.store.write``); ``tests/memory/store/test_batch_write.py`` checks it.
"""

from __future__ import annotations

from typing import Any

from django.contrib.postgres.search import SearchVector
from django.db.models import Value

from memory.text.language import TS_CONFIG, document_text
from memory.text.redaction import redact

#: ``search_vector`` weight of a memory's conversational context. Its own text keeps PostgreSQL's default
#: weight D, so rows written before context existed read the same; recall's BM25 counts a term found only
#: in the context at half the weight of one in the memory's own text (memory/recall/pipeline.py).
CONTEXT_WEIGHT = "C"
#: ``search_vector`` weight of the turns around a conversation unit (``search_around``): what the exchange
#: was about — the route and day of the train whose reference the unit gives. Recall's BM25 counts a term
#: found only there at ``MEMDESK_RECALL["around_tf"]`` (a term of the memory's own text counts 2).
AROUND_WEIGHT = "B"
#: At most this many context words are indexed per memory (two chat messages' worth).
CONTEXT_WORDS = 200


def search_fields(content: str, key: str | None, data: dict[str, Any]) -> str:
    """``search_text``: the segmented words of a memory's content, key and scalar data values."""
    values = [str(v) for v in data.values() if isinstance(v, str | int | float)]
    return document_text([content, (key or "").replace("_", " "), *values])


def context_text(*messages: str) -> str:
    """Segmented, redacted words of the conversation around a memory, for ``search_context``. Secrets never
    reach the index (they would be searchable otherwise)."""
    words = document_text([redact(m) for m in messages if m]).split()
    return " ".join(words[:CONTEXT_WORDS])


def search_vector(search_text: str, search_context: str = "", search_around: str = "") -> Any:
    """``search_vector`` computed by PostgreSQL in the statement that writes
    the row (INSERT or UPDATE): the memory's own words at the default weight,
    its context's at ``CONTEXT_WEIGHT``, the turns around it at ``AROUND_WEIGHT``.
    The instance keeps the expression, not the tsvector: reading the value
    means loading the row."""
    vector = SearchVector(Value(search_text), config=TS_CONFIG)
    if search_context:
        vector += SearchVector(Value(search_context), config=TS_CONFIG, weight=CONTEXT_WEIGHT)
    if search_around:
        vector += SearchVector(Value(search_around), config=TS_CONFIG, weight=AROUND_WEIGHT)
    return vector


def search_vector_sql(row: str) -> str:
    """:func:`search_vector` as SQL, of the row ``row`` (an alias with ``search_text``, ``search_context``
    and ``search_around``): an empty context adds nothing to the tsvector."""
    own = f"to_tsvector('{TS_CONFIG}'::regconfig, COALESCE({row}.search_text, ''))"
    context = f"to_tsvector('{TS_CONFIG}'::regconfig, COALESCE({row}.search_context, ''))"
    around = f"to_tsvector('{TS_CONFIG}'::regconfig, COALESCE({row}.search_around, ''))"
    return f"{own} || setweight({context}, '{CONTEXT_WEIGHT}') || setweight({around}, '{AROUND_WEIGHT}')"
