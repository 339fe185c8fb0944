"""Query intent rewrite (S7): the regex table alone against the table plus the embedding classifier.

On ``bench/data/vague_queries.json`` (vague customer-service queries, zh and en, each labelled with the intent of
``memory.recall.rewrite`` it stands for, or ``"none"`` where the query must stay unchanged):

- **right intent**: the share of intent queries rewritten to their labelled intent, with ``rewrite_query`` (the
  table) and with ``rewrite_by_embedding`` (the table first, then the nearest labelled example of
  ``INTENT_EXAMPLES``); **wrong intent**: rewritten to another one;
- **false rewrites**: the share of ``"none"`` queries that were rewritten;
- **threshold sweep** per model (multilingual USE on every query, MiniLM on the English ones: it cannot read
  Chinese): the share of all queries handled right (the labelled intent, or left unchanged for ``"none"``) at
  each similarity threshold; the best one (``best_threshold``: at least ``MARGIN`` above every ``"none"``
  query, the higher on a tie), and a 2-fold estimate (threshold chosen on the
  even-numbered queries, scored on the odd ones, and the other way round) because a threshold picked on the
  set it is scored on flatters itself;
- **time**: what the embedding rewrite adds to a query's embedding in recall (``rewrite_and_embed`` against
  ``embed_one`` of the query), median over the set, for queries it leaves alone and for those it rewrites.

Recall@5 with and without the rewrite is measured through the chat path by ``bench/quality/chat_memory.py --dataset
zh_cs --knobs '{"intent_embedding": false}'``. Run: ``nice -n 10 .venv/bin/python bench/quality/intent_rewrite.py``
(under a minute); writes ``bench/out/intent_rewrite.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: common
import common  # noqa: E402

DATA = common.BENCH_DIR / "data" / "vague_queries.json"
THRESHOLDS = [round(0.30 + 0.025 * i, 3) for i in range(25)]  # 0.30 … 0.90
MARGIN = 0.05


def load(path: Path) -> list[dict[str, str]]:
    return json.loads(path.read_text(encoding="utf-8"))["queries"]


def scores(queries: list[dict[str, str]], predicted: list[str | None]) -> dict[str, Any]:
    intent_rows = [(q, p) for q, p in zip(queries, predicted, strict=True) if q["intent"] != "none"]
    none_rows = [(q, p) for q, p in zip(queries, predicted, strict=True) if q["intent"] == "none"]
    right = sum(p == q["intent"] for q, p in intent_rows)
    wrong = sum(p is not None and p != q["intent"] for q, p in intent_rows)
    false = sum(p is not None for _, p in none_rows)
    return {
        "intent_queries": len(intent_rows),
        "right_intent": round(right / len(intent_rows), 3),
        "wrong_intent": round(wrong / len(intent_rows), 3),
        "none_queries": len(none_rows),
        "false_rewrites": round(false / len(none_rows), 3) if none_rows else None,
        "misses": [q["query"] for q, p in intent_rows if p != q["intent"]],
        "false": [q["query"] for q, p in none_rows if p is not None],
    }


def handled_right(query: dict[str, str], table: str | None, match: Any, threshold: float) -> bool:
    """Whether the query ends right (labelled intent, or unchanged for none) at ``threshold``."""
    predicted = table
    if predicted is None and match is not None and match.intent != "none" and match.similarity >= threshold:
        predicted = match.intent
    return predicted == (None if query["intent"] == "none" else query["intent"])


def best_threshold(rows: list[tuple[dict[str, str], str | None, Any]]) -> tuple[float, float]:
    """The threshold with most queries right among those at least ``MARGIN`` above every "none" query's
    similarity to an intent example (a false rewrite changes what recall searches for; a miss only keeps the
    query as it was), the higher on a tie."""
    accuracy = {t: sum(handled_right(q, tab, m, t) for q, tab, m in rows) / len(rows) for t in THRESHOLDS}
    nones = [r for r in rows if r[0]["intent"] == "none"]
    clean = [t for t in THRESHOLDS if all(handled_right(q, tab, m, t - MARGIN) for q, tab, m in nones)] or THRESHOLDS
    best = max(clean, key=lambda t: (accuracy[t], t))
    return best, accuracy[best]


def time_rewrite(
    subset: list[dict[str, str]], table: list[str | None], combined: list[str | None], model: str, repeat: int
) -> dict[str, Any]:
    """Per query the table leaves alone: the median time of embedding it (what recall did before), of the
    classification step alone (the product with the examples), and of ``rewrite_and_embed`` minus the plain
    embedding, measured alternately so that a busy moment of the machine weighs on both alike."""
    from memory.embeddings import models as embeddings
    from memory.recall.rewrite import classify_intent, rewrite_and_embed

    plain_ms, classify_ms, added_ms = [], [], []
    for query, tab, intent in zip(subset, table, combined, strict=True):
        if tab is not None:
            continue  # the table's path is what recall did before
        text = query["query"]
        plain, full, classify = [], [], []
        for _ in range(repeat):
            start = time.perf_counter()
            vector = embeddings.embed_one(text, model=model, kind="query")
            plain.append(time.perf_counter() - start)
            start = time.perf_counter()
            classify_intent(text, model=model, vector=vector)
            classify.append(time.perf_counter() - start)
            start = time.perf_counter()
            rewrite_and_embed(text, [model])
            full.append(time.perf_counter() - start)
        plain_ms.append(statistics.median(plain) * 1000)
        classify_ms.append(statistics.median(classify) * 1000)
        if intent is not None:
            added_ms.append((statistics.median(full) - statistics.median(plain)) * 1000)
    return {
        "embed_ms_p50": round(statistics.median(plain_ms), 3),
        "classify_ms_p50": round(statistics.median(classify_ms), 3),
        "added_ms_p50_rewritten": round(statistics.median(added_ms), 3) if added_ms else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--repeat", type=int, default=5, help="timing: runs per query (median)")
    args = parser.parse_args()

    import django

    django.setup()
    from memory.recall.rewrite import classify_intent, intent_models, rewrite_by_embedding, rewrite_query
    from memory.text.language import detect_language

    queries = load(args.data)
    results: dict[str, Any] = {"machine": common.machine_info(with_db=False), "git": common.git_state()}
    results["data"] = {"file": str(args.data.relative_to(common.REPO_ROOT)), "queries": len(queries)}
    table = [rewrite_query(q["query"]).intent for q in queries]
    results["table_only"] = scores(queries, table)
    results["models"] = {}
    rows_out = []
    for model, (languages, threshold) in intent_models().items():
        chosen = [i for i, q in enumerate(queries) if detect_language(q["query"]) in languages]
        subset = [queries[i] for i in chosen]
        combined = [rewrite_by_embedding(q["query"], model=model).intent for q in subset]
        matches = [classify_intent(q["query"], model=model) for q in subset]
        rows = [(q, table[i], m) for q, i, m in zip(subset, chosen, matches, strict=True)]
        sweep = {t: round(sum(handled_right(q, tab, m, t) for q, tab, m in rows) / len(rows), 3) for t in THRESHOLDS}
        best, best_accuracy = best_threshold(rows)
        folds = []
        for train_parity in (0, 1):
            train = [r for k, r in enumerate(rows) if k % 2 == train_parity]
            test = [r for k, r in enumerate(rows) if k % 2 != train_parity]
            t, _ = best_threshold(train)
            folds.append(sum(handled_right(q, tab, m, t) for q, tab, m in test) / len(test))

        timing = time_rewrite(subset, [table[i] for i in chosen], combined, model, args.repeat)
        subset_table = scores(subset, [table[i] for i in chosen])
        results["models"][model] = {
            "languages": list(languages),
            "threshold": threshold,
            "table_only": subset_table,
            "table_and_embedding": scores(subset, combined),
            "sweep": sweep,
            "best_threshold": best,
            "best_accuracy": round(best_accuracy, 3),
            "two_fold_accuracy": round(statistics.mean(folds), 3),
            **timing,
            "nearest": [
                {"query": q["query"], "label": q["intent"], "intent": m.intent, "similarity": round(m.similarity, 3)}
                for q, m in zip(subset, matches, strict=True)
                if m is not None
            ],
        }
        emb = results["models"][model]["table_and_embedding"]
        rows_out.append(
            [
                model, "+".join(languages), len(subset), subset_table["right_intent"], emb["right_intent"],
                emb["wrong_intent"], subset_table["false_rewrites"], emb["false_rewrites"], threshold, best,
                round(statistics.mean(folds), 3), timing["embed_ms_p50"], timing["classify_ms_p50"],
                timing["added_ms_p50_rewritten"],
            ]
        )  # fmt: skip
    path = common.write_result("intent_rewrite", results)
    print(
        common.table(
            [
                "model", "lang", "queries", "right (table)", "right (+emb)", "wrong (+emb)", "false (table)",
                "false (+emb)", "threshold", "best", "2-fold acc", "embed ms", "+ms classify", "+ms rewritten",
            ],
            rows_out,
        )
    )  # fmt: skip
    for model, figures in results["models"].items():
        print(f"{model}: misses {figures['table_and_embedding']['misses']}")
        print(f"{model}: false rewrites {figures['table_and_embedding']['false']}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
