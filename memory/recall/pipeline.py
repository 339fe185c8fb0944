"""Three-stage recall (seed S7): ``recall()``, its stages in order.

The one implementation used by the API, the chat runtime and the benchmarks.

1. **Rule stage** — the query names a key (「查我的订单」 → ``order_id``,
   「进度如何」 → the batch progress): exact lookups, no model.
2. **Candidate stage** — hybrid: pgvector cosine distance on the query
   rewritten by intent, and PostgreSQL full-text search on rjieba-segmented
   text, fused by weighted reciprocal rank (weights from settings, chosen by
   measurement in ``bench/quality/locomo_recall.py``): ``memory.recall.candidates``.
   The query embedding runs on a pool thread while the rule stage's lookups
   run, so ``timings_ms["embed"]`` (its own duration) overlaps ``rule``.
3. **TTL filter and rerank** — validity (``created_at <= as_of < expires_at``)
   and scope are filtered inside the SQL; candidates are reranked by
   ``relevance_score``. When the best ``relevance_score`` among the hits is
   below 0.7 the caller must ask the user to confirm instead of guessing.
   The rerank's weights are ``memory.recall.ranking``'s; a question brings its
   answer (``memory.recall.questions``); what is no longer true ranks after what
   is (``memory.recall.currency``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from conversations.access import require_session_id
from conversations.models import ChatSession
from memory import metrics
from memory.models import MemoryType, MemoryUnit
from memory.recall.candidates import QueryEmbedding, RecallHit, candidate_stage, elapsed_ms, embed_query_soon
from memory.recall.currency import current_first
from memory.recall.questions import with_answers
from memory.recall.ranking import about_now, care_lift, rerank_weights
from memory.recall.rewrite import rule_keys
from memory.store.consent import memory_enabled_for_session
from memory.store.feedback import mark_recalled
from memory.store.read import SCOPE_SQL, fetch_memories, scope_params
from memory.text.language import query_terms
from memory.text.mood import detect_mood
from tenants.models import Tenant
from tenants.rls import tenant_scope

#: Below this best ``relevance_score`` among the hits, the agent asks the user to confirm (seed S7).
CONFIRM_BELOW = 0.7
#: Columns recall's callers never read from a hit (they load lazily if one does): parsing a 384-float vector
#: per hit is a measurable share of a recall.
MAX_K = 50


@dataclass
class RecallResult:
    hits: list[RecallHit]
    needs_confirmation: bool
    timings_ms: dict[str, float]
    rewritten_query: str | None = None
    rule_keys: tuple[str, ...] = field(default_factory=tuple)

    @property
    def memories(self) -> list[MemoryUnit]:
        return [h.memory for h in self.hits]


def _rule_stage(tenant: Tenant, session: ChatSession, keys: tuple[str, ...], as_of: datetime) -> list[RecallHit]:
    if not keys:
        return []
    types = {k for k in keys if k in MemoryType.values}
    plain_keys = [k for k in keys if k not in MemoryType.values]
    params = scope_params(tenant, session, as_of)
    found: list[MemoryUnit] = []
    if plain_keys:
        where = f"{SCOPE_SQL} AND m.key = ANY(%(keys)s)"
        found += fetch_memories(tenant, where, {**params, "keys": plain_keys}, order="m.created_at DESC, m.id")
    for mtype in sorted(types):
        where = f"{SCOPE_SQL} AND m.type = %(type)s"
        order = "m.updated_at DESC, m.created_at DESC, m.id"
        found += fetch_memories(tenant, where, {**params, "type": mtype}, order=order, limit=1)
    seen: set[Any] = set()
    hits = []
    for memory in found:
        if memory.pk in seen:
            continue
        seen.add(memory.pk)
        hits.append(RecallHit(memory=memory, stage="rule", similarity=1.0, score=memory.relevance_score))
    return hits


@require_session_id
def recall(
    tenant: Tenant,
    session: ChatSession,
    query: str,
    *,
    as_of: datetime | None = None,
    k: int = 5,
    record: bool = True,
    embedding: QueryEmbedding | None = None,
    trace: dict[str, Any] | None = None,
) -> RecallResult:
    """Memories for ``query`` visible to ``session`` and valid at ``as_of``. ``embedding``: the query's
    embedding, started earlier by ``embed_query_soon`` (ignored unless it is this tenant's and query's).
    ``trace``: a dict that, when given, receives the candidate stage's SQL (``candidate_sql``,
    ``candidate_params``) and each candidate's per-leg figures before fusion (``candidates``: id,
    similarity, vector_rank, coverage, lexical_rank; a rank is None where that leg did not return the
    row), and the query's mood (``mood``: score, negative, cues, and the ids of the care memories it
    lifted), for benchmarks and diagnostics; recall's result does not depend on it."""
    if not 1 <= k <= MAX_K:
        raise ValueError(f"k must be between 1 and {MAX_K}")
    if not memory_enabled_for_session(tenant, session):  # memory is off for this end user (memory.store.consent)
        nothing = {"rule": 0.0, "vector": 0.0, "embed": 0.0, "rerank": 0.0, "total": 0.0}
        return RecallResult(hits=[], needs_confirmation=False, timings_ms=nothing)
    as_of = as_of or timezone.now()
    timings: dict[str, float] = {}
    total_start = time.perf_counter()
    with tenant_scope(tenant):
        # The query embedding runs on a pool thread and overlaps the rule stage's lookups (and, when the
        # caller started it, more before them).
        if embedding is None or embedding.tenant_id != tenant.pk or embedding.query != query:
            embedding = embed_query_soon(tenant, query)
        models, query_vectors = embedding.models, embedding.vectors

        start = time.perf_counter()
        keys = tuple(rule_keys(query))
        rule_hits = _rule_stage(tenant, session, keys, as_of)
        timings["rule"] = elapsed_ms(start)

        start = time.perf_counter()
        terms = list(dict.fromkeys(query_terms(query) + query_terms(embedding.searched)))[:16]
        candidates, embed_ms = candidate_stage(tenant, session, models, query_vectors, terms, as_of, k, trace)
        timings["vector"] = elapsed_ms(start)
        timings["embed"] = embed_ms

        start = time.perf_counter()
        rule_ids = {h.memory.pk for h in rule_hits}
        # Rerank: relevance_score scales the fused rank; rule hits stay first.
        candidates = [h for h in candidates if h.memory.pk not in rule_ids]
        mood = detect_mood(query)
        weights = rerank_weights(query, candidates, mood)
        if trace is not None:
            lifted = [str(h.memory.pk) for h in candidates if care_lift(mood, h.memory) > 1.0]
            trace["mood"] = {"score": mood.score, "negative": mood.negative, "cues": list(mood.cues), "lifted": lifted}
        candidates = with_answers(tenant, session, candidates, weights, as_of, limit=k * 3)
        rule_hits.sort(key=lambda h: -h.memory.relevance_score)
        hits = current_first(tenant, session, rule_hits + candidates, as_of, about_now=about_now(query), query=query)[
            :k
        ]
        # The seed's test, on the seed's score (S7): 「对剩余结果，按relevance_score降序排列。如果最高分低于 0.7，
        # 说明当前没有高质量记忆可用」 — the best relevance_score of the hits, not ``score`` (which scales it by
        # the match's confidence, a cosine whose range depends on the embedding model).
        needs_confirmation = bool(hits) and max(h.memory.relevance_score for h in hits) < CONFIRM_BELOW
        if record:
            mark_recalled(tenant, [h.memory.pk for h in hits])
        timings["rerank"] = elapsed_ms(start)
    timings["total"] = elapsed_ms(total_start)
    metrics.observe_recall(timings)
    return RecallResult(
        hits=hits,
        needs_confirmation=needs_confirmation,
        timings_ms=timings,
        rewritten_query=embedding.searched if embedding.searched != query else None,
        rule_keys=keys,
    )
