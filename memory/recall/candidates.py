"""Recall's candidate stage: the hybrid SQL — pgvector cosine distance on the query rewritten by intent and
Okapi BM25 over segmented text (``memory.text.language.segment``) — fused by weighted reciprocal rank, and the
query's embedding, started on a pool thread so that it overlaps the rule stage (``memory.recall.pipeline``).

Why no HNSW index here: pgvector 0.6 applies ``WHERE`` filters after the HNSW scan, so a per-end-user filter
silently returns too few rows. Recall reads one end user's (or one session's) rows — tens to hundreds — through
a B-tree index and computes exact distances on them (a ``MATERIALIZED`` CTE keeps the planner from choosing an
approximate index). Correct by construction, and fast at that size (bench/RESULTS.md).
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from conversations.models import ChatSession
from memory.embeddings import models as embeddings
from memory.models import MemoryType, MemoryUnit
from memory.recall.rewrite import Rewrite, rewrite_and_embed, rewrite_query
from memory.recall.tuning import tuning
from memory.store.indexing import CONTEXT_WEIGHT
from memory.store.read import SCOPE_SQL, fetch_memories, scope_params, valid_sql
from memory.text.language import TS_CONFIG
from tenants.models import Tenant


@dataclass
class RecallHit:
    memory: MemoryUnit
    stage: str  # "rule" | "vector"
    similarity: float
    score: float
    fused: float = 0.0
    #: A conversation unit stating a value that is no longer current at ``as_of`` (the old address after a
    #: move, a coupon past its expiry): ranked after every current hit (``current_first``).
    stale: bool = False


def elapsed_ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


#: ``recent`` is the window: the end user's newest ``window`` memory rows valid at ``as_of`` (read in the
#: order of the ``mem_user_window`` index, so a long history costs no more than a short one; its conditions
#: are the ones the planner can estimate — the rest of the scope, whose JSON and OR tests it cannot, would
#: turn the read into a scan of the whole tenant); ``scoped`` those of them the session may see. Both legs
#: read only the window but for the lexical leg's rare words (``_LEX_SQL``). The window's distances are
#: computed as its rows are read, so no vector is copied into it: 2,000 vectors of 1.5 kB are more than
#: ``work_mem`` holds, and a window that spilled to disk cost more than it saved. The vectors and the
#: tsvectors are kept in the row itself (migration ``memory.0013``): read out of line, each row of the window
#: cost a TOAST lookup per leg (docs/memory.md, "Long histories").
_CANDIDATE_SQL = """
WITH recent AS MATERIALIZED (
    SELECT r.id, r.tenant_id, r.end_user_id, r.session_id, r.type, r.data, r.created_at, r.expires_at,
           {distance} AS distance, r.search_vector
    FROM memory_memoryunit r
    WHERE r.tenant_id = %(tenant)s AND r.end_user_id = %(end_user)s AND {valid}
    ORDER BY r.created_at DESC
    LIMIT %(window)s
),
scoped AS MATERIALIZED (
    SELECT m.id, m.distance, m.search_vector, m.created_at FROM recent m WHERE {scope}
),
vec AS (
    SELECT id, 1 - distance AS sim, row_number() OVER (ORDER BY distance, id) AS rnk
    FROM scoped
    WHERE distance IS NOT NULL
    ORDER BY distance, id
    LIMIT %(n)s
),
{lex}
SELECT COALESCE(vec.id, lex.id) AS id, vec.sim, vec.rnk, lex.coverage, lex.rnk
FROM vec FULL OUTER JOIN lex ON vec.id = lex.id
"""

_NO_LEX = "lex AS (SELECT NULL::uuid AS id, 0.0 AS coverage, NULL::bigint AS rnk WHERE false)"

#: The lexical leg: Okapi BM25 over the rows in scope that contain a query term (``hits``), bounded for long
#: histories like the vector leg. Every row of the recent window (``scoped``) that contains a term is a hit;
#: older rows are searched through the GIN index on ``search_vector`` only for the terms that are rare in the
#: window (``rare_share`` of its rows at most: a word the customer has hardly used lately) — a word in half
#: the recent memories weighs almost nothing in BM25 and would cost a scan of the whole history. The window
#: is the sample BM25's statistics come from: ``n`` is its row count, a term's document frequency its rows
#: with the term (plus the older rows a rare term found), the average length its rows'. For an end user whose
#: whole history fits in the window (up to 2,000 rows) that is the exact BM25 of the scope. So a name in
#: every memory weighs almost nothing and a rare word a lot — ``ts_rank_cd`` has no idf and ranked them
#: alike. Term frequency is binary (memories are at most 150 characters) with three levels: a term in the
#: memory's own text (``search_vector`` lexemes of the default weight D) counts ``OWN_TF``, a term only in its
#: conversational context (its message and the one before, weight C — ``memory.store.indexing.CONTEXT_WEIGHT``)
#: counts ``context_tf``, a term only in the turns around a conversation unit (weight B, ``AROUND_WEIGHT``)
#: ``around_tf`` (``MEMDESK_RECALL``). Length normalisation uses the number of distinct lexemes. ``coverage`` (the share
#: of query terms in the memory's own text) feeds the confidence behind ``needs_confirmation``; a match only
#: in the context never raises it.
_LEX_SQL = """tq0 AS MATERIALIZED (SELECT {queries}),
tq AS MATERIALIZED (SELECT *, ({any_term}) AS q_any FROM tq0),
wstats AS MATERIALIZED (
    SELECT count(*)::float AS wn, (SELECT min(created_at) FROM recent) AS oldest,
           GREATEST(avg(length(search_vector)), 1)::float AS avglen
    FROM scoped
),
whits AS MATERIALIZED (
    SELECT id, len, {levels} FROM (
        SELECT s.id, length(s.search_vector) AS len, s.search_vector AS sv
        FROM scoped s CROSS JOIN tq WHERE s.search_vector @@ tq.q_any
    ) h CROSS JOIN tq
),
wdf AS MATERIALIZED (SELECT {wdfs} FROM whits),
rare AS MATERIALIZED (
    SELECT ({rare_any}) AS q_rare, (SELECT count(*) FROM recent) >= %(window)s AS full_window, w.oldest
    FROM tq CROSS JOIN wstats w CROSS JOIN wdf d
),
ohits AS MATERIALIZED (
    SELECT id, len, {levels} FROM (
        SELECT m.id, length(m.search_vector) AS len, m.search_vector AS sv
        FROM memory_memoryunit m
        WHERE {scope} AND m.created_at < (SELECT oldest FROM rare)
          AND m.search_vector @@ (SELECT q_rare FROM rare WHERE full_window AND numnode(q_rare) > 0)
    ) h CROSS JOIN tq
),
stats AS MATERIALIZED (
    SELECT w.wn AS n, w.avglen, {dfs} FROM wstats w CROSS JOIN wdf d CROSS JOIN (SELECT {odfs} FROM ohits) o
),
lex AS (
    SELECT id, coverage, row_number() OVER (ORDER BY score DESC, id) AS rnk FROM (
        SELECT m.id, (({own_hits})::float / GREATEST(1, {denominator})) AS coverage, {score} AS score
        FROM (
            SELECT h.*, %(k1)s * (1 - %(b)s + %(b)s * h.len / st.avglen) AS norm
            FROM (SELECT * FROM whits UNION ALL SELECT * FROM ohits) h CROSS JOIN stats st
        ) m CROSS JOIN tq CROSS JOIN stats st
    ) ranked
    ORDER BY score DESC, id
    LIMIT %(n)s
)"""

#: BM25's term frequency of a term in the memory's own text; one only in its context or in the turns around it
#: counts ``MEMDESK_RECALL["context_tf"]`` or ``["around_tf"]``.
OWN_TF = 2.0
#: The weight of a memory's own words in its ``search_vector`` (the default, D).
OWN_WEIGHT = "D"


def _distance_sql(n_models: int) -> str:
    """Cosine distance to the query embedded with the row's own model: vectors
    of different models live in different spaces and are never compared."""
    if n_models == 1:
        return "CASE WHEN embedding_model = %(m0)s THEN embedding <=> %(q0)s::vector END"
    whens = " ".join(f"WHEN %(m{i})s THEN embedding <=> %(q{i})s::vector" for i in range(n_models))
    return f"CASE embedding_model {whens} END"


def _weighted(term: str, weight: str) -> str:
    """The term's ``plainto_tsquery`` with every lexeme restricted to ``weight`` ('a' & 'b' → 'a':D & 'b':D): it
    matches a tsvector exactly where the query matches the tsvector's lexemes of that weight. Lexemes are quoted
    in a tsquery's text, a quote inside one doubled."""
    query = f"plainto_tsquery('{TS_CONFIG}', {term})::text"
    return "regexp_replace(" + query + r", '''((?:[^'']|'''')*)''', '''\1'':" + weight + "', 'g')::tsquery"


def _lex_sql(n_terms: int) -> str:
    if n_terms == 0:
        return _NO_LEX
    terms = range(n_terms)
    idf = [f"ln(1 + (st.n - st.df{i} + 0.5) / (st.df{i} + 0.5))" for i in terms]
    saturation = "(%(k1)s + 1) * {tf} / ({tf} + m.norm)"
    # each term matched once per row: 2 = in the memory's own text, 1 = only in its context, 3 = only in the
    # turns around it, 0 = absent. The weight is read by the term's query restricted to it (``own{i}``: 'word':D),
    # not by filtering each row's tsvector to a weight: a row of the window then costs one match per absent term
    # and no copy of its tsvector, which was half the lexical leg's time over a long history.
    levels = ", ".join(
        f"(CASE WHEN NOT sv @@ tq.q{i} THEN 0 WHEN sv @@ tq.own{i} THEN 2 WHEN sv @@ tq.ctx{i} THEN 1 ELSE 3 END)"
        f" AS h{i}"
        for i in terms
    )
    score = " + ".join(
        f"(CASE m.h{i} WHEN 2 THEN {idf[i]} * {saturation.format(tf=OWN_TF)}"
        f" WHEN 1 THEN {idf[i]} * {saturation.format(tf='%(context_tf)s')}"
        f" WHEN 3 THEN {idf[i]} * {saturation.format(tf='%(around_tf)s')} ELSE 0 END)"
        for i in terms
    )
    return _LEX_SQL.format(
        scope=SCOPE_SQL,
        queries=", ".join(
            f"plainto_tsquery('{TS_CONFIG}', %(t{i})s) AS q{i}, {_weighted(f'%(t{i})s', OWN_WEIGHT)} AS own{i}, "
            f"{_weighted(f'%(t{i})s', CONTEXT_WEIGHT)} AS ctx{i}"
            for i in terms
        ),
        any_term=" || ".join(f"q{i}" for i in terms),
        levels=levels,
        wdfs=", ".join(f"count(*) FILTER (WHERE h{i} > 0)::float AS wdf{i}" for i in terms),
        odfs=", ".join(f"count(*) FILTER (WHERE h{i} > 0)::float AS odf{i}" for i in terms),
        rare_any=" || ".join(
            f"(CASE WHEN d.wdf{i} <= %(rare_share)s * w.wn THEN tq.q{i} ELSE ''::tsquery END)" for i in terms
        ),
        # counted in the window (a sample of the scope: idf needs the ratio, not the count), plus the older
        # rows that a rare term found
        dfs=", ".join(f"LEAST(d.wdf{i} + o.odf{i}, w.wn) AS df{i}" for i in terms),
        own_hits=" + ".join(f"(m.h{i} = 2)::int" for i in terms),
        denominator=" + ".join(f"(numnode(tq.q{i}) > 0)::int" for i in terms),
        score=score,
    )


def _candidate_sql(n_terms: int, n_models: int = 1) -> str:
    return _CANDIDATE_SQL.format(
        scope=SCOPE_SQL, valid=valid_sql("r", "%(as_of)s"), distance=_distance_sql(n_models), lex=_lex_sql(n_terms)
    )


def vector_literal(vector: Any) -> str:
    # tolist() first: Python floats format faster than numpy scalars, and every dimension of every query is formatted.
    return "[" + ",".join(f"{x:.6f}" for x in vector.tolist()) + "]"


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _embed_pool() -> ThreadPoolExecutor:
    """Threads that embed queries while the calling thread runs the rule stage's SQL (onnxruntime and numpy
    release the GIL). They never touch the database: Django's connections stay on the calling thread."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="recall-embed")
    return _pool


def _embed_query(
    models: list[str], query: str, intents: bool, rewrite: Future[Rewrite]
) -> tuple[dict[str, str], float]:
    """Rewrite and embed ``query`` (the intent may come from its embedding), resolving ``rewrite`` first."""
    start = time.perf_counter()
    try:
        rewritten, vectors = rewrite_and_embed(query, models, intents=intents)
    except BaseException as exc:
        rewrite.set_exception(exc)
        raise
    rewrite.set_result(rewritten)
    return {m: vector_literal(v) for m, v in vectors.items()}, elapsed_ms(start)


@dataclass(frozen=True)
class QueryEmbedding:
    """A query's embedding under way on a pool thread (``embed_query_soon``), for ``recall`` to use."""

    tenant_id: Any
    query: str
    rewritten: str  # the intent table's rewrite, known at once
    models: list[str]
    vectors: Future[tuple[dict[str, str], float]]
    #: The rewrite the vectors are of, set by the pool thread: the embedding classifier's when the table had none.
    rewrite: Future[Rewrite] | None = None

    @property
    def searched(self) -> str:
        """The text the vector leg searches with (waits for the embedding when the intent may come from it)."""
        return self.rewrite.result().text if self.rewrite is not None else self.rewritten


def embed_query_soon(tenant: Tenant, query: str) -> QueryEmbedding:
    """Start embedding ``query`` (rewritten as ``recall`` rewrites it) with each model the tenant uses, on a
    pool thread, and return at once: a chat turn starts it before extracting the message's facts, so the
    two overlap (the encoder's matrix products release the GIL), and passes it to ``recall``."""
    rewrite: Future[Rewrite] = Future()
    table = rewrite_query(query).text
    intents = bool(tuning().intent_embedding)
    models = embeddings.models_for(tenant, MemoryType.values)
    vectors = _embed_pool().submit(_embed_query, models, query, intents, rewrite)
    return QueryEmbedding(tenant.pk, query, table, models, vectors, rewrite)


def candidate_stage(
    tenant: Tenant,
    session: ChatSession,
    models: list[str],
    query_vectors: Future[tuple[dict[str, str], float]],
    terms: list[str],
    as_of: datetime,
    k: int,
    trace: dict[str, Any] | None = None,
) -> tuple[list[RecallHit], float]:
    knobs = tuning()
    vectors, embed_ms = query_vectors.result()
    params: dict[str, Any] = {
        **scope_params(tenant, session, as_of),
        "n": int(knobs.candidates),
        "window": int(knobs.vector_window),
        "rare_share": float(knobs.rare_share),
        "k1": float(knobs.bm25_k1),
        "b": float(knobs.bm25_b),
        "context_tf": float(knobs.context_tf),
        "around_tf": float(knobs.around_tf),
    }
    for i, model in enumerate(models):
        params[f"m{i}"] = model
        params[f"q{i}"] = vectors[model]
    for i, term in enumerate(terms):
        params[f"t{i}"] = term
    sql = _candidate_sql(len(terms), len(models))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if trace is not None:
        trace["candidate_sql"], trace["candidate_params"] = sql, params
        trace["candidates"] = [
            {"id": mid, "similarity": sim, "vector_rank": vrank, "coverage": coverage, "lexical_rank": lrank}
            for mid, sim, vrank, coverage, lrank in rows
        ]
    rrf_k = float(knobs.rrf_k)
    scored: list[tuple[float, Any, float]] = []
    for memory_id, sim, vrank, coverage, lrank in rows:
        sim = float(sim) if sim is not None else 0.0
        coverage = float(coverage) if coverage is not None else 0.0
        fused = 0.0
        if vrank is not None and sim >= knobs.min_similarity:
            fused += knobs.w_vector / (rrf_k + vrank)
        if lrank is not None:
            fused += knobs.w_lexical / (rrf_k + lrank)
        if fused <= 0:
            continue
        confidence = max(sim, coverage)
        scored.append((fused, memory_id, confidence))
    scored.sort(key=lambda row: (-row[0], str(row[1])))
    top = scored[: max(k * 3, k)]
    memories = {m.pk: m for m in fetch_memories(tenant, "m.id = ANY(%(ids)s)", {"ids": [r[1] for r in top]})}
    hits = [
        RecallHit(
            memory=memories[mid],
            stage="vector",
            similarity=round(min(1.0, confidence), 4),
            score=round(min(1.0, confidence) * memories[mid].relevance_score, 4),
            fused=fused,
        )
        for fused, mid, confidence in top
        if mid in memories
    ]
    return hits, embed_ms
