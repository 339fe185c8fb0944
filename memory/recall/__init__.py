"""Three-stage recall (seed S7): the one implementation the API, the chat runtime and the benchmarks use.

- ``pipeline`` — ``recall()``: the rule stage, the candidate stage, the TTL filter and the rerank, in order.
- ``candidates`` — the hybrid candidate SQL (vector and lexical legs fused by reciprocal rank), the query's embedding.
- ``currency`` — what is true now: stale values, units overtaken by newer ones, the current first.
- ``ranking`` — the rerank's weights: recency for a question about now, identifiers, care for a negative mood.
- ``questions`` — a question unit is followed by the unit that answered it.
- ``rewrite`` — query rewriting by intent (stage 2).
- ``tuning`` — the knobs, typed and frozen; ``MEMDESK_RECALL`` checked at start.
"""

from memory.recall.candidates import embed_query_soon
from memory.recall.pipeline import RecallResult, recall

__all__ = ["RecallResult", "embed_query_soon", "recall"]
