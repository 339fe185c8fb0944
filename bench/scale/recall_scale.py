"""Recall at scale: latency per stage, scope/TTL correctness, ingest rate, query plan.

Synthetic but realistic customer-service memories (Chinese and English: names, phones, e-mails, order and
tracking codes, addresses, products, coupons, amounts, dates, topics, tool results, batch progress) over
100 tenants x 100 end users (one open session each; 10% of the end users also have an earlier, closed session
that holds session-scoped memories which must never reach the open one). All five types, keyed memories with
replacement history (superseded rows), lifetimes from 1 hour to a year over a 30-day window, so a good share
is expired at the query time. Memories per end user are skewed (log-normal), as real traffic is. The texts come from
``bench/synthetic.py`` (``random_memory``, ``make_query``), seeded by ``--seed``.

Embeddings: real all-MiniLM-L6-v2 vectors (``memory.embeddings.models.embed``, batched) of a pool of ``--pool``
distinct texts; every memory's content IS one of those texts (so each stored vector is the true embedding of
its content); each text is reused by several end users. Rows are bulk-loaded (COPY into a staging table, then
``INSERT … SELECT`` as the app role under the explicit RLS operator bypass). Every recall measured goes through
``memory.recall.pipeline.recall`` (the product's one implementation).

Usage (from the repository root)::

    nice -n 10 .venv/bin/python bench/scale/recall_scale.py --sizes 10000,100000
    nice -n 10 .venv/bin/python bench/scale/recall_scale.py --ingest-only     # write rate only (a minute)

Writes ``bench/out/recall_scale.json`` (``recall_scale_ingest.json`` with ``--ingest-only``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import sys
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: common, retrieval, synthetic
import common  # noqa: E402
from synthetic import TYPE_WEIGHTS, Gen, PoolText, make_query, random_memory  # noqa: E402

DB_NAME = "memdesk_bench_scale"
N_TENANTS = 100
USERS_PER_TENANT = 100
WINDOW_DAYS = 30
PAST_AS_OF_DAYS = 20
HOUR, DAY = 3600, 86400
STAGES = ("rule", "vector", "embed", "rerank", "total")
LOAD_CHUNK = 100_000
MODEL = "all-MiniLM-L6-v2"  # the English tenants' model (the product's default for them; checked)
#: The Chinese tenants' model when ``--zh-model`` overrides the product's default for them
#: (``multilingual-use-384``); set from the command line.
ZH_MODEL: str | None = None


def tenant_model(tenant: Any) -> str:
    from memory.embeddings import models as embeddings

    return embeddings.model_for(tenant, "fact_reference")


def zh_model() -> str:
    """The Chinese tenants' model: ``--zh-model``, else the product's default for Chinese tenants."""
    from memory.embeddings import models as embeddings

    return ZH_MODEL or embeddings.LANGUAGE_DEFAULTS.get("zh", MODEL)


#: A memory's lifetime and its share (1 hour to a year).
LIFETIMES = [(HOUR, 0.03), (DAY, 0.07), (7 * DAY, 0.15), (30 * DAY, 0.35), (90 * DAY, 0.25), (365 * DAY, 0.15)]


# --- world ---------------------------------------------------------------------------------------------------


@dataclass
class User:
    tenant: Any
    end_user_id: uuid.UUID
    session: Any  # the open session (queried)
    old_session_id: uuid.UUID | None
    lang: str
    weight: float


@dataclass
class Row:
    id: uuid.UUID
    user: User
    session_id: uuid.UUID | None
    pool: int
    created_at: datetime
    expires_at: datetime
    relevance: float
    superseded_at: datetime | None = None
    superseded_by: uuid.UUID | None = None


@dataclass
class World:
    users: list[User] = field(default_factory=list)
    pool: list[PoolText] = field(default_factory=list)
    vec_literals: dict[str, list[str]] = field(default_factory=dict)  # model → literal per pool text
    search_texts: list[str] = field(default_factory=list)


def build_tenants_and_users(rng: random.Random, tag: str) -> list[User]:
    from conversations.models import ChatSession
    from tenants.models import EndUser
    from tenants.rls import operator_scope

    now = common_now()
    users: list[User] = []
    end_users, sessions = [], []
    for t in range(N_TENANTS):
        lang = "zh" if t % 10 < 7 else "en"
        model = {"embedding_model": ZH_MODEL} if lang == "zh" and ZH_MODEL else None
        tenant = common.make_tenant(f"bench-{tag}-t{t:03d}", language=lang, settings=model).tenant
        for u in range(USERS_PER_TENANT):
            eu = EndUser(tenant=tenant, external_id=f"u{u:03d}")
            end_users.append(eu)
            old = None
            if rng.random() < 0.10:
                old = ChatSession(
                    tenant=tenant,
                    end_user=eu,
                    status=ChatSession.Status.CLOSED,
                    created_at=now - timedelta(days=40),
                    last_activity_at=now - timedelta(days=39),
                    expires_at=now - timedelta(days=39),
                    closed_at=now - timedelta(days=39),
                )
                sessions.append(old)
            current = ChatSession(
                tenant=tenant,
                end_user=eu,
                created_at=now - timedelta(days=rng.randint(0, 20)),
                last_activity_at=now,
                expires_at=now + timedelta(days=1),
            )
            sessions.append(current)
            user_lang = lang if rng.random() < 0.85 else ("en" if lang == "zh" else "zh")
            users.append(User(tenant, eu.id, current, old.id if old else None, user_lang, rng.lognormvariate(0, 1.0)))
    from memory.embeddings import models as embeddings
    from memory.models import MemoryType

    for tenant in {u.tenant.pk: u.tenant for u in users}.values():
        models = set(embeddings.models_for(tenant, MemoryType.values))
        if models != {tenant_model(tenant)}:
            want = tenant_model(tenant)
            raise SystemExit(f"bench tenant {tenant.slug} must embed with {want}; settings give {models}")
    with operator_scope():
        EndUser.all_objects.bulk_create(end_users, batch_size=2000)
        ChatSession.all_objects.bulk_create(sessions, batch_size=2000)
    return users


_NOW: datetime | None = None


def common_now() -> datetime:
    global _NOW
    if _NOW is None:
        from django.utils import timezone

        _NOW = timezone.now().replace(microsecond=0)
    return _NOW


def build_pool(rng: random.Random, size: int) -> World:
    """``size`` distinct texts per (type, keyed, language) in proportion, embedded for real."""
    from memory.embeddings import models as embeddings
    from memory.recall.candidates import vector_literal as _vector_literal
    from memory.store.indexing import search_fields

    g = Gen(rng)
    world = World()
    seen: set[str] = set()
    attempts = 0
    while len(world.pool) < size and attempts < size * 20:
        attempts += 1
        text = random_memory(g)
        assert len(text.content) <= 150, text.content
        if text.content in seen:
            continue
        seen.add(text.content)
        world.pool.append(text)
    common.log(f"pool: {len(world.pool)} distinct texts; embedding them (batched)")
    for model in sorted({MODEL, zh_model()}):
        with common.Timer() as t:
            vectors = embeddings.embed([p.content for p in world.pool], model=model, batch_size=128, kind="passage")
        world.embed_s = t.ms / 1000  # type: ignore[attr-defined]
        common.log(
            f"embedded {len(world.pool)} texts with {model} in {t.ms / 1000:.1f} s "
            f"({len(world.pool) / (t.ms / 1000):.0f}/s)"
        )
        world.vec_literals[model] = [_vector_literal(v) for v in vectors]
    world.search_texts = [search_fields(p.content, p.key, p.data) for p in world.pool]
    return world


def generate_rows(rng: random.Random, world: World, total: int) -> list[list[Row]]:
    """Groups of rows (a keyed chain with its replacement history, or a single row), shuffled."""
    now = common_now()
    by_kind: dict[tuple[str, str], list[int]] = defaultdict(list)
    by_key: dict[tuple[str, str, str | None], list[int]] = defaultdict(list)
    for i, p in enumerate(world.pool):
        by_kind[(p.type, p.lang)].append(i)
        by_key[(p.type, p.lang, p.key)].append(i)
    cum_weights = list(itertools.accumulate(u.weight for u in world.users))
    type_cum = list(itertools.accumulate(TYPE_WEIGHTS.values()))
    groups: list[list[Row]] = []
    count = 0
    live_keys: set[tuple[Any, ...]] = set()
    lifetimes, lt_weights = zip(*LIFETIMES, strict=True)
    while count < total:
        user = rng.choices(world.users, cum_weights=cum_weights)[0]
        mtype = rng.choices(list(TYPE_WEIGHTS), cum_weights=type_cum)[0]
        candidates = by_kind[(mtype, user.lang)]
        pool_idx = rng.choice(candidates)
        text = world.pool[pool_idx]
        session_id = None
        if mtype in ("session_state", "batch_operation"):
            session_id = user.old_session_id if user.old_session_id and rng.random() < 0.5 else user.session.pk
        n_versions = 1 if text.key is None else rng.choices([1, 2, 3], weights=[0.7, 0.2, 0.1])[0]
        n_versions = min(n_versions, total - count)
        if text.key is not None:
            scope = (user.end_user_id, mtype, text.key, session_id)
            if scope in live_keys:
                continue
            live_keys.add(scope)
        # versions of one key: same key, different texts of that key, newest live
        same_key = by_key[(mtype, user.lang, text.key)] or [pool_idx]
        chain_idx = [pool_idx] + [rng.choice(same_key) for _ in range(n_versions - 1)]
        times = sorted(now - timedelta(seconds=rng.uniform(0, WINDOW_DAYS * DAY)) for _ in range(n_versions))
        rows: list[Row] = []
        for idx, created in zip(chain_idx, times, strict=True):
            life = rng.choices(lifetimes, weights=lt_weights)[0]
            relevance = 1.0 if rng.random() < 0.7 else round(rng.uniform(0.1, 2.0), 2)
            rows.append(Row(uuid.uuid4(), user, session_id, idx, created, created + timedelta(seconds=life), relevance))
        for older, newer in zip(rows, rows[1:], strict=False):
            older.superseded_at = newer.created_at
            older.superseded_by = newer.id
            older.expires_at = max(min(older.expires_at, newer.created_at), older.created_at)
        groups.append(rows)
        count += len(rows)
    rng.shuffle(groups)
    return groups


def load_rows(world: World, rows: list[Row]) -> float:
    """COPY into a staging table, then INSERT … SELECT under the RLS operator bypass. Returns seconds."""
    from django.db import connection

    from tenants.rls import operator_scope

    start = time.perf_counter()

    def esc(value: Any) -> str:
        if value is None:
            return r"\N"
        s = str(value)
        return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")

    def line(row: Row) -> str:
        p = world.pool[row.pool]
        fields = [
            row.id,
            row.user.tenant.pk,
            row.user.end_user_id,
            row.session_id,
            p.type,
            p.key,
            p.content,
            json.dumps(p.data, ensure_ascii=False),
            row.created_at.isoformat(),
            row.expires_at.isoformat(),
            row.relevance,
            row.superseded_at.isoformat() if row.superseded_at else None,
            row.superseded_by,
            world.vec_literals[tenant_model(row.user.tenant)][row.pool],
            tenant_model(row.user.tenant),
            world.search_texts[row.pool],
        ]
        return "\t".join(esc(f) for f in fields) + "\n"

    with operator_scope():
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE TEMP TABLE bench_stage (id uuid, tenant_id uuid, end_user_id uuid, session_id uuid, type text,"
                " key text, content text, data jsonb, created_at timestamptz, expires_at timestamptz,"
                " relevance_score float8, superseded_at timestamptz, superseded_by_id uuid, embedding text,"
                " embedding_model text, search_text text) ON COMMIT DROP"
            )
            raw = cursor.cursor
            with raw.copy("COPY bench_stage FROM STDIN") as copy:
                for i in range(0, len(rows), 5000):
                    copy.write("".join(line(row) for row in rows[i : i + 5000]).encode())
            cursor.execute(
                "INSERT INTO memory_memoryunit (id, tenant_id, end_user_id, session_id, type, key, content, data,"
                " created_at, expires_at, updated_at, relevance_score, use_count, ignore_count, mislead_count,"
                " confirm_count, recall_count, source_role, superseded_at, superseded_by_id, embedding,"
                " embedding_model, search_text, search_vector)"
                " SELECT id, tenant_id, end_user_id, session_id, type, key, content, data, created_at, expires_at,"
                " created_at, relevance_score, 0, 0, 0, 0, 0, '', superseded_at, superseded_by_id,"
                " embedding::vector, embedding_model, search_text, to_tsvector('english', search_text)"
                " FROM bench_stage"
            )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_memoryunit")
    return time.perf_counter() - start


# --- measurement ---------------------------------------------------------------------------------------------


def check_hit(memory: Any, user: User, as_of: datetime) -> list[str]:
    from memory.models import SESSION_TYPES

    problems = []
    if memory.tenant_id != user.tenant.pk:
        problems.append("tenant")
    if memory.type in SESSION_TYPES:
        if memory.session_id != user.session.pk:
            problems.append("session")
    elif memory.end_user_id != user.end_user_id:
        problems.append("end_user")
    if not (memory.created_at <= as_of < memory.expires_at):
        problems.append("expired" if memory.expires_at <= as_of else "not_yet_created")
    if memory.superseded_at is not None and memory.superseded_at <= as_of:
        problems.append("superseded")
    return problems


def visible_count(user: User, as_of: datetime) -> int:
    from memory.models import MemoryUnit
    from memory.store.read import scope_q, valid_q
    from tenants.rls import tenant_scope

    with tenant_scope(user.tenant):
        return MemoryUnit.objects.for_tenant(user.tenant).filter(scope_q(user.session)).filter(valid_q(as_of)).count()


def run_queries(rng: random.Random, world: World, n: int, label: str) -> dict[str, Any]:
    from django.utils import timezone

    from memory.recall.pipeline import recall

    g = Gen(rng)
    load_before = os.getloadavg()[0]
    # warm-up: model, rjieba, connection, plan cache
    for user in rng.sample(world.users, 20):
        recall(user.tenant, user.session, make_query(g, user.lang), k=5)
    per_stage: dict[str, list[float]] = defaultdict(list)
    without_embed: list[float] = []
    violations: Counter[str] = Counter()
    records = []
    hits_total = 0
    empty = 0
    rule_used = 0
    for _ in range(n):
        user = rng.choice(world.users)
        query = make_query(g, user.lang)
        past = rng.random() < 0.2
        as_of = timezone.now() - timedelta(seconds=rng.uniform(0, PAST_AS_OF_DAYS * DAY)) if past else timezone.now()
        result = recall(user.tenant, user.session, query, as_of=as_of, k=5)
        t = result.timings_ms
        for stage in STAGES:
            per_stage[stage].append(t.get(stage, 0.0))
        without_embed.append(t["total"] - t.get("embed", 0.0))
        hits_total += len(result.hits)
        empty += not result.hits
        rule_used += any(h.stage == "rule" for h in result.hits)
        for hit in result.hits:
            for problem in check_hit(hit.memory, user, as_of):
                violations[problem] += 1
        records.append((user, as_of, t["total"], t["total"] - t.get("embed", 0.0)))
    load_after = os.getloadavg()[0]
    # scope sizes (after timing, so the counts do not warm the measured queries)
    by_bucket: dict[str, list[tuple[float, float]]] = defaultdict(list)
    sizes = []
    for user, as_of, total, no_embed in records:
        size = visible_count(user, as_of)
        sizes.append(size)
        bucket = (
            "0" if size == 0 else "1-9" if size < 10 else "10-49" if size < 50 else "50-199" if size < 200 else "200+"
        )
        by_bucket[bucket].append((total, no_embed))
    order = ["0", "1-9", "10-49", "50-199", "200+"]
    return {
        "label": label,
        "queries": n,
        "loadavg_1min_before_after": [round(load_before, 2), round(load_after, 2)],
        "stages_ms": {s: common.summarise(v) for s, v in per_stage.items()},
        "total_without_embed_ms": common.summarise(without_embed),
        "hits_per_query": round(hits_total / n, 2),
        "empty_results": empty,
        "queries_with_rule_hit": rule_used,
        "past_as_of_share": 0.2,
        "visible_rows_per_query": common.summarise(sizes),
        "by_visible_rows": {
            b: {
                "n": len(by_bucket[b]),
                "total_p50": round(common.percentile([x[0] for x in by_bucket[b]], 50), 2),
                "total_p95": round(common.percentile([x[0] for x in by_bucket[b]], 95), 2),
                "no_embed_p95": round(common.percentile([x[1] for x in by_bucket[b]], 95), 2),
            }
            for b in order
            if by_bucket[b]
        },
        "scope_violations": sum(violations.values()),
        "violations_by_kind": dict(violations),
    }


def heavy_user_queries(rng: random.Random, world: World, users: list[User], n: int) -> dict[str, Any]:
    """The same, for the end users with the most memories (the tail a uniform sample rarely hits)."""
    from django.utils import timezone

    from memory.recall.pipeline import recall

    g = Gen(rng)
    totals, no_embed, violations = [], [], 0
    for i in range(n):
        user = users[i % len(users)]
        as_of = timezone.now()
        result = recall(user.tenant, user.session, make_query(g, user.lang), as_of=as_of, k=5)
        totals.append(result.timings_ms["total"])
        no_embed.append(result.timings_ms["total"] - result.timings_ms.get("embed", 0.0))
        violations += sum(len(check_hit(h.memory, user, as_of)) for h in result.hits)
    return {
        "users": len(users),
        "queries": n,
        "total_ms": common.summarise(totals),
        "total_without_embed_ms": common.summarise(no_embed),
        "scope_violations": violations,
        "visible_rows": [visible_count(u, timezone.now()) for u in users],
    }


def table_counts() -> dict[str, Any]:
    from django.db import connection

    from tenants.rls import operator_scope

    with operator_scope(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), count(*) FILTER (WHERE expires_at <= now()),"
            " count(*) FILTER (WHERE superseded_at IS NOT NULL), count(*) FILTER (WHERE key IS NOT NULL),"
            " count(DISTINCT end_user_id), pg_total_relation_size('memory_memoryunit')"
            " FROM memory_memoryunit"
        )
        total, expired, superseded, keyed, users, size = cursor.fetchone()
        cursor.execute("SELECT type, count(*) FROM memory_memoryunit GROUP BY type ORDER BY type")
        types = dict(cursor.fetchall())
    return {
        "rows": total,
        "expired_now": expired,
        "superseded": superseded,
        "keyed": keyed,
        "end_users_with_memories": users,
        "by_type": types,
        "table_and_indexes_mb": round(size / 2**20, 1),
    }


def candidate_sql_for(user: User, query: str, as_of: datetime) -> tuple[str, Any]:
    """The exact candidate SQL and parameters ``memory.recall.pipeline.recall`` runs for this query (from recall's own
    ``trace``, so the plan shown is the plan of the product's query, whatever its current shape)."""
    from memory.recall.pipeline import recall

    trace: dict[str, Any] = {}
    recall(user.tenant, user.session, query, as_of=as_of, k=5, record=False, trace=trace)
    if "candidate_sql" not in trace:
        raise RuntimeError("recall ran no candidate query")
    return trace["candidate_sql"], trace["candidate_params"]


def explain(user: User, query: str) -> dict[str, Any]:
    from django.db import connection
    from django.utils import timezone

    from tenants.rls import tenant_scope

    as_of = timezone.now()
    sql, params = candidate_sql_for(user, query, as_of)
    with tenant_scope(user.tenant), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, params)
        plan = re.sub(r"'\[[^]]*\]'", "'[…]'", "\n".join(r[0] for r in cursor.fetchall()))
    indexes = sorted(set(re.findall(r"(?:Index|Index Only) Scan (?:Backward )?(?:using|on) (\w+)", plan)))
    return {
        "query": query,
        "visible_rows": visible_count(user, as_of),
        "plan": plan,
        "indexes_used": indexes,
        "uses_hnsw": "hnsw" in plan.lower(),
        "exact_scan_of_scoped_rows": "CTE Scan on scoped" in plan and "hnsw" not in plan.lower(),
    }


def hnsw_experiment(rng: random.Random, world: World, heavy: list[User], n_users: int) -> dict[str, Any]:
    """Build an HNSW index and show (1) recall's SQL still scans exactly, (2) what a plain filtered HNSW query
    (ORDER BY distance LIMIT k with the scope in WHERE) returns compared with the exact answer."""
    from django.db import connection
    from django.utils import timezone

    from memory.embeddings import models as embeddings
    from memory.recall.candidates import vector_literal as _vector_literal
    from tenants.rls import tenant_scope

    out: dict[str, Any] = {}
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        start = time.perf_counter()
        cursor.execute("CREATE INDEX bench_hnsw ON memory_memoryunit USING hnsw (embedding vector_cosine_ops)")
        out["build_s"] = round(time.perf_counter() - start, 1)
        cursor.execute("RESET maintenance_work_mem")
        cursor.execute("ANALYZE memory_memoryunit")
    try:
        out["recall_plan_with_hnsw"] = explain(
            heavy[0], "where is my order" if heavy[0].lang == "en" else "查一下我的订单"
        )
        g = Gen(rng)
        # A plain top-10 query with the scope in WHERE, per end user and per tenant: first as the planner plans
        # it (at this size it keeps the B-tree and sorts exact distances), then with the HNSW index forced
        # (sequential/bitmap scans and sorts disabled) — what happens whenever the planner does pick HNSW, e.g.
        # on other statistics or a larger table: pgvector 0.6 applies WHERE after the approximate scan
        # (ef_search = 40 candidates), so a selective filter returns too few rows, silently.
        user_sql = (
            "SELECT id FROM memory_memoryunit WHERE tenant_id = %(t)s AND end_user_id = %(u)s"
            " AND created_at <= %(a)s AND expires_at > %(a)s ORDER BY embedding <=> %(q)s::vector LIMIT 10"
        )
        tenant_sql = (
            "SELECT id FROM memory_memoryunit WHERE tenant_id = %(t)s"
            " AND created_at <= %(a)s AND expires_at > %(a)s ORDER BY embedding <=> %(q)s::vector LIMIT 10"
        )
        force = "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off"
        names = ("user_planner", "user_forced_hnsw", "tenant_planner", "tenant_forced_hnsw")
        stats: dict[str, Any] = {name: {"rows": 0, "true_rows": 0, "short": 0, "ms": []} for name in names}
        plans: dict[str, str] = {}
        for user in rng.sample(world.users, n_users):
            q = _vector_literal(
                embeddings.embed_one(make_query(g, user.lang), model=tenant_model(user.tenant), kind="query")
            )
            params = {"t": user.tenant.pk, "u": user.end_user_id, "a": timezone.now(), "q": q}
            got: dict[str, list[Any]] = {}
            with tenant_scope(user.tenant), connection.cursor() as cursor:
                for name in names:
                    if name == "user_forced_hnsw":
                        cursor.execute(force)
                    if name == "tenant_planner":
                        cursor.execute("RESET enable_seqscan; RESET enable_bitmapscan; RESET enable_sort")
                    if name == "tenant_forced_hnsw":
                        cursor.execute(force)
                    sql = user_sql if name.startswith("user") else tenant_sql
                    if name not in plans:
                        cursor.execute("EXPLAIN (COSTS OFF) " + sql, params)
                        plans[name] = "\n".join(r[0] for r in cursor.fetchall())
                    start = time.perf_counter()
                    cursor.execute(sql, params)
                    got[name] = [r[0] for r in cursor.fetchall()]
                    stats[name]["ms"].append((time.perf_counter() - start) * 1000)
            for name in names:
                truth = set(got["user_planner" if name.startswith("user") else "tenant_planner"])
                stats[name]["rows"] += len(got[name])
                stats[name]["true_rows"] += len(truth & set(got[name]))
                stats[name]["short"] += len(got[name]) < len(truth)
        out["users_sampled"] = n_users
        out["ef_search"] = "pgvector default (40); no iterative scan in pgvector 0.6"
        for name in names:
            plan = plans[name]
            out[name] = {
                "plan_uses_hnsw": "bench_hnsw" in plan,
                "plan": re.sub(r"'\[[^]]*\]'", "'[…]'", plan),
                "rows_returned": stats[name]["rows"],
                "rows_in_exact_top10": stats[name]["true_rows"],
                "queries_short": stats[name]["short"],
                "ms": common.summarise(stats[name]["ms"]),
            }
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP INDEX IF EXISTS bench_hnsw")
            cursor.execute("ANALYZE memory_memoryunit")
    return out


class IngestClock:
    """Wall time of the writes, the time of their embeddings (computed by ``embed`` beforehand, in the write
    path's batch shape, and handed to the write as ``embedding``: the product's writes accept one), and CPU
    time of this process and of its PostgreSQL backend: on a shared machine the wall-clock rate depends on the
    other jobs, the CPU cost per memory much less."""

    def __init__(self, tenant: Any) -> None:
        self.tenant = tenant
        self.embed_s = 0.0
        self.calls = 0

    def embed(self, texts: list[PoolText]) -> list[Any]:
        """The passage embeddings the write path would compute for ``texts``: one ``embed()`` per model."""
        from memory.embeddings import models as embeddings

        start = time.perf_counter()
        out: list[Any] = [None] * len(texts)
        by_model: dict[str, list[int]] = defaultdict(list)
        for i, text in enumerate(texts):
            by_model[embeddings.model_for(self.tenant, text.type)].append(i)
        for model, indexes in by_model.items():
            vectors = embeddings.embed([texts[i].content for i in indexes], model=model, kind="passage")
            for i, vector in zip(indexes, vectors, strict=True):
                out[i] = vector
            self.calls += 1
        self.embed_s += time.perf_counter() - start
        return out

    def __enter__(self) -> IngestClock:
        self.backend_start = common.backend_cpu_s()
        self.cpu_start = time.process_time()
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall_s = time.perf_counter() - self.start
        self.cpu_s = time.process_time() - self.cpu_start
        self.backend_s = common.backend_cpu_s() - self.backend_start

    def figures(self, n: int, outcomes: Counter[str]) -> dict[str, Any]:
        return {
            "memories": n,
            "per_s": round(n / self.wall_s, 1),
            "ms_per_memory": round(self.wall_s * 1000 / n, 2),
            "embed_ms_per_memory": round(self.embed_s * 1000 / n, 2),
            "db_ms_per_memory": round((self.wall_s - self.embed_s) * 1000 / n, 2),
            "embed_calls": self.calls,
            "process_cpu_ms_per_memory": round(self.cpu_s * 1000 / n, 2),
            "postgres_cpu_ms_per_memory": round(self.backend_s * 1000 / n, 2),
            "outcomes": dict(outcomes),
        }


def measure_ingest(n: int, tag: str, batch_sizes: list[int]) -> dict[str, Any]:
    """Write rate per process, with the embedding, on a fresh tenant with 5 open sessions; ``n`` new memories
    per path, each path with its own texts (60% unkeyed, 40% keyed, so keyed ones replace earlier values):

    - ``inline``: one ``memory.store.write.do_write_memory`` call per memory (its own transaction and embedding);
    - ``batch_<B>``: ``memory.store.write.write_memories`` with ``B`` items of one session per call (one
      ``embed()`` call and one transaction per batch; extraction writes a message's facts this way);
    - ``repeat``: ``n // 5`` live keyed facts written again unchanged through ``do_write_memory`` (a
      confirmation: lookup and update, no embedding).

    ``embed_ms`` is the time of the write's embeddings (``IngestClock.embed``); ``db_ms`` is the rest of the
    call (validation, rjieba segmentation, ORM and PostgreSQL round trips). ``process_cpu_ms`` and
    ``postgres_cpu_ms`` are the CPU time of this process and of its PostgreSQL backend per memory: the cost of
    a write, which other jobs on a shared machine change much less than they change the wall-clock rate."""
    from memory.models import MemoryUnit
    from memory.store import write as store
    from tenants.rls import tenant_scope

    g = Gen(random.Random(99))
    # a Chinese tenant, on the Chinese tenants' model when --zh-model gives one
    tenant = common.make_tenant(
        f"bench-{tag}-ingest", language="zh", settings={"embedding_model": ZH_MODEL} if ZH_MODEL else None
    ).tenant
    sessions = [common.open_session(tenant, f"ingest-{i}") for i in range(5)]

    def texts() -> list[PoolText]:
        return [random_memory(g) for _ in range(n)]

    paths: dict[str, Any] = {}
    load_before = os.getloadavg()
    outcomes: Counter[str] = Counter()
    inline = texts()
    with IngestClock(tenant) as clock:
        for i, text in enumerate(inline):
            res = store.do_write_memory(
                tenant, sessions[i % len(sessions)], type=text.type, content=text.content, key=text.key,
                data=text.data, expires_in=30 * DAY, embedding=clock.embed([text])[0],
            )  # fmt: skip
            outcomes[res.outcome] += 1
    paths["inline"] = clock.figures(n, outcomes)
    for size in batch_sizes:
        batch_texts = texts()
        outcomes = Counter()
        with IngestClock(tenant) as clock:
            for b, first in enumerate(range(0, n, size)):
                batch = batch_texts[first : first + size]
                items = [
                    store.MemoryItem(
                        type=t.type, content=t.content, key=t.key, data=t.data, expires_in=30 * DAY, embedding=v
                    )
                    for t, v in zip(batch, clock.embed(batch), strict=True)
                ]
                for res in store.write_memories(tenant, sessions[b % len(sessions)], items):
                    outcomes[res.outcome] += 1
        paths[f"batch_{size}"] = clock.figures(n, outcomes)
    with tenant_scope(tenant):
        live = list(
            MemoryUnit.objects.for_tenant(tenant)
            .filter(key__isnull=False, superseded_at__isnull=True)
            .select_related("session")
            .order_by("created_at", "id")[: max(1, n // 5)]
        )
    by_user = {s.end_user_id: s for s in sessions}
    outcomes = Counter()
    with IngestClock(tenant) as clock:  # a confirmation computes no embedding
        for memory in live:
            res = store.do_write_memory(
                tenant, memory.session or by_user[memory.end_user_id], type=memory.type, content=memory.content,
                key=memory.key, data=memory.data, expires_in=30 * DAY,
            )  # fmt: skip
            outcomes[res.outcome] += 1
    paths["repeat"] = clock.figures(len(live), outcomes)
    return {
        "memories_per_path": n,
        "paths": paths,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


# --- main ----------------------------------------------------------------------------------------------------


def print_tables(results: dict[str, Any]) -> None:
    rows = []
    for size in results["sizes"]:
        q = size["queries"]
        s = q["stages_ms"]
        rows.append(
            [size["rows"], q["queries"]]
            + [f"{s[st]['p50']:.2f} / {s[st]['p95']:.2f}" for st in STAGES]
            + [
                f"{q['total_without_embed_ms']['p50']:.2f} / {q['total_without_embed_ms']['p95']:.2f}",
                q["scope_violations"],
            ]
        )
    print(
        common.table(
            ["memories", "queries"]
            + [f"{st} p50/p95 ms" for st in STAGES]
            + ["total − embed p50/p95 ms", "scope/TTL violations"],
            rows,
        )
    )


def measure_recall(
    args: argparse.Namespace, sizes: list[int], rng: random.Random, tag: str, results: dict[str, Any]
) -> None:
    """The recall part: build the world, bulk-load each size, measure recalls, the plan and HNSW; fills ``results``."""
    common.log("creating 100 tenants x 100 end users")
    world_users = build_tenants_and_users(rng, tag)
    world = build_pool(rng, args.pool)
    world.users = world_users
    results["setup"]["pool_embed_s"] = round(world.embed_s, 1)  # type: ignore[attr-defined]
    common.log(f"generating {sizes[-1]} memories")
    groups = generate_rows(rng, world, sizes[-1])
    loaded = 0
    cursor_group = 0
    for size in sizes:
        batch: list[Row] = []
        while loaded + len(batch) < size and cursor_group < len(groups):
            batch.extend(groups[cursor_group])
            cursor_group += 1
        load_s = 0.0
        for i in range(0, len(batch), LOAD_CHUNK):  # one transaction and staging table per chunk
            load_s += load_rows(world, batch[i : i + LOAD_CHUNK])
            if len(batch) > LOAD_CHUNK:
                common.log(f"  loaded {min(i + LOAD_CHUNK, len(batch))} of {len(batch)} rows ({load_s:.0f} s)")
        loaded += len(batch)
        common.log(f"loaded {len(batch)} rows in {load_s:.1f} s ({len(batch) / load_s:.0f} rows/s); total {loaded}")
        counts = table_counts()
        common.log(f"measuring {args.queries} recalls at {loaded} memories")
        q = run_queries(rng, world, args.queries, f"{loaded}")
        # heaviest end users (by visible rows)
        per_user = Counter()
        for group in groups[:cursor_group]:
            for row in group:
                per_user[row.user.end_user_id] += 1
        by_id = {u.end_user_id: u for u in world.users}
        heavy = [by_id[uid] for uid, _ in per_user.most_common(20)]
        hq = heavy_user_queries(rng, world, heavy, 200)
        entry = {
            "rows": loaded,
            "load_s": round(load_s, 1),
            "load_rows_per_s": round(len(batch) / load_s),
            "table": counts,
            "queries": q,
            "heaviest_20_users": hq,
        }
        common.log(
            f"  total p50/p95 {q['stages_ms']['total']['p50']}/{q['stages_ms']['total']['p95']} ms, "
            f"violations {q['scope_violations']}; heavy users p95 {hq['total_ms']['p95']} ms"
        )
        results["sizes"].append(entry)
    # plan at the largest size, for the heaviest end user
    top = results["sizes"][-1]
    heavy_user = heavy[0]
    top["explain"] = explain(heavy_user, "where is my order" if heavy_user.lang == "en" else "查一下我的订单")
    common.log("EXPLAIN ANALYZE of the candidate query:\n" + top["explain"]["plan"])
    if not args.no_hnsw:
        common.log("HNSW comparison: building an HNSW index (dropped afterwards)")
        top["hnsw"] = hnsw_experiment(rng, world, heavy, 200)
        h = top["hnsw"]
        common.log(
            f"  build {h['build_s']} s; recall's plan uses HNSW: {h['recall_plan_with_hnsw']['uses_hnsw']}; "
            + "; ".join(
                f"{n}: hnsw={h[n]['plan_uses_hnsw']} rows {h[n]['rows_returned']} (exact {h[n]['rows_in_exact_top10']})"
                f" short {h[n]['queries_short']}, p50 {h[n]['ms']['p50']} ms"
                for n in ("user_planner", "user_forced_hnsw", "tenant_planner", "tenant_forced_hnsw")
            )
        )
    if sizes[-1] < 1_000_000:
        rate = top["load_rows_per_s"]
        results["one_million_estimate"] = {
            "bulk_load_s_at_measured_rate": round(1_000_000 / rate),
            "note": "estimate from the measured bulk-load rate at the largest size (index maintenance grows "
            "with the table, so a lower bound); measured separately with --sizes 1000000 --no-hnsw --ingest 0 "
            "--out recall_scale_1m",
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated memory counts, ascending")
    parser.add_argument("--queries", type=int, default=1000, help="recalls measured per size")
    parser.add_argument("--pool", type=int, default=12000, help="distinct texts embedded")
    parser.add_argument("--ingest", type=int, default=500, help="memories written per ingest path (0: no ingest)")
    parser.add_argument(
        "--ingest-batch", default="5,50", help="comma-separated batch sizes for the write_memories path"
    )
    parser.add_argument("--ingest-only", action="store_true", help="measure only the ingest (no recall world)")
    parser.add_argument("--no-hnsw", action="store_true", help="skip the HNSW comparison at the largest size")
    parser.add_argument(
        "--zh-model",
        help="embedding model of the Chinese tenants (default: the product's default for Chinese tenants, "
        "multilingual-use-384; all-MiniLM-L6-v2 puts every tenant on MiniLM)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--out",
        help="name of the JSON written under bench/out/ (recall_scale, or recall_scale_ingest with --ingest-only)",
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    global ZH_MODEL
    ZH_MODEL = args.zh_model
    args.out = args.out or ("recall_scale_ingest" if args.ingest_only else "recall_scale")

    started = time.perf_counter()
    common.setup_django(DB_NAME, fresh=True)
    from memory.embeddings import models as embeddings

    embeddings.embed(["warm up"])
    rng = random.Random(args.seed)
    tag = f"{args.seed}"
    results: dict[str, Any] = {
        "benchmark": "recall_scale",
        "date": common.now_iso(),
        "command": "nice -n 10 .venv/bin/python bench/scale/recall_scale.py " + " ".join(sys.argv[1:]),
        "machine": common.machine_info(),
        "setup": {
            "tenants": N_TENANTS,
            "end_users_per_tenant": USERS_PER_TENANT,
            "pool_texts": args.pool,
            "embedding": "real vectors of a pool of distinct texts by each tenant's model; each memory's "
            "content is one pool text (reused across end users)",
            "models": {"en": MODEL, "zh": zh_model()},
            "queries_per_size": args.queries,
            "k": 5,
            "as_of": f"80% now, 20% a random moment in the last {PAST_AS_OF_DAYS} days",
        },
        "targets": {
            "total_p95_ms_at_100k_incl_embed": 20,
            "total_p95_ms_at_1M": 50,
            "scope_violations": 0,
            "ingest_per_s": 100,
        },
        "sizes": [],
    }

    if not args.ingest_only:
        measure_recall(args, sizes, rng, tag, results)
    if args.ingest > 0:
        common.log(f"ingest: {args.ingest} memories per path (inline, batches of {args.ingest_batch}, repeats)")
        results["ingest"] = measure_ingest(args.ingest, tag, [int(b) for b in args.ingest_batch.split(",")])
        for name, path in results["ingest"]["paths"].items():
            common.log(f"  {name}: {path}")
    results["wall_s"] = round(time.perf_counter() - started, 1)
    path = common.write_result(args.out, results)
    if results["sizes"]:
        print()
        print_tables(results)
    print()
    print(f"ingest: {json.dumps(results.get('ingest', 'not measured'), ensure_ascii=False)}")
    print(f"wrote {path} in {results['wall_s']} s")


if __name__ == "__main__":
    main()
