"""Knowledge search: the passages of the article versions valid at ``as_of`` that best answer a query, found by
two legs fused, as memory's recall finds memories (``memory.recall``, whose design this follows):

- **lexical** — Okapi BM25 over the passages' tsvectors, the query segmented as they were
  (``memory.text.query_terms``: rjieba for Chinese), so 「退货运费谁承担」 finds 退货 and 运费. Term frequency is
  binary with two levels: a term in the passage's own words counts :data:`OWN_TF`, one only in its title or
  headings :data:`HEADING_TF`. Document frequencies and the average length are those of the passages searched
  (the tenant's, valid at ``as_of``, of the segment), so a word in every article weighs almost nothing.
- **vector** — cosine similarity of the query, embedded with the tenant's knowledge model, to the passages
  embedded with that model (``knowledge.indexing``); exact, over the same passages (no approximate index: a
  tenant's knowledge is thousands of passages, not millions, and pgvector's HNSW applies the validity and
  tenant filters after its scan, returning too few rows). A passage the vector leg alone finds counts only when
  its similarity reaches :data:`MIN_SIMILARITY`: a query about nothing the tenant wrote finds nothing.
- **fusion** — weighted reciprocal rank (``1 / (RRF_K + rank)`` per leg); ``score`` is the fused value over the
  best possible one, in (0, 1].

Validity: a passage is searched only when its version is valid at ``as_of`` (default now):
``valid_from <= as_of < valid_until`` (:data:`VALID_SQL`; its Python twin ``ArticleVersion.valid_at``). A
superseded or retired version is never served for a time after its end.

Audience: an article with a ``segment`` is searched only by a search for that segment; articles without one by
every search.

The tenant is passed explicitly and named in every table's condition; the statement runs in the tenant's
row-level-security scope, the second wall.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from django.utils import timezone

from knowledge.hits import KnowledgeHit
from knowledge.indexing import knowledge_model
from memory.embeddings import embed_one
from memory.text import TS_CONFIG, query_terms
from tenants.rls import tenant_scope

#: Candidates each leg hands to the fusion.
CANDIDATES = 50
RRF_K = 60.0
W_LEXICAL = 1.0
W_VECTOR = 1.0
#: A passage found by the vector leg alone below this cosine similarity is dropped.
MIN_SIMILARITY = 0.35
OWN_TF = 2.0
HEADING_TF = 1.0
BM25_K1 = 1.2
BM25_B = 0.75
#: The most query terms the lexical leg uses (a pasted paragraph is not a question).
MAX_TERMS = 24
MAX_K = 20

#: The one SQL form of "this version is served at ``as_of``" (``ArticleVersion.valid_at`` is the Python one).
VALID_SQL = "v.valid_from <= %(as_of)s AND (v.valid_until IS NULL OR v.valid_until > %(as_of)s)"

_SEARCH_SQL = """
WITH valid AS MATERIALIZED (
    SELECT p.id, p.search_vector AS sv, length(p.search_vector) AS len,
           CASE WHEN p.embedding_model = %(model)s THEN p.embedding <=> %(qvec)s::vector END AS distance
    FROM knowledge_passage p
    JOIN knowledge_articleversion v ON v.id = p.version_id AND v.tenant_id = %(tenant)s
    JOIN knowledge_article a ON a.id = v.article_id AND a.tenant_id = %(tenant)s
    WHERE p.tenant_id = %(tenant)s AND {valid} AND (a.segment = '' OR a.segment = %(segment)s)
),
vec AS (
    SELECT id, 1 - distance AS sim, row_number() OVER (ORDER BY distance, id) AS rnk
    FROM valid WHERE distance IS NOT NULL
    ORDER BY distance, id
    LIMIT %(n)s
),
{lex}
SELECT COALESCE(vec.id, lex.id) AS id, vec.sim, vec.rnk, lex.rnk
FROM vec FULL OUTER JOIN lex ON vec.id = lex.id
"""

_NO_LEX = "lex AS (SELECT NULL::bigint AS id, NULL::bigint AS rnk WHERE false)"

_LEX_SQL = """tq AS MATERIALIZED (SELECT {queries}),
stats AS MATERIALIZED (SELECT count(*)::float AS n, GREATEST(avg(len), 1)::float AS avglen FROM valid),
hits AS MATERIALIZED (
    SELECT h.id, h.len, {levels}
    FROM (SELECT id, len, sv, ts_filter(sv, '{{d}}') AS own FROM valid CROSS JOIN tq WHERE sv @@ ({any_term})) h
    CROSS JOIN tq
),
df AS MATERIALIZED (SELECT {dfs} FROM hits),
lex AS (
    SELECT id, row_number() OVER (ORDER BY score DESC, id) AS rnk FROM (
        SELECT h.id, {score} AS score
        FROM hits h CROSS JOIN stats st CROSS JOIN df,
             LATERAL (SELECT %(k1)s * (1 - %(b)s + %(b)s * h.len / st.avglen) AS norm) m
    ) scored
    WHERE score > 0
    ORDER BY score DESC, id
    LIMIT %(n)s
)"""

_HITS_SQL = """
SELECT p.id, a.id, v.number, v.title, a.url, p.public_id, p.text, p.heading_path
FROM knowledge_passage p
JOIN knowledge_articleversion v ON v.id = p.version_id AND v.tenant_id = %(tenant)s
JOIN knowledge_article a ON a.id = v.article_id AND a.tenant_id = %(tenant)s
WHERE p.tenant_id = %(tenant)s AND p.id = ANY(%(ids)s)
"""


def _lex_sql(n_terms: int) -> str:
    if n_terms == 0:
        return _NO_LEX
    terms = range(n_terms)
    # each term once per passage: 2 = in its own words, 1 = only in its title or headings, 0 = absent
    levels = ", ".join(f"(CASE WHEN own @@ tq.q{i} THEN 2 WHEN sv @@ tq.q{i} THEN 1 ELSE 0 END) AS h{i}" for i in terms)
    idf = [f"ln(1 + (st.n - df.df{i} + 0.5) / (df.df{i} + 0.5))" for i in terms]
    saturation = "(%(k1)s + 1) * {tf} / ({tf} + m.norm)"
    score = " + ".join(
        f"(CASE h.h{i} WHEN 2 THEN {idf[i]} * {saturation.format(tf=OWN_TF)}"
        f" WHEN 1 THEN {idf[i]} * {saturation.format(tf=HEADING_TF)} ELSE 0 END)"
        for i in terms
    )
    return _LEX_SQL.format(
        queries=", ".join(f"plainto_tsquery('{TS_CONFIG}', %(t{i})s) AS q{i}" for i in terms),
        any_term=" || ".join(f"tq.q{i}" for i in terms),
        levels=levels,
        dfs=", ".join(f"count(*) FILTER (WHERE h{i} > 0)::float AS df{i}" for i in terms),
        score=score,
    )


def _vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(f"{float(x):.6f}" for x in vector) + "]"


def search(
    tenant: Any,
    query: str,
    *,
    as_of: datetime | None = None,
    k: int = 5,
    segment: str | None = None,
    embedding: Sequence[float] | None = None,
    timings: dict[str, float] | None = None,
) -> list[KnowledgeHit]:
    """The ``k`` best passages for ``query`` (the module's docstring), best first. ``embedding``: the query's
    vector under the tenant's knowledge model (``knowledge.indexing.knowledge_model``), when the caller has it;
    else it is embedded here. ``timings``, when given, receives ``embed`` and ``sql`` in milliseconds."""
    as_of = as_of or timezone.now()
    k = max(1, min(int(k), MAX_K))
    model = knowledge_model(tenant)
    start = time.perf_counter()
    if embedding is None:
        embedding = embed_one(query, model=model, kind="query").tolist()
    embedded = time.perf_counter()
    terms = query_terms(query)[:MAX_TERMS]
    params: dict[str, Any] = {
        "tenant": getattr(tenant, "pk", tenant),
        "as_of": as_of,
        "segment": segment or "",
        "model": model,
        "qvec": _vector_literal(embedding),
        "n": CANDIDATES,
        "k1": BM25_K1,
        "b": BM25_B,
        **{f"t{i}": term for i, term in enumerate(terms)},
    }
    sql = _SEARCH_SQL.format(valid=VALID_SQL, lex=_lex_sql(len(terms)))
    with tenant_scope(tenant), connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
        scored: list[tuple[float, int, float]] = []
        for passage_id, sim, vrank, lrank in rows:
            similarity = float(sim) if sim is not None else 0.0
            fused = 0.0
            if vrank is not None and (lrank is not None or similarity >= MIN_SIMILARITY):
                fused += W_VECTOR / (RRF_K + vrank)
            if lrank is not None:
                fused += W_LEXICAL / (RRF_K + lrank)
            if fused > 0:
                scored.append((fused, passage_id, similarity))
        scored.sort(key=lambda row: (-row[0], row[1]))
        top = scored[:k]
        details: dict[int, tuple[Any, ...]] = {}
        if top:
            cursor.execute(_HITS_SQL, {"tenant": params["tenant"], "ids": [row[1] for row in top]})
            details = {row[0]: row[1:] for row in cursor.fetchall()}
    if timings is not None:
        timings["embed"] = round((embedded - start) * 1000, 3)
        timings["sql"] = round((time.perf_counter() - embedded) * 1000, 3)
    best = (W_LEXICAL + W_VECTOR) / (RRF_K + 1)
    hits = []
    for fused, passage_id, similarity in top:
        if passage_id not in details:
            continue
        article_id, number, title, url, public_id, text, heading_path = details[passage_id]
        hits.append(
            KnowledgeHit(
                article_id=str(article_id),
                version=number,
                title=title,
                url=url,
                passage_id=public_id,
                text=text,
                score=round(min(1.0, fused / best), 4),
                heading_path=tuple(heading_path or ()),
                similarity=round(similarity, 4),
            )
        )
    return hits
