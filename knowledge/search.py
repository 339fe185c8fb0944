"""Knowledge search: the passages of the article versions valid at ``as_of`` that best answer a query, found by
two legs fused, as memory's recall finds memories (``memory.recall``, whose design this follows):

- **lexical** — BM25 over the passages' tsvectors, the query segmented as they were
  (``memory.text.query_terms``: rjieba for Chinese), so 「退货运费谁承担」 finds 退货 and 运费. A passage has three
  fields (``knowledge.indexing``) and a query term counts by the best field that holds it:

  - the **article's title**: :data:`TITLE_TF`, saturated without length normalisation — the title is what every
    passage of the article is about, however long the passage, so 「颐和园的电话」 finds 颐和园's contact section,
    whose own words never name it, above other articles' lists that mention 颐和园 — and more the larger the share
    of the title's words the query holds (:data:`NAMED_WEIGHT`: a query holding the whole title names the article);
  - the passage's **own words**: :data:`OWN_TF`; only its **section's headings**: :data:`HEADING_TF`; both
    normalised by the length of the passage's own words (``k1`` :data:`BM25_K1`, ``b`` :data:`BM25_B`).

  Document frequencies and the average length of own words are the tenant's over all its stored passages (every
  version: statistics, not a filter), read once per process for each state of the tenant's knowledge
  (:class:`_Stats`, keyed by the newest version's id; ``ts_stat``), so a word in every article weighs almost
  nothing and no search counts anything.
  **Candidates** are the passages holding one of the query's rarest terms, found through the GIN index: terms are
  taken rarest first while their document frequencies sum to at most :data:`CANDIDATE_POSTINGS` (always the rarest
  one). The commoner terms rank the candidates but find none: a passage sharing only 电话 and 酒店 with the query is
  not what a question naming one hotel asks for. (For a tenant of few passages every term is taken.)
- **vector** — cosine similarity of the query, embedded with the tenant's knowledge model, to the passages
  embedded with that model (``knowledge.indexing``). Its candidates are the nearest passages by the HNSW index
  (pgvector 0.8's iterative scan, ``hnsw.iterative_scan = relaxed_order``, so the tenant, validity and segment
  conditions do not starve the walk; ``hnsw.ef_search`` :data:`EF_SEARCH`) together with the lexical leg's
  candidates, all ranked by their exact distances: the index brings the passages that share no word with the
  query, and the passages the words found are ranked exactly among them, however many near-identical passages a
  knowledge base holds (the index's approximate order is not good enough there). The index serves a tenant of more
  than :data:`EXACT_UP_TO` passages that holds at least :data:`INDEX_MIN_SHARE` of the index's rows; a smaller
  tenant (or any, on pgvector before 0.8, without iterative scans) reads its valid passages' exact distances, as
  the index's walk would otherwise pass mostly other tenants' passages. (Several large tenants sharing one
  deployment, none holding that share, are each read exactly: slower per search, never wrong.) A passage the
  vector leg alone finds counts only when its similarity reaches :data:`MIN_SIMILARITY`: a query about nothing
  the tenant wrote finds nothing.
- **fusion** — weighted reciprocal rank (``w / (RRF_K + rank)`` per leg; the lexical leg weighs
  :data:`W_LEXICAL`, twice the vector's, as in memory's recall: the specific word beats the general meaning);
  ``score`` is the fused value over the best possible one, in (0, 1]: 1 is first in both legs, 2/3 first in the
  lexical leg alone, 1/3 first in the vector leg alone.

Validity: a passage is searched only when its version is valid at ``as_of`` (default now):
``valid_from <= as_of < valid_until`` (:data:`VALID_SQL`; its Python twin ``ArticleVersion.valid_at``), checked
for each candidate passage (:data:`_SERVED_SQL`). A superseded or retired version is never served
for a time after its end.

Audience: an article with a ``segment`` is searched only by a search for that segment; articles without one by
every search.

The tenant is passed explicitly and named in every table's condition; the statements run in the tenant's
row-level-security scope, the second wall.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
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
W_LEXICAL = 2.0
W_VECTOR = 1.0
#: A passage found by the vector leg alone below this cosine similarity is dropped.
MIN_SIMILARITY = 0.35
TITLE_TF = 3.0
#: How much more a title word counts when the query names the whole title (``1 + NAMED_WEIGHT * share named``).
NAMED_WEIGHT = 4.0
OWN_TF = 2.0
HEADING_TF = 1.0
BM25_K1 = 1.2
BM25_B = 0.75
#: The most query terms the lexical leg uses (a pasted paragraph is not a question).
MAX_TERMS = 24
MAX_K = 20
#: The lexical leg's candidates come from the query's rarest terms, rarest first, while their document frequencies
#: sum to at most this (always from the rarest one; the module's docstring).
CANDIDATE_POSTINGS = 500
#: A tenant of at most this many passages is searched by exact distances (a few milliseconds), not the index.
EXACT_UP_TO = 5000
#: The index serves a tenant holding at least this share of its rows; a smaller tenant's walk would visit mostly
#: other tenants' passages (each filtered out) before finding its own, so it reads its own exactly instead.
INDEX_MIN_SHARE = 0.2
#: The HNSW graph walk's breadth (pgvector's ``hnsw.ef_search``); at least :data:`CANDIDATES`.
EF_SEARCH = 100
#: Query terms whose document frequency a process keeps per tenant before it starts afresh.
MAX_CACHED_TERMS = 50_000

#: The one SQL form of "this version is served at ``as_of``" (``ArticleVersion.valid_at`` is the Python one).
VALID_SQL = "v.valid_from <= %(as_of)s AND (v.valid_until IS NULL OR v.valid_until > %(as_of)s)"

#: Passage ``p`` (of the tenant the statement names) is served at ``as_of`` to the search's audience, checked per
#: candidate by primary-key lookups: a scalar subquery, which the planner never turns into a join over all the
#: tenant's versions (as it does an EXISTS when its statistics do not know a new tenant yet), tied to ``p``'s
#: tenant so that nothing but the primary keys can drive it.
_SERVED_SQL = """COALESCE((
    SELECT {valid} AND (a.segment = '' OR a.segment = %(segment)s)
    FROM knowledge_articleversion v
    JOIN knowledge_article a ON a.id = v.article_id AND a.tenant_id = p.tenant_id
    WHERE v.id = p.version_id AND v.tenant_id = p.tenant_id
), false)"""

_VECTOR_SQL = """
WITH near AS MATERIALIZED (
    SELECT p.id FROM knowledge_passage p
    WHERE p.tenant_id = %(tenant)s AND p.embedding_model = %(model)s AND {served}
    ORDER BY {order}
    LIMIT %(n)s
),
pool AS (SELECT id FROM near UNION SELECT unnest(%(lexical)s::bigint[]))
SELECT p.id, p.embedding <=> %(qvec)s::vector AS distance
FROM pool JOIN knowledge_passage p ON p.id = pool.id
WHERE p.tenant_id = %(tenant)s AND p.embedding_model = %(model)s
ORDER BY distance, p.id
LIMIT %(n)s
"""

_LEX_SQL = """
WITH tq AS MATERIALIZED (SELECT {queries}),
hits AS MATERIALIZED (
    SELECT p.id, length(ts_filter(p.search_vector, '{{d}}')) AS len, p.search_vector AS sv,
           ts_filter(p.search_vector, '{{d}}') AS own, ts_filter(p.search_vector, '{{a}}') AS title
    FROM knowledge_passage p
    WHERE p.tenant_id = %(tenant)s AND p.search_vector @@ ({selective}) AND {served}
),
scored AS (
    SELECT h.id, {score} AS score
    FROM hits h CROSS JOIN tq,
         LATERAL (SELECT %(k1)s * (1 - %(b)s + %(b)s * h.len / %(avglen)s) AS norm) m,
         LATERAL (SELECT LEAST(1.0, ({title_matches})::float / GREATEST(length(h.title), 1)) AS named) c
)
SELECT id FROM scored WHERE score > 0 ORDER BY score DESC, id LIMIT %(n)s
"""

_GENERATION_SQL = """
SELECT max(version_id), (SELECT reltuples FROM pg_class WHERE oid = 'knowledge_passage'::regclass)
FROM knowledge_passage WHERE tenant_id = %(tenant)s
"""
_SIZE_SQL = """
SELECT count(*), COALESCE(avg(length(ts_filter(search_vector, '{d}'))), 1)
FROM knowledge_passage WHERE tenant_id = %(tenant)s
"""

#: The query ``ts_stat`` reads a tenant's vocabulary with (the tenant's id, a UUID, as a literal: ts_stat takes text).
_VOCABULARY_OF = "SELECT search_vector FROM knowledge_passage WHERE tenant_id = '{tenant}'"
_LEXEMES_SQL = """
SELECT t, tsvector_to_array(to_tsvector('{config}', t)) FROM unnest(%(terms)s::text[]) AS t
""".replace("{config}", TS_CONFIG)

_HITS_SQL = """
SELECT p.id, a.id, v.number, v.title, a.url, p.public_id, p.text, p.heading_path
FROM knowledge_passage p
JOIN knowledge_articleversion v ON v.id = p.version_id AND v.tenant_id = %(tenant)s
JOIN knowledge_article a ON a.id = v.article_id AND a.tenant_id = %(tenant)s
WHERE p.tenant_id = %(tenant)s AND p.id = ANY(%(ids)s)
"""


def _tsquery(param: str) -> str:
    return f"plainto_tsquery('{TS_CONFIG}', %({param})s)"


@dataclass
class _Stats:
    """One tenant's lexical statistics at one state of its knowledge (``generation``: the newest version's id)."""

    generation: int | None
    passages: int
    avglen: float
    #: Every indexed word of the tenant's passages → the number of passages holding it.
    vocabulary: dict[str, int] = field(default_factory=dict)
    #: Query terms looked up so far → their document frequency.
    df: dict[str, int] = field(default_factory=dict)
    #: The planner's count of the index's rows, all tenants (``pg_class.reltuples``; 0 or less: not counted yet).
    index_rows: float = 0.0


_stats: dict[Any, _Stats] = {}
_stats_lock = threading.Lock()


def _tenant_stats(cursor: Any, tenant_id: Any, terms: Sequence[str]) -> _Stats:
    """The tenant's statistics with every term of ``terms`` looked up: its vocabulary (every word of its passages
    with the number holding it, ``ts_stat``) is read once per process for each state of its knowledge, and a term
    is looked up by the words PostgreSQL indexes it as (English is stemmed), so no search counts anything."""
    cursor.execute(_GENERATION_SQL, {"tenant": tenant_id})
    generation, index_rows = cursor.fetchone()
    with _stats_lock:
        stats = _stats.get(tenant_id)
    if stats is None or stats.generation != generation:
        cursor.execute(_SIZE_SQL, {"tenant": tenant_id})
        passages, avglen = cursor.fetchone()
        stats = _Stats(generation, int(passages), max(float(avglen), 1.0))
        inner = _VOCABULARY_OF.format(tenant=uuid.UUID(str(tenant_id)))
        cursor.execute("SELECT word, ndoc FROM ts_stat(%(inner)s)", {"inner": inner})
        stats.vocabulary = {word: int(ndoc) for word, ndoc in cursor.fetchall()}
    missing = [term for term in terms if term not in stats.df]
    found: dict[str, int] = {}
    if missing:
        cursor.execute(_LEXEMES_SQL, {"terms": missing})
        for term, lexemes in cursor.fetchall():
            found[term] = min((stats.vocabulary.get(lexeme, 0) for lexeme in lexemes or ()), default=0)
    with _stats_lock:
        current = _stats.get(tenant_id)
        if current is not None and current.generation == stats.generation and current is not stats:
            stats = current  # another thread read it first: keep one
        if len(stats.df) > MAX_CACHED_TERMS:
            stats.df.clear()
        stats.df.update(found)
        stats.index_rows = float(index_rows or 0)
        _stats[tenant_id] = stats
    return stats


def _lexical(cursor: Any, terms: Sequence[str], params: dict[str, Any], stats: _Stats | None = None) -> list[int]:
    """The lexical leg's candidates, best first (the module's docstring)."""
    if not terms:
        return []
    stats = stats or _tenant_stats(cursor, params["tenant"], terms)
    n = stats.passages
    dfs = [min(stats.df.get(term, 0), n) for term in terms]
    present = [i for i, df in enumerate(dfs) if df > 0]
    if not present:
        return []
    selective: list[int] = []
    postings = 0
    for i in sorted(present, key=lambda i: (dfs[i], i)):
        if selective and postings + dfs[i] > CANDIDATE_POSTINGS:
            break
        selective.append(i)
        postings += dfs[i]
    idf = {i: math.log(1 + (n - dfs[i] + 0.5) / (dfs[i] + 0.5)) for i in present}
    saturation = "(%(k1)s + 1) * {tf} / ({tf} + {norm})"
    # a title word counts more the more of the title the query names: all of it, and the query names the article
    in_title = f"{saturation.format(tf=TITLE_TF, norm='%(k1)s')} * (1 + %(named_weight)s * c.named)"
    in_own = saturation.format(tf=OWN_TF, norm="m.norm")
    in_heading = saturation.format(tf=HEADING_TF, norm="m.norm")
    # the best field holding the term (any match is at least a heading's: sv holds every field)
    score = " + ".join(
        f"(CASE WHEN sv @@ tq.q{i} THEN %(idf{i})s * GREATEST({in_heading},"
        f" CASE WHEN title @@ tq.q{i} THEN {in_title} ELSE 0 END,"
        f" CASE WHEN own @@ tq.q{i} THEN {in_own} ELSE 0 END) ELSE 0 END)"
        for i in present
    )
    sql = _LEX_SQL.format(
        queries=", ".join(f"{_tsquery(f't{i}')} AS q{i}" for i in present),
        selective=" || ".join(_tsquery(f"t{i}") for i in selective),
        title_matches=" + ".join(f"(title @@ tq.q{i})::int" for i in present),
        served=_SERVED_SQL.format(valid=VALID_SQL),
        score=score,
    )
    cursor.execute(
        sql,
        {
            **params,
            **{f"t{i}": terms[i] for i in present},
            **{f"idf{i}": idf[i] for i in present},
            "avglen": stats.avglen,
            "named_weight": NAMED_WEIGHT,
        },
    )
    return [row[0] for row in cursor.fetchall()]


_iterative: dict[str, bool] = {}


def _has_iterative_scan(cursor: Any) -> bool:
    """Whether the database's pgvector has ``hnsw.iterative_scan`` (0.8 and later); asked once per database."""
    key = connection.settings_dict.get("NAME") or ""
    if key not in _iterative:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
        version = tuple(int(part) for part in (row[0] if row else "0").split(".")[:2] if part.isdigit())
        _iterative[key] = version >= (0, 8)
    return _iterative[key]


def _uses_index(cursor: Any, tenant_passages: int, index_rows: float | None = None) -> bool:
    """Whether the vector leg walks the HNSW index (the module's docstring): pgvector 0.8, a tenant of more than
    :data:`EXACT_UP_TO` passages, and at least :data:`INDEX_MIN_SHARE` of the index's rows (the planner's count)."""
    if tenant_passages <= EXACT_UP_TO or not _has_iterative_scan(cursor):
        return False
    if index_rows is None:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = 'knowledge_passage'::regclass")
        index_rows = float(cursor.fetchone()[0] or 0)
    total = index_rows if index_rows > 0 else float(tenant_passages)
    return tenant_passages >= INDEX_MIN_SHARE * total


def _vector(
    cursor: Any,
    params: dict[str, Any],
    lexical: Sequence[int] = (),
    tenant_passages: int | None = None,
    index_rows: float | None = None,
) -> list[tuple[int, float]]:
    """The vector leg's candidates, nearest first, with their cosine similarity (the module's docstring): the
    nearest passages — by the index, or exactly — and the lexical leg's candidates (``lexical``, already checked as
    served), ranked by their exact distances. ``tenant_passages``: the tenant's count, when the caller has it."""
    if tenant_passages is None:
        tenant_passages = _tenant_stats(cursor, params["tenant"], ()).passages
    if _uses_index(cursor, tenant_passages, index_rows):
        cursor.execute(
            "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', %s, true)",
            [str(max(EF_SEARCH, CANDIDATES))],
        )
        order = "p.embedding <=> %(qvec)s::vector"
    else:
        # not the index's order, so exact distances over the tenant's passages (the module's docstring)
        order = "(p.embedding <=> %(qvec)s::vector) + 0"
    cursor.execute(
        _VECTOR_SQL.format(served=_SERVED_SQL.format(valid=VALID_SQL), order=order),
        {**params, "lexical": list(lexical)},
    )
    return [(passage_id, 1 - float(distance)) for passage_id, distance in cursor.fetchall()]


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
    }
    with tenant_scope(tenant), connection.cursor() as cursor:
        stats = _tenant_stats(cursor, params["tenant"], terms)
        lexical = _lexical(cursor, terms, params, stats)
        near = _vector(cursor, params, lexical, stats.passages, stats.index_rows)
        vranks = {passage_id: (rank, sim) for rank, (passage_id, sim) in enumerate(near, start=1)}
        lranks = {passage_id: rank for rank, passage_id in enumerate(lexical, start=1)}
        scored: list[tuple[float, int, float]] = []
        for passage_id in vranks.keys() | lranks.keys():
            vrank, similarity = vranks.get(passage_id, (None, 0.0))
            lrank = lranks.get(passage_id)
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


def _vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(f"{float(x):.6f}" for x in vector) + "]"
