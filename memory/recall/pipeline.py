"""Three-stage recall (seed S7); long because its three stages and their SQL are one pipeline.

The one implementation used by the API, the chat runtime and the benchmarks.

1. **Rule stage** — the query names a key (「查我的订单」 → ``order_id``,
   「进度如何」 → the batch progress): exact lookups, no model.
2. **Candidate stage** — hybrid: pgvector cosine distance on the query
   rewritten by intent, and PostgreSQL full-text search on jieba-segmented
   text, fused by weighted reciprocal rank (weights from settings, chosen by
   measurement in ``bench/locomo_recall.py``).
   The query embedding runs on a pool thread while the rule stage's lookups
   run, so ``timings_ms["embed"]`` (its own duration) overlaps ``rule``.
3. **TTL filter and rerank** — validity (``created_at <= as_of < expires_at``)
   and scope are filtered inside the SQL; candidates are reranked by
   ``relevance_score``. When the best ``relevance_score`` among the hits is
   below 0.7 the caller must ask the user to confirm instead of guessing.

Why no HNSW index here: pgvector 0.6 applies ``WHERE`` filters after the
HNSW scan, so a per-end-user filter silently returns too few rows. Recall
reads one end user's (or one session's) rows — tens to hundreds — through a
B-tree index and computes exact distances on them (a ``MATERIALIZED`` CTE
keeps the planner from choosing an approximate index). Correct by
construction, and fast at that size (bench/RESULTS.md).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from conversations.access import require_session_id
from conversations.models import ChatSession
from memory import metrics
from memory.conversation.units import TIMELESS_KEYS, asks_about, is_conversation_key, squash
from memory.embeddings import models as embeddings
from memory.models import MemoryType, MemoryUnit
from memory.recall.rewrite import Rewrite, rewrite_and_embed, rewrite_query, rule_keys
from memory.store.consent import memory_enabled_for_session
from memory.store.feedback import mark_recalled
from memory.store.read import SCOPE_SQL, fetch_memories, scope_params, valid_sql
from memory.text.language import TS_CONFIG, query_terms
from memory.text.mood import Mood, care_reason, detect_mood
from tenants.models import Tenant
from tenants.rls import tenant_scope

#: Below this best ``relevance_score`` among the hits, the agent asks the user to confirm (seed S7).
CONFIRM_BELOW = 0.7
#: Columns recall's callers never read from a hit (they load lazily if one does): parsing a 384-float vector
#: per hit is a measurable share of a recall.
MAX_K = 50

#: Chosen on LoCoMo (bench/locomo_recall.py, grid on half the conversations,
#: checked on the other half): equal weights with rrf_k 10 beat rrf_k 60 and
#: 2:1 in favour of the lexical leg; bench/RESULTS.md has the figures.
DEFAULT_TUNING = {
    "w_vector": 1.0,
    "w_lexical": 1.0,
    "rrf_k": 10,
    #: Rows each leg hands to the fusion. 100 rather than 50: a memory ranked moderately by both legs makes the
    #: fused top 10 more often — through the chat path on LoCoMo, on each half of the conversations
    #: (bench/RESULTS.md).
    "candidates": 100,
    #: Both legs read the end user's newest rows valid at ``as_of``, at most this many (the window; see
    #: "Long histories" in docs/memory.md); the lexical leg also searches older rows for rare words.
    "vector_window": 2000,
    #: Past the window, the lexical leg searches the whole history (through the GIN index) for the query
    #: words found in at most this share of the window's rows: a word common in the window weighs little in
    #: BM25 and would make the search read thousands of older rows; 1.0, every word (docs/memory.md, "Long
    #: histories", has the trade-off).
    "rare_share": 0.05,
    #: A conversation unit that asks (``data["question"]``) weighs this much of a statement in the rerank.
    "question_weight": 0.5,
    #: A query about the present (「现在」, "currently") lifts newer candidates: the newest by this share.
    "recency_weight": 1.0,
    #: A candidate naming an identifier the query quotes (BATCH-2031, an order number) weighs 1 + this.
    "identifier_weight": 1.0,
    #: A newer unit that changes or corrects something (``data["update"]``) overtakes an older candidate
    #: unit at least this similar (cosine, same model); for a query about the present any newer unit at
    #: least ``now_similarity`` similar does. Overtaken units rank after the current ones.
    "update_similarity": 0.3,
    "now_similarity": 0.35,
    #: Which conversation units stating a value that is no longer current rank after the current hits:
    #: "topic", those whose out-of-date value the query asks about (``memory.conversation.units.KEY_TOPICS``);
    #: "any", every one, whatever the query asks.
    "stale_scope": "topic",
    "min_similarity": 0.2,
    #: When the query's mood is negative (``memory.text.mood``), a care memory (a promised callback, a coupon or
    #: compensation given, a complaint on record) weighs up to 1 + this in the rerank, scaled by the mood's
    #: score: for that turn only, stored scores untouched. 0 turns it off (docs/memory-intelligence.md).
    "mood_care_lift": 1.0,
    "bm25_k1": 1.2,
    "bm25_b": 0.75,
    #: A query the intent table leaves alone is classified by its embedding against labelled intent examples
    #: and rewritten when one is near enough (``memory.recall.rewrite.rewrite_and_embed``; docs/memory-intelligence.md).
    #: false: the table alone.
    "intent_embedding": True,
}


@dataclass
class RecallHit:
    memory: MemoryUnit
    stage: str  # "rule" | "vector"
    similarity: float
    score: float
    fused: float = 0.0
    #: A conversation unit stating a value that is no longer current at ``as_of`` (the old address after a
    #: move, a coupon past its expiry): ranked after every current hit (``_current_first``).
    stale: bool = False


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


def tuning() -> dict[str, float]:
    return {**DEFAULT_TUNING, **settings.MEMDESK_RECALL}


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


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
#: alike. Term frequency is binary (memories are at most 150 characters) with two levels: a term in the
#: memory's own text (``search_vector`` lexemes of the default weight D) counts ``OWN_TF``, a term only in its
#: conversational context (the message before the source message, weight C — ``memory.store.indexing.CONTEXT_WEIGHT``)
#: counts ``CONTEXT_TF``. Length normalisation uses the number of distinct lexemes. ``coverage`` (the share
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
        SELECT s.id, length(s.search_vector) AS len, s.search_vector AS sv, ts_filter(s.search_vector, '{{d}}') AS own
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
        SELECT m.id, length(m.search_vector) AS len, m.search_vector AS sv, ts_filter(m.search_vector, '{{d}}') AS own
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

OWN_TF = 2.0
CONTEXT_TF = 1.0


def _distance_sql(n_models: int) -> str:
    """Cosine distance to the query embedded with the row's own model: vectors
    of different models live in different spaces and are never compared."""
    if n_models == 1:
        return "CASE WHEN embedding_model = %(m0)s THEN embedding <=> %(q0)s::vector END"
    whens = " ".join(f"WHEN %(m{i})s THEN embedding <=> %(q{i})s::vector" for i in range(n_models))
    return f"CASE embedding_model {whens} END"


def _lex_sql(n_terms: int) -> str:
    if n_terms == 0:
        return _NO_LEX
    terms = range(n_terms)
    idf = [f"ln(1 + (st.n - st.df{i} + 0.5) / (st.df{i} + 0.5))" for i in terms]
    saturation = "(%(k1)s + 1) * {tf} / ({tf} + m.norm)"
    # each term matched once per row: 2 = in the memory's own text, 1 = only in its context, 0 = absent
    levels = ", ".join(f"(CASE WHEN own @@ tq.q{i} THEN 2 WHEN sv @@ tq.q{i} THEN 1 ELSE 0 END) AS h{i}" for i in terms)
    score = " + ".join(
        f"(CASE m.h{i} WHEN 2 THEN {idf[i]} * {saturation.format(tf=OWN_TF)}"
        f" WHEN 1 THEN {idf[i]} * {saturation.format(tf=CONTEXT_TF)} ELSE 0 END)"
        for i in terms
    )
    return _LEX_SQL.format(
        scope=SCOPE_SQL,
        queries=", ".join(f"plainto_tsquery('{TS_CONFIG}', %(t{i})s) AS q{i}" for i in terms),
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


def _vector_literal(vector: Any) -> str:
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
    return {m: _vector_literal(v) for m, v in vectors.items()}, _ms(start)


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
    intents = bool(tuning()["intent_embedding"])
    models = embeddings.models_for(tenant, MemoryType.values)
    vectors = _embed_pool().submit(_embed_query, models, query, intents, rewrite)
    return QueryEmbedding(tenant.pk, query, table, models, vectors, rewrite)


def _candidate_stage(
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
        "n": int(knobs["candidates"]),
        "window": int(knobs["vector_window"]),
        "rare_share": float(knobs["rare_share"]),
        "k1": float(knobs["bm25_k1"]),
        "b": float(knobs["bm25_b"]),
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
    rrf_k = float(knobs["rrf_k"])
    scored: list[tuple[float, Any, float]] = []
    for memory_id, sim, vrank, coverage, lrank in rows:
        sim = float(sim) if sim is not None else 0.0
        coverage = float(coverage) if coverage is not None else 0.0
        fused = 0.0
        if vrank is not None and sim >= knobs["min_similarity"]:
            fused += knobs["w_vector"] / (rrf_k + vrank)
        if lrank is not None:
            fused += knobs["w_lexical"] / (rrf_k + lrank)
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


# The keyed facts of some keys that a session may see and that are valid at ``as_of`` (the current values).
_CURRENT_TEMPLATE = "SELECT m.key, m.content, m.data FROM memory_memoryunit m WHERE {scope} AND m.key = ANY(%(keys)s)"
_CURRENT_SQL = _CURRENT_TEMPLATE.format(scope=SCOPE_SQL)


def _states(memory: dict[str, Any], value: str) -> bool:
    """Whether a keyed memory holds ``value`` (in its content or its data's values)."""
    wanted = squash(value)
    texts = [memory["content"], *(str(v) for v in (memory["data"] or {}).values() if isinstance(v, str | int))]
    return any(wanted and wanted in squash(t) for t in texts)


#: Stateful keys whose value is about one of several things, and the data field naming it: the progress of
#: BATCH-2031 is not made untrue by BATCH-2107's.
SUBJECT_FIELDS = {"batch_progress": "task_id"}


def _subject(key: str, value: str) -> str | None:
    """What a unit's ``value`` of ``key`` is about (``"BATCH-2031 100/100"`` → ``"BATCH-2031"``), for a key
    of ``SUBJECT_FIELDS``; else None."""
    if key not in SUBJECT_FIELDS:
        return None
    head = value.split(" ", 1)[0]
    return head or None


def _stale_units(
    tenant: Tenant,
    session: ChatSession,
    units: list[MemoryUnit],
    as_of: datetime,
    query: str | None = None,
    *,
    present: bool = False,
) -> set[Any]:
    """The conversation units among ``units`` that state a value no longer current at ``as_of``: the key's
    current memories hold another value, or — for a key with a validity of its own — none is current any
    more. With ``query``, only the values it asks about count (``memory.conversation.units.asks_about``): the rest
    of such a unit is as true as it was; ``present``: the query asks how things stand now (``about_now``). One
    query of the current values, only when a unit states such facts."""
    scope = str(tuning()["stale_scope"])
    keys = sorted(
        {
            key
            for u in units
            for key in (u.data or {}).get("facts", {})
            if query is None or scope == "any" or asks_about(query, key, about_now=present)
        }
    )
    if not keys:
        return set()
    with connection.cursor() as cursor:
        cursor.execute(_CURRENT_SQL, {**scope_params(tenant, session, as_of), "keys": keys})
        current: dict[str, list[dict[str, Any]]] = {}
        for key, content, data in cursor.fetchall():
            current.setdefault(key, []).append(
                {"content": content, "data": json.loads(data) if isinstance(data, str) else data}
            )
    stale = set()
    for unit in units:
        for key, value in (unit.data or {}).get("facts", {}).items():
            if key not in keys:
                continue
            now = current.get(key, [])
            subject = _subject(key, value)
            if subject is not None:  # a value about one of several things: only that thing's current value counts
                now = [m for m in now if (m["data"] or {}).get(SUBJECT_FIELDS[key]) == subject]
                if not now:
                    continue
            if now and not any(_states(m, value) for m in now):
                stale.add(unit.pk)  # another value is current
            elif not now and key not in TIMELESS_KEYS:
                stale.add(unit.pk)  # the value's own validity has ended
    return stale


# Pairs of candidate units, the older first, with the cosine similarity of their vectors (same model only).
# Strictly older: the units of one message share its moment, and neither overtakes the other.
_PAIRS_SQL = """
SELECT a.id, b.id, 1 - (a.embedding <=> b.embedding)
FROM memory_memoryunit a
JOIN memory_memoryunit b ON b.tenant_id = a.tenant_id AND b.id = ANY(%(ids)s) AND b.embedding_model = a.embedding_model
     AND b.created_at > a.created_at
WHERE a.tenant_id = %(tenant)s AND a.id = ANY(%(ids)s) AND a.embedding IS NOT NULL AND b.embedding IS NOT NULL
"""


#: An identifier a customer may quote (BATCH-2031, DD20231128457, HT2405010288): letters and digits, or a
#: long run of digits.
_IDENTIFIER = re.compile(
    r"(?<![A-Za-z0-9])(?:(?=[A-Za-z0-9-]*\d)(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9-]{3,}|\d{8,})(?![A-Za-z0-9])"
)


def query_identifiers(query: str) -> list[str]:
    """The identifiers ``query`` quotes, squashed as ``memory.conversation.units.squash`` does (「BATCH-2031 导完了吗」
    → ``["batch2031"]``)."""
    return [squash(m) for m in _IDENTIFIER.findall(query)]


def _names(memory: MemoryUnit, identifiers: list[str]) -> bool:
    squashed = squash(memory.content)
    return any(i in squashed for i in identifiers)


def _overtaken(
    tenant: Tenant, units: list[MemoryUnit], *, about_now: bool, identifiers: list[str] | None = None
) -> dict[Any, Any]:
    """Units a newer unit among ``units`` has overtaken, each with the one that did: a unit that changes or
    corrects something (``data["update"]``) and is at least ``update_similarity`` similar, or — for a query
    about the present — any newer unit at least ``now_similarity`` similar. Where several did, one that
    changes it comes before one merely newer, then the newest. A unit naming an identifier the query quotes
    is never overtaken by one that does not name it: BATCH-2107's progress is not BATCH-2031's."""
    knobs = tuning()
    updates = {u.pk for u in units if (u.data or {}).get("update")}
    if len(units) < 2 or not (updates or about_now):
        return {}
    created = {u.pk: u.created_at for u in units}
    naming = {u.pk for u in units if identifiers and _names(u, identifiers)}
    with connection.cursor() as cursor:
        cursor.execute(_PAIRS_SQL, {"tenant": tenant.pk, "ids": [u.pk for u in units]})
        pairs = cursor.fetchall()
    overtaken: dict[Any, Any] = {}
    best: dict[Any, tuple[bool, Any, float]] = {}
    for older, newer, similarity in pairs:
        if older in naming and newer not in naming:
            continue
        by_update = newer in updates and similarity >= float(knobs["update_similarity"])
        if by_update or (about_now and similarity >= float(knobs["now_similarity"])):
            # A unit that says it changes something succeeds the older one before any merely newer unit;
            # then the newest; of units said at the same moment, the one most like the older unit.
            rank = (by_update, created[newer], similarity)
            if older not in best or rank > best[older]:
                overtaken[older], best[older] = newer, rank
    return overtaken


def _after_overtakers(hits: list[RecallHit], overtaken: dict[Any, Any]) -> list[RecallHit]:
    """``hits`` where a unit ranked above the newer unit that overtook it gives that unit its place: the
    newer one moves up to just above it (the older is marked ``stale``). Nothing leaves the list."""
    if not overtaken:
        return hits
    by_id = {h.memory.pk: h for h in hits}
    position = {pk: i for i, pk in enumerate(by_id)}
    out: list[RecallHit] = []
    emitted: set[Any] = set()
    for hit in hits:
        if hit.memory.pk in emitted:
            continue
        newer = overtaken.get(hit.memory.pk)
        if newer in by_id and position[newer] > position[hit.memory.pk]:
            hit.stale = True
            if newer not in emitted:
                out.append(by_id[newer])
                emitted.add(newer)
        out.append(hit)
        emitted.add(hit.memory.pk)
    return out


def _current_first(
    tenant: Tenant,
    session: ChatSession,
    hits: list[RecallHit],
    as_of: datetime,
    *,
    about_now: bool = False,
    query: str | None = None,
) -> list[RecallHit]:
    """One ranked list over keyed facts and conversation units: of a keyed fact and a unit from the same
    message, only the higher ranked stays (one fact, said once), and units stating a superseded or ended
    value follow every current hit, in their own order."""
    units = [h.memory for h in hits if is_conversation_key(h.memory.key)]
    if not units:
        return hits
    # A keyed fact and a unit of the same message say the same thing once: a rule-stage fact (asked for by
    # key) stays and the unit goes; otherwise the unit, which says it in the customer's or agent's own words
    # with what surrounds it, takes the better of the two places and the fact goes.
    by_rule = {h.memory.source_message_id for h in hits if h.stage == "rule" and not is_conversation_key(h.memory.key)}
    with_unit = {h.memory.source_message_id for h in hits if is_conversation_key(h.memory.key)}
    kept: list[RecallHit] = []
    taken: set[Any] = set()
    for hit in hits:
        memory, source = hit.memory, hit.memory.source_message_id
        unit = is_conversation_key(memory.key)
        if source is not None and memory.key and not unit and hit.stage != "rule" and source in with_unit:
            moved = [h for h in hits if h.memory.source_message_id == source and is_conversation_key(h.memory.key)]
            kept.extend(h for h in moved if h.memory.pk not in taken)  # the units move up here
            taken.update(h.memory.pk for h in moved)
            continue
        if unit and source in by_rule or memory.pk in taken:
            continue
        taken.add(memory.pk)
        kept.append(hit)
    kept_units = [h.memory for h in kept if is_conversation_key(h.memory.key)]
    stale = _stale_units(tenant, session, kept_units, as_of, query, present=about_now)
    for hit in kept:
        hit.stale = hit.memory.pk in stale
    current = [h for h in kept if not h.stale]
    current = _after_overtakers(
        current,
        _overtaken(
            tenant,
            [h.memory for h in current if is_conversation_key(h.memory.key)],
            about_now=about_now,
            identifiers=query_identifiers(query) if query else None,
        ),
    )
    return current + [h for h in kept if h.stale]


#: Words of a question about the present state of things: the newest statement is likeliest to hold.
_ABOUT_NOW = re.compile(
    r"现在|目前|当前|最新|最后|最终|如今|改成|改到|换成|调整|更新|还是"
    r"|(?i:\b(?:now|currently|current|latest|most recent|at the moment|these days|still|final|anymore)\b)"
)


def about_now(query: str) -> bool:
    """Whether ``query`` asks how things stand now (「现在」, 「最后」, "currently")."""
    return bool(_ABOUT_NOW.search(query))


def _care_lift(mood: Mood | None, memory: MemoryUnit) -> float:
    """1 + ``mood_care_lift`` x the mood's score for a care memory when the query is negative, else 1."""
    if mood is None or not mood.negative or care_reason(memory.key, memory.content) is None:
        return 1.0
    return 1 + max(0.0, float(tuning()["mood_care_lift"])) * mood.score


def _rerank_weights(query: str, hits: list[RecallHit], mood: Mood | None = None) -> dict[Any, float]:
    """Per candidate, what multiplies its fused rank and relevance score: a question unit weighs
    ``question_weight``; one naming an identifier the query quotes 1 + ``identifier_weight``; for a query
    about the present, the candidates' recency (newest 1, oldest 0) adds up to ``recency_weight``; for a
    negative ``mood``, a care memory's lift (``_care_lift``)."""
    knobs = tuning()
    weights = {}
    order = sorted(hits, key=lambda h: h.memory.created_at)
    # Units said at the same moment (one message's) share its recency: the mean of their places, so that
    # which of them ranks first never depends on their random ids.
    places: dict[Any, list[int]] = {}
    for i, hit in enumerate(order):
        places.setdefault(hit.memory.created_at, []).append(i)
    recent = {
        h.memory.pk: sum(places[h.memory.created_at]) / len(places[h.memory.created_at]) / max(1, len(order) - 1)
        for h in order
    }
    now = about_now(query)
    identifiers = query_identifiers(query)
    for hit in hits:
        weight = 1.0
        if identifiers and _names(hit.memory, identifiers):
            weight *= 1 + float(knobs["identifier_weight"])
        if _is_question_unit(hit.memory):
            weight *= float(knobs["question_weight"])
        if now:
            weight *= 1 + float(knobs["recency_weight"]) * recent[hit.memory.pk]
        weights[hit.memory.pk] = weight * _care_lift(mood, hit.memory)
    return weights


# The conversation units of the message that follows each question unit's message in its session: the
# answer to a question is what was said next (the agent's reply to the user's question, the user's reply
# to the agent's). The messages come first, in a CTE of their own: the statement is prepared, and a generic
# plan (one for every parameter value, which PostgreSQL switches to after five runs when it looks no dearer)
# that started from the scope's side read every memory of the end user to find the few answers.
_ANSWERS_SQL = """
WITH answered AS MATERIALIZED (
    SELECT q.id AS question_id, am.id AS message_id
    FROM memory_memoryunit q
    JOIN chat_message qm ON qm.tenant_id = q.tenant_id AND qm.id = q.source_message_id
    JOIN chat_message am ON am.tenant_id = qm.tenant_id AND am.session_id = qm.session_id AND am.seq = qm.seq + 1
    WHERE q.tenant_id = %(tenant)s AND q.id = ANY(%(questions)s)
)
SELECT a.question_id, m.id AS answer_id
FROM answered a JOIN memory_memoryunit m ON m.tenant_id = %(tenant)s AND m.source_message_id = a.message_id
WHERE {scope}
ORDER BY m.created_at, m.id
"""


def _is_question_unit(memory: MemoryUnit) -> bool:
    return is_conversation_key(memory.key) and bool((memory.data or {}).get("question"))


def _score(hit: RecallHit, weights: dict[Any, float]) -> float:
    return hit.fused * hit.memory.relevance_score * weights.get(hit.memory.pk, 1.0)


def _with_answers(
    tenant: Tenant,
    session: ChatSession,
    hits: list[RecallHit],
    weights: dict[Any, float],
    as_of: datetime,
    *,
    limit: int,
) -> list[RecallHit]:
    """``hits`` ranked by their weighted score, where a question unit among the first ``limit`` brings its
    answer: the units of the next message rank as the question would without its question weight (and
    never lower than on their own). A question found by the query is where its answer is."""
    ranked = sorted(hits, key=lambda h: (-_score(h, weights), str(h.memory.pk)))
    questions = {
        h.memory.pk: h
        for h in ranked[:limit]
        if is_conversation_key(h.memory.key) and (h.memory.data or {}).get("question")
    }
    if not questions:
        return ranked
    with connection.cursor() as cursor:
        cursor.execute(
            _ANSWERS_SQL.format(scope=SCOPE_SQL), {**scope_params(tenant, session, as_of), "questions": list(questions)}
        )
        pairs = cursor.fetchall()
    if not pairs:
        return ranked
    by_id = {h.memory.pk: h for h in ranked}
    missing = [a for _, a in pairs if a not in by_id]
    loaded = {m.pk: m for m in fetch_memories(tenant, "m.id = ANY(%(ids)s)", {"ids": missing})} if missing else {}
    lifted: dict[Any, float] = {}
    for question_id, answer_id in pairs:
        question = questions[question_id]
        if answer_id not in by_id:
            if answer_id not in loaded:
                continue
            by_id[answer_id] = RecallHit(
                memory=loaded[answer_id], stage=question.stage, similarity=question.similarity,
                score=round(question.similarity * loaded[answer_id].relevance_score, 4), fused=question.fused,
            )  # fmt: skip
        as_question = question.fused * by_id[answer_id].memory.relevance_score
        lifted[answer_id] = max(lifted.get(answer_id, 0.0), as_question)
    everything = list(by_id.values())
    return sorted(everything, key=lambda h: (-max(_score(h, weights), lifted.get(h.memory.pk, 0.0)), str(h.memory.pk)))


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
        timings["rule"] = _ms(start)

        start = time.perf_counter()
        terms = list(dict.fromkeys(query_terms(query) + query_terms(embedding.searched)))[:16]
        candidates, embed_ms = _candidate_stage(tenant, session, models, query_vectors, terms, as_of, k, trace)
        timings["vector"] = _ms(start)
        timings["embed"] = embed_ms

        start = time.perf_counter()
        rule_ids = {h.memory.pk for h in rule_hits}
        # Rerank: relevance_score scales the fused rank; rule hits stay first.
        candidates = [h for h in candidates if h.memory.pk not in rule_ids]
        mood = detect_mood(query)
        weights = _rerank_weights(query, candidates, mood)
        if trace is not None:
            lifted = [str(h.memory.pk) for h in candidates if _care_lift(mood, h.memory) > 1.0]
            trace["mood"] = {"score": mood.score, "negative": mood.negative, "cues": list(mood.cues), "lifted": lifted}
        candidates = _with_answers(tenant, session, candidates, weights, as_of, limit=k * 3)
        rule_hits.sort(key=lambda h: -h.memory.relevance_score)
        hits = _current_first(tenant, session, rule_hits + candidates, as_of, about_now=about_now(query), query=query)[
            :k
        ]
        # The seed's test, on the seed's score (S7): 「对剩余结果，按relevance_score降序排列。如果最高分低于 0.7，
        # 说明当前没有高质量记忆可用」 — the best relevance_score of the hits, not ``score`` (which scales it by
        # the match's confidence, a cosine whose range depends on the embedding model).
        needs_confirmation = bool(hits) and max(h.memory.relevance_score for h in hits) < CONFIRM_BELOW
        if record:
            mark_recalled(tenant, [h.memory.pk for h in hits])
        timings["rerank"] = _ms(start)
    timings["total"] = _ms(total_start)
    metrics.observe_recall(timings)
    return RecallResult(
        hits=hits,
        needs_confirmation=needs_confirmation,
        timings_ms=timings,
        rewritten_query=embedding.searched if embedding.searched != query else None,
        rule_keys=keys,
    )
