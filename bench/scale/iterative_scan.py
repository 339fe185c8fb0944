"""Recall's vector leg against pgvector 0.8's HNSW iterative scans, on the ``scale`` world of chat_memory.py.

The question: can an HNSW index on ``memory_memoryunit.embedding`` with the end user's scope in ``WHERE`` and
``hnsw.iterative_scan`` replace the vector leg's window of exact distances (``memory.recall.candidates``:
the end user's newest ``vector_window`` rows read through ``mem_user_window``, their distances computed
exactly), and would recall's long-history p95 ratio (5,000 turns against 50) fall with it?

It runs on the database and ingest that ``bench/quality/chat_memory.py --dataset scale --out NAME`` left
(``bench/out/NAME_ingest.json``: the tenant; the end users are the dataset's), with the same questions
(``chat_memory.build_scale``, same arguments). Each question goes once through
``memory.recall.pipeline.recall(k=10, record=False, trace=…)`` to get the product's candidate SQL and its
parameters (the query rewritten and embedded by the product, ``as_of``, the scope); every variant then
runs with those parameters, under the tenant's RLS scope, one transaction each:

- ``window``: the product's vector leg alone (``_candidate_sql`` with no lexical terms: the window of exact
  distances, the scope, the top ``candidates``);
- ``exact``: the exact top ``candidates`` over the end user's whole history in scope (no index: a
  ``MATERIALIZED`` CTE of every row in scope, sorted) — the truth the others are scored against;
- ``relaxed`` / ``strict``: ``ORDER BY embedding <=> q LIMIT candidates`` with ``SCOPE_SQL`` in ``WHERE`` on an
  HNSW index (``vector_cosine_ops``, m 16, ef_construction 64), ``hnsw.iterative_scan`` = relaxed_order /
  strict_order, ``hnsw.ef_search`` = ``--ef-search``, ``hnsw.max_scan_tuples`` = ``--max-scan-tuples``;
  the index forced (sequential, bitmap scans and sorts off: what the planner picks is reported apart);
- ``cand_product`` / ``cand_hnsw``: the whole candidate statement (both legs), as the product runs it and
  with its vector leg replaced by the ``relaxed`` query, as the planner plans it (the lexical leg unchanged,
  the window read without distances); ``cand_lex``: that statement with no vector leg (its lexical leg);
  ``cand_lex+relaxed``: ``cand_lex`` plus the forced ``relaxed`` query, two statements;
- ``recall``: ``recall()`` itself (timings per stage); ``recall_est_*``: its total with the product's candidate
  statement's time replaced by ``cand_hnsw``'s or ``cand_lex+relaxed``'s (estimates: the same question, the
  same round).

Variants alternate per question, in a rotating order, large and small end users alternating, ``--rounds``
times. ``--filler N`` then copies the scale tenant's memory rows into N other tenants (vectors perturbed by
uniform noise of ±``--noise`` per dimension, no key, no session), rebuilds the index, and measures the index
variants again: one index shared by many tenants and end users, as a product index would be.

The index and the filler memory rows are removed at the end (the filler tenants and end users stay, with no
memories; each run also opens one session per end user). Nothing of the product is patched; the HNSW SQL is
this benchmark's, so its times are an upper bound on what a product path would gain (no fusion, no settings
sent per transaction, no fetch of the hits). ``--rounds 0`` measures only the quality (no latency).

Usage (from the repository root, after the ingest)::

    nice -n 5 .venv/bin/python bench/quality/chat_memory.py --dataset scale --out iterscan_scale
    nice -n 5 .venv/bin/python bench/scale/iterative_scan.py --ingest iterscan_scale --rounds 2 --filler 4

Writes ``bench/out/iterative_scan.json`` (``--out`` to name it otherwise).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "quality"))
import common  # noqa: E402

INDEX = "bench_iter_hnsw"
KS = (10, 100)

_VEC_PRODUCT = """vec AS (
    SELECT id, 1 - distance AS sim, row_number() OVER (ORDER BY distance, id) AS rnk
    FROM scoped
    WHERE distance IS NOT NULL
    ORDER BY distance, id
    LIMIT %(n)s
),"""

#: The vector leg on the HNSW index: the scope in WHERE, the index's operator in ORDER BY (a CASE on the model,
#: as the product's distance is, cannot use the index: the model is a WHERE condition instead). The outer sort
#: puts relaxed_order's slightly unordered rows back in order (pgvector's README does the same).
_HNSW_LEG = """SELECT id, 1 - distance AS sim, row_number() OVER (ORDER BY distance, id) AS rnk FROM (
        SELECT m.id, m.embedding <=> %(q0)s::vector AS distance FROM memory_memoryunit m
        WHERE {scope} AND m.embedding_model = %(m0)s
        ORDER BY m.embedding <=> %(q0)s::vector LIMIT %(n)s
    ) a ORDER BY distance, id"""

_EXACT_LEG = """WITH every AS MATERIALIZED (
        SELECT m.id, m.embedding <=> %(q0)s::vector AS distance FROM memory_memoryunit m
        WHERE {scope} AND m.embedding_model = %(m0)s
    ) SELECT id, 1 - distance, row_number() OVER (ORDER BY distance, id) FROM every
    ORDER BY distance, id LIMIT %(n)s"""

_FORCE_INDEX = "SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off"


def sql_texts() -> dict[str, str]:
    from memory.recall.candidates import _candidate_sql
    from memory.store.read import SCOPE_SQL

    window = _candidate_sql(0, 1)
    assert _VEC_PRODUCT in window, "the product's vector leg changed: update _VEC_PRODUCT"
    hnsw = _HNSW_LEG.format(scope=SCOPE_SQL)
    return {
        "window": window,
        "exact": _EXACT_LEG.format(scope=SCOPE_SQL),
        "hnsw": hnsw,
        "count": f"SELECT count(*) FROM memory_memoryunit m WHERE {SCOPE_SQL} AND m.embedding_model = %(m0)s",
    }


def hybrid_sql(n_terms: int, leg: str | None = None) -> str:
    """The product's candidate statement with its vector leg on the HNSW index (or ``leg``, a WITH item's
    body); the window (``recent``) is still read for the lexical leg, without distances."""
    from memory.recall import candidates as c
    from memory.store.read import SCOPE_SQL, valid_sql

    sql = c._CANDIDATE_SQL.format(
        scope=SCOPE_SQL, valid=valid_sql("r", "%(as_of)s"), distance="NULL::float8", lex=c._lex_sql(n_terms)
    )
    assert _VEC_PRODUCT in sql
    body = _HNSW_LEG.format(scope=SCOPE_SQL) if leg is None else leg
    return sql.replace(_VEC_PRODUCT, "vec AS MATERIALIZED (" + body + "),")


#: No vector leg: the candidate statement's lexical leg alone (with the window it reads).
_NO_VEC = "SELECT NULL::uuid AS id, NULL::float8 AS sim, NULL::bigint AS rnk WHERE false"


def table_rows() -> int:
    from django.db import connection

    from tenants.rls import operator_scope

    with operator_scope(), connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memory_memoryunit")
        return cursor.fetchone()[0]


def n_terms(params: dict[str, Any]) -> int:
    return sum(1 for key in params if re.fullmatch(r"t\d+", key))


# --- world ---------------------------------------------------------------------------------------------------


def load_world(args: argparse.Namespace) -> tuple[Any, list[tuple[str, Any, list[str]]]]:
    """The scale tenant, and per end user (large, small): a new session and the questions."""
    import chat_memory

    manifest = chat_memory._read_manifest(
        common.OUT_DIR / f"{args.ingest}_ingest.json",
        {
            "dataset": "scale", "conversations": "None", "max_turns": "0", "locomo_turns": "paired",
            "data": str(chat_memory.ZH_CS_DATA), "turns": str(args.turns), "small_turns": str(args.small_turns),
            "queries": str(args.queries), "seed": str(args.seed), "tenant_settings": "{}", "fake_uses_memory": "0",
        },
    )  # fmt: skip
    dataset = chat_memory.build_scale(args.turns, args.small_turns, args.queries, args.seed)
    from tenants.models import Tenant

    by_id = {d["id"]: d for d in manifest["dialogues"]}
    users = []
    for dialogue in dataset.dialogues:
        tenant = Tenant.objects.get(pk=by_id[dialogue.id]["tenant_id"])
        session = common.open_session(tenant, dialogue.end_user, {"bench": "iterative_scan"})
        users.append((dialogue.id, tenant, session, [q.text for q in dialogue.questions]))
    return manifest, users


def build_index(m: int = 16, ef_construction: int = 64) -> float:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {INDEX}")
        cursor.execute("SET maintenance_work_mem = '512MB'")
        start = time.perf_counter()
        cursor.execute(
            f"CREATE INDEX {INDEX} ON memory_memoryunit USING hnsw (embedding vector_cosine_ops)"
            f" WITH (m = {m}, ef_construction = {ef_construction})"
        )
        took = time.perf_counter() - start
        cursor.execute("RESET maintenance_work_mem")
        cursor.execute("ANALYZE memory_memoryunit")
    return took


def add_filler(tenant: Any, copies: int, noise: float) -> tuple[list[Any], int]:
    """``copies`` tenants, each with the scale tenant's memory rows under its own end users (one per source end
    user), vectors perturbed; returns the filler tenants and the rows added."""
    from django.db import connection

    from tenants.models import EndUser
    from tenants.rls import operator_scope

    with operator_scope(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'memory_memoryunit'"
            " ORDER BY ordinal_position"
        )
        columns = [r[0] for r in cursor.fetchall()]
        cursor.execute("SELECT DISTINCT end_user_id FROM memory_memoryunit WHERE tenant_id = %s", [tenant.pk])
        source_users = [r[0] for r in cursor.fetchall()]
    replaced = {
        "id": "gen_random_uuid()",
        "tenant_id": "%(filler)s",
        "end_user_id": "(%(users)s::jsonb ->> m.end_user_id::text)::uuid",
        "session_id": "NULL",
        "key": "NULL",
        "superseded_by_id": "NULL",
        "source_message_id": "NULL",
        # a random vector per row (the subquery refers to the row, so it is evaluated per row)
        "embedding": "m.embedding + ARRAY(SELECT (random() - 0.5) * 2 * %(noise)s FROM generate_series(1,"
        " vector_dims(m.embedding)) WHERE m.id IS NOT NULL)::vector",
    }
    select = ", ".join(replaced.get(c, f"m.{c}") for c in columns)
    insert = (
        f"INSERT INTO memory_memoryunit ({', '.join(columns)}) SELECT {select} FROM memory_memoryunit m"
        " WHERE m.tenant_id = %(source)s"
    )
    fillers, added = [], 0
    import json

    for i in range(copies):
        filler = common.make_tenant(f"iterscan-filler-{i:02d}-{int(time.time())}", language="zh").tenant
        mapping = {}
        with operator_scope():
            eus = [EndUser(tenant=filler, external_id=f"filler-{j}") for j in range(len(source_users))]
            EndUser.all_objects.bulk_create(eus)
            mapping = {str(src): str(eu.id) for src, eu in zip(source_users, eus, strict=True)}
            with connection.cursor() as cursor:
                cursor.execute(
                    insert, {"filler": filler.pk, "users": json.dumps(mapping), "noise": noise, "source": tenant.pk}
                )
                added += cursor.rowcount
        fillers.append(filler)
        common.log(f"  filler tenant {i + 1}/{copies}: {added} rows so far")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memory_memoryunit")
    return fillers, added


def drop_filler(fillers: list[Any]) -> None:
    from django.db import connection

    from tenants.rls import operator_scope

    with operator_scope(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_memoryunit WHERE tenant_id = ANY(%s)", [[f.pk for f in fillers]])


# --- measurement ---------------------------------------------------------------------------------------------


def run_one(tenant: Any, sql: str, params: dict[str, Any], settings: list[str]) -> tuple[float, list[Any]]:
    """One statement in its own RLS-scoped transaction, ``settings`` (SET LOCAL) first; (ms, rows)."""
    from django.db import connection

    from tenants.rls import tenant_scope

    with tenant_scope(tenant), connection.cursor() as cursor:
        for statement in settings:
            cursor.execute(statement)
        start = time.perf_counter()
        cursor.execute(sql, params)
        rows = cursor.fetchall()
        return (time.perf_counter() - start) * 1000, rows


def explain_one(tenant: Any, sql: str, params: dict[str, Any], settings: list[str]) -> dict[str, Any]:
    from django.db import connection

    from tenants.rls import tenant_scope

    with tenant_scope(tenant), connection.cursor() as cursor:
        for statement in settings:
            cursor.execute(statement)
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + sql, params)
        plan = "\n".join(r[0] for r in cursor.fetchall())
    plan = re.sub(r"'\[[^]]*\]'", "'[…]'", plan)
    removed = sum(int(x) for x in re.findall(r"Rows Removed by Filter: (\d+)", plan))
    return {"uses_index": INDEX in plan, "rows_removed_by_filter": removed, "plan": plan}


def iter_settings(mode: str, args: argparse.Namespace, force: bool = True) -> list[str]:
    out = [
        f"SET LOCAL hnsw.iterative_scan = {mode}",
        f"SET LOCAL hnsw.ef_search = {args.ef_search}",
        f"SET LOCAL hnsw.max_scan_tuples = {args.max_scan_tuples}",
    ]
    return out + ([_FORCE_INDEX] if force else [])


def traces(users: list[tuple[str, Any, Any, list[str]]]) -> dict[str, list[dict[str, Any]]]:
    """Per end user, each question's candidate parameters as the product computes them."""
    from memory.recall.pipeline import recall

    out: dict[str, list[dict[str, Any]]] = {}
    for name, tenant, session, questions in users:
        recall(tenant, session, "warm up", k=10, record=False)
        out[name] = []
        for q in questions:
            trace: dict[str, Any] = {}
            recall(tenant, session, q, k=10, record=False, trace=trace)
            params = trace["candidate_params"]
            if any(re.fullmatch(r"m[1-9]\d*", key) for key in params):
                raise SystemExit("this benchmark expects one embedding model per tenant")
            out[name].append({"question": q, "params": params})
    return out


def quality(
    users: list[tuple[str, Any, Any, list[str]]],
    asked: dict[str, list[dict[str, Any]]],
    sqls: dict[str, str],
    variants: dict[str, list[str]],
    n: int,
) -> dict[str, Any]:
    """Per end user: rows in scope, the exact top ``n`` over the whole history, and how much of it the window and
    each index variant return (at k = 10 and k = n), plus short answers."""
    out: dict[str, Any] = {}
    for name, tenant, _session, _questions in users:
        per: dict[str, Any] = defaultdict(lambda: defaultdict(list))
        for item in asked[name]:
            params = item["params"]
            _, count = run_one(tenant, sqls["count"], params, [])
            exact_ms, exact = run_one(tenant, sqls["exact"], params, [])
            per["scope"]["rows"].append(count[0][0])
            per["scope"]["exact_ms"].append(exact_ms)
            truth = [r[0] for r in exact]
            got: dict[str, list[tuple[Any, float]]] = {}
            window = [r for r in run_one(tenant, sqls["window"], params, [])[1] if r[2] is not None]
            got["window"] = [(r[0], float(r[1])) for r in sorted(window, key=lambda r: r[2])]
            for variant, settings in variants.items():
                got[variant] = [(r[0], float(r[1])) for r in run_one(tenant, sqls["hnsw"], params, settings)[1]]
                # heap rows the index scan handed up and the filter refused (its other rows are returned)
                refused = explain_one(tenant, sqls["hnsw"], params, settings)["rows_removed_by_filter"]
                per[variant]["filtered_out"].append(refused)
            for variant, rows in got.items():
                ids = [mid for mid, _ in rows]
                per[variant]["returned"].append(len(ids))
                per[variant]["short"].append(len(ids) < len(truth))
                for k in KS:
                    want = set(truth[:k])
                    if want:
                        per[variant][f"recall@{k}"].append(len(want & set(ids[:k])) / len(want))
                        per[variant][f"missed@{k}"].append(len(want - set(ids[:k])))
                        # ties: a row as near as the exact k-th counts (rows of one text have one vector)
                        kth = float(exact[len(want) - 1][1])
                        near = sum(1 for _, sim in rows[:k] if sim >= kth - 1e-6)
                        per[variant][f"recall@{k}_by_distance"].append(min(near, len(want)) / len(want))
        out[name] = {
            "questions": len(asked[name]),
            "rows_in_scope": common.summarise(per["scope"]["rows"]),
            # the exact whole-history leg's time, one pass, not alternated with the others
            "exact_ms_one_pass": common.summarise(per["scope"]["exact_ms"]),
            **{
                v: {
                    "rows_returned_mean": round(sum(per[v]["returned"]) / len(per[v]["returned"]), 2),
                    "short_answers": sum(per[v]["short"]),
                    **{f"recall@{k}": round(sum(per[v][f"recall@{k}"]) / len(per[v][f"recall@{k}"]), 4) for k in KS},
                    **{
                        f"missed@{k}_mean": round(sum(per[v][f"missed@{k}"]) / len(per[v][f"missed@{k}"]), 2)
                        for k in KS
                    },
                    **{
                        f"recall@{k}_by_distance": round(
                            sum(per[v][f"recall@{k}_by_distance"]) / len(per[v][f"recall@{k}_by_distance"]), 4
                        )
                        for k in KS
                    },
                    "queries_missing_any@10": sum(1 for x in per[v]["missed@10"] if x),
                    **(
                        {"rows_filtered_out": common.summarise(per[v]["filtered_out"])}
                        if per[v]["filtered_out"]
                        else {}
                    ),
                }
                for v in ["window", *variants]
            },
        }
    return out


def latency(
    users: list[tuple[str, Any, Any, list[str]]],
    asked: dict[str, list[dict[str, Any]]],
    sqls: dict[str, str],
    variants: dict[str, list[str]],
    rounds: int,
    with_recall: bool,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Per end user and variant: statement times, alternating variants (rotating order) and end users."""
    from memory.recall.pipeline import recall

    ms: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name, *_ in users}
    names = ["window", *variants]
    if with_recall:
        names += ["cand_product", "cand_hnsw", "cand_lex", "recall"]
    hybrid: dict[int, str] = {}
    lex_only: dict[int, str] = {}
    product: dict[int, str] = {}
    from memory.recall.candidates import _candidate_sql

    turn = 0
    for r in range(rounds):
        n_questions = max(len(asked[name]) for name, *_ in users)
        for i in range(n_questions):
            for name, tenant, session, _questions in users:
                if i >= len(asked[name]):
                    continue
                item = asked[name][i]
                params = item["params"]
                order = names[turn % len(names) :] + names[: turn % len(names)]
                turn += 1
                for variant in order:
                    if variant == "window":
                        t, _ = run_one(tenant, sqls["window"], params, [])
                    elif variant == "cand_product":
                        nt = n_terms(params)
                        product.setdefault(nt, _candidate_sql(nt, 1))
                        t, _ = run_one(tenant, product[nt], params, [])
                    elif variant == "cand_hnsw":
                        nt = n_terms(params)
                        hybrid.setdefault(nt, hybrid_sql(nt))
                        t, _ = run_one(tenant, hybrid[nt], params, iter_settings("relaxed_order", args, force=False))
                    elif variant == "cand_lex":
                        nt = n_terms(params)
                        lex_only.setdefault(nt, hybrid_sql(nt, _NO_VEC))
                        t, _ = run_one(tenant, lex_only[nt], params, [])
                    elif variant == "recall":
                        result = recall(tenant, session, item["question"], as_of=params["as_of"], k=10, record=False)
                        t = result.timings_ms["total"]
                        for stage, value in result.timings_ms.items():
                            ms[name][f"recall.{stage}"].append(value)
                    else:
                        t, _ = run_one(tenant, sqls["hnsw"], params, variants[variant])
                    ms[name][variant].append(t)
                if with_recall:
                    # the whole recall with another candidate statement instead of the product's (estimates):
                    # the hybrid statement as the planner runs it, and the lexical leg plus the forced relaxed
                    # HNSW query as two statements
                    per = ms[name]
                    per["recall_est_hnsw"].append(per["recall"][-1] - per["cand_product"][-1] + per["cand_hnsw"][-1])
                    per["cand_lex+relaxed"].append(per["cand_lex"][-1] + per["relaxed"][-1])
                    per["recall_est_lex+relaxed"].append(
                        per["recall"][-1] - per["cand_product"][-1] + per["cand_lex+relaxed"][-1]
                    )
        common.log(f"  round {r + 1}/{rounds} done")
    out: dict[str, Any] = {name: {v: common.summarise(values) for v, values in per.items()} for name, per in ms.items()}
    large, small = users[0][0], users[1][0]
    out["p95_ratio_large_to_small"] = {
        v: round(out[large][v]["p95"] / out[small][v]["p95"], 3) for v in out[large] if v in out[small]
    }
    return out


def plans(
    users: list[tuple[str, Any, Any, list[str]]],
    asked: dict[str, list[dict[str, Any]]],
    sqls: dict[str, str],
    variants: dict[str, list[str]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """EXPLAIN ANALYZE of the first question per end user: the forced variants, and what the planner picks
    unforced (with relaxed_order on)."""
    out: dict[str, Any] = {}
    for name, tenant, _s, _q in users:
        params = asked[name][0]["params"]
        out[name] = {v: explain_one(tenant, sqls["hnsw"], params, s) for v, s in variants.items()}
        out[name]["planner_relaxed"] = explain_one(
            tenant, sqls["hnsw"], params, iter_settings("relaxed_order", args, force=False)
        )
        out[name]["cand_hnsw_planner"] = explain_one(
            tenant, hybrid_sql(n_terms(params)), params, iter_settings("relaxed_order", args, force=False)
        )
    return out


def summary_lines(label: str, q: dict[str, Any], lat: dict[str, Any], users: list[Any]) -> list[str]:
    large, small = users[0][0], users[1][0]
    lines = [f"## {label}"]
    for v in lat["p95_ratio_large_to_small"]:
        lines.append(
            f"{v:>22}: p50 {lat[large][v]['p50']:8.2f} / {lat[small][v]['p50']:8.2f} ms,"
            f" p95 {lat[large][v]['p95']:8.2f} / {lat[small][v]['p95']:8.2f} ms (large / small),"
            f" p95 ratio {lat['p95_ratio_large_to_small'][v]}"
        )
    for name in (large, small):
        lines.append(
            f"{name}: rows in scope p50 {q[name]['rows_in_scope']['p50']}; exact whole-history leg p50/p95"
            f" {q[name]['exact_ms_one_pass']['p50']}/{q[name]['exact_ms_one_pass']['p95']} ms (one pass)"
        )
        for v, f in q[name].items():
            if isinstance(f, dict) and "recall@10" in f:
                lines.append(
                    f"  {v:>8}: returned {f['rows_returned_mean']}, short {f['short_answers']}, recall@10 "
                    f"{f['recall@10']} ({f['recall@10_by_distance']} by distance), recall@100 {f['recall@100']}"
                    f" ({f['recall@100_by_distance']}), missed@10 {f['missed@10_mean']}, "
                    f"missed@100 {f['missed@100_mean']}, queries missing any of the top 10: "
                    f"{f['queries_missing_any@10']}"
                    + (
                        f", rows refused by the filter p50/p95 {f['rows_filtered_out']['p50']}/"
                        f"{f['rows_filtered_out']['p95']}"
                        if "rows_filtered_out" in f
                        else ""
                    )
                )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ingest", default="iterscan_scale", help="chat_memory.py --out name of the scale ingest")
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--small-turns", type=int, default=50)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--rounds", type=int, default=3, help="latency rounds over the questions")
    parser.add_argument("--ef-search", type=int, default=100)
    parser.add_argument("--max-scan-tuples", type=int, default=20000, help="pgvector's default: 20,000")
    parser.add_argument("--filler", type=int, default=0, help="other tenants holding a copy of the rows (0: none)")
    parser.add_argument("--filler-rounds", type=int, default=1)
    parser.add_argument("--noise", type=float, default=0.02, help="filler vectors: uniform noise per dimension")
    parser.add_argument("--out", default="iterative_scan")
    args = parser.parse_args()
    started = time.perf_counter()
    common.setup_django(f"memdesk_bench_chat_memory_{args.ingest}", fresh=False)
    from django.db import connection

    from memory.recall.tuning import tuning

    manifest, users = load_world(args)
    results: dict[str, Any] = {
        "benchmark": "iterative_scan",
        "date": common.now_iso(),
        "command": "nice -n 5 .venv/bin/python bench/scale/iterative_scan.py " + " ".join(sys.argv[1:]),
        "git": common.git_state(),
        "machine": common.machine_info(),
        "ingest": {"manifest": args.ingest, "git": manifest["git"]},
        "settings": {
            "candidates": tuning().candidates,
            "vector_window": tuning().vector_window,
            "ef_search": args.ef_search,
            "max_scan_tuples": args.max_scan_tuples,
            "hnsw": "m 16, ef_construction 64, vector_cosine_ops",
        },
    }
    n = int(tuning().candidates)
    sqls = sql_texts()
    variants = {"relaxed": iter_settings("relaxed_order", args), "strict": iter_settings("strict_order", args)}
    common.log("tracing the questions through recall()")
    asked = traces(users)
    results["table_rows"] = table_rows()
    with connection.cursor() as cursor:
        cursor.execute("SHOW work_mem")
        results["settings"]["work_mem"] = cursor.fetchone()[0]
        cursor.execute("SHOW hnsw.scan_mem_multiplier")
        results["settings"]["scan_mem_multiplier"] = cursor.fetchone()[0]
    fillers: list[Any] = []
    lines: list[str] = []
    try:
        common.log(f"building the HNSW index on {results['table_rows']} rows")
        results["index_build_s"] = round(build_index(), 1)
        common.log(f"  {results['index_build_s']} s; quality")
        results["quality"] = quality(users, asked, sqls, variants, n)
        results["plans"] = plans(users, asked, sqls, variants, args)
        results["latency"] = {"p95_ratio_large_to_small": {}}
        if args.rounds:
            common.log("latency")
            results["latency"] = latency(users, asked, sqls, variants, args.rounds, True, args)
        lines += summary_lines(f"scale world ({results['table_rows']} rows)", results["quality"], results["latency"],
                               users)  # fmt: skip
        print("\n".join(lines), flush=True)
        if args.filler:
            common.log(f"filler: {args.filler} tenants with a copy of the scale tenant's rows")
            fillers, added = add_filler(users[0][1], args.filler, args.noise)
            results["filler"] = {"tenants": args.filler, "rows_added": added, "noise": args.noise}
            results["filler"]["table_rows"] = table_rows()
            common.log(f"  rebuilding the index on {results['filler']['table_rows']} rows")
            results["filler"]["index_build_s"] = round(build_index(), 1)
            common.log(f"  {results['filler']['index_build_s']} s")
            results["filler"]["quality"] = quality(users, asked, sqls, variants, n)
            results["filler"]["plans"] = plans(users, asked, sqls, variants, args)
            results["filler"]["latency"] = latency(users, asked, sqls, variants, args.filler_rounds, True, args)
            more = summary_lines(
                f"shared index ({results['filler']['table_rows']} rows, {args.filler + 1} tenants)",
                results["filler"]["quality"], results["filler"]["latency"], users,
            )  # fmt: skip
            print("\n".join(more), flush=True)
            lines += more
    finally:
        if fillers:
            drop_filler(fillers)
        with connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {INDEX}")
            cursor.execute("ANALYZE memory_memoryunit")
    results["summary"] = lines
    results["wall_s"] = round(time.perf_counter() - started, 1)
    path = common.write_result(args.out, results)
    print(f"wrote {path} in {results['wall_s']} s")


if __name__ == "__main__":
    main()
