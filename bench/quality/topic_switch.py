"""Topic-switch detection: precision and recall of the phrase rules alone and of rules + embedding (S10).

Data: ``bench/data/topic_switch_labels.json`` — pairs of a current topic (its user messages, oldest first) and a
new user message, labelled ``switch`` or not, in Chinese and English; the positive class is "switch". The
detector sees what the runtime keeps for a topic (``memory.topics.freeze``): the vectors of the topic's first and
latest message.

Run from the repository root: ``.venv/bin/python bench/quality/topic_switch.py`` (no database; loads the embedding
models once). ``--errors`` lists the pairs it gets wrong with their similarity; ``--sweep`` prints precision and
recall over thresholds (how ``memory.topics.detect.SHIFT_THRESHOLDS`` were chosen). Per-message cost: the embedding of
the new message plus the similarity, the work a turn adds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR.parent) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR.parent))

import bench.common  # noqa: E402, F401 - Django settings and offline model flags

LABELS = BENCH_DIR / "data" / "topic_switch_labels.json"


def prf(pairs: list[tuple[bool, bool]]) -> tuple[float, float, int]:
    tp = sum(p and g for p, g in pairs)
    fp = sum(p and not g for p, g in pairs)
    fn = sum(g and not p for p, g in pairs)
    return (tp / (tp + fp) if tp + fp else 0.0), (tp / (tp + fn) if tp + fn else 0.0), len(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=LABELS)
    parser.add_argument("--errors", action="store_true")
    parser.add_argument("--sweep", action="store_true")
    args = parser.parse_args()
    import django

    django.setup()  # the models module only: no database is opened
    from memory.embeddings import models as embeddings
    from memory.topics.detect import SHIFT_THRESHOLDS, detect_topic_switch, judge_message, shift_applies
    from memory.topics.domains import classify, named_domains

    pairs = json.loads(args.data.read_text(encoding="utf-8"))["pairs"]
    models = {embeddings.USE_MODEL: ("zh", "en"), embeddings.DEFAULT_MODEL: ("en",)}
    for model, langs in models.items():
        rows = [p for p in pairs if p["lang"] in langs]
        embeddings.embed(["warm up"], model=model)
        classify(embeddings.embed_one("warm up", model=model), model)  # the domain examples, embedded once
        costs, scored = [], []
        for pair in rows:
            topic = embeddings.embed([pair["previous"][0], pair["previous"][-1]], model=model)
            domains: list[str] = []  # as memory.topics.freeze keeps them: each known domain of the topic's messages
            likely: list[str] = []  # and each vote's winner, known or not
            for text in pair["previous"]:
                guess = classify(embeddings.embed_one(text, model=model, kind="query"), model)
                domains += [guess.domain] if guess.domain and guess.domain not in domains else []
                likely += [guess.likely] if guess.likely and guess.likely not in likely else []
            start = time.perf_counter()
            applies = shift_applies(pair["new"], model)
            vector = embeddings.embed_one(pair["new"], model=model, kind="query") if applies else None
            rule = detect_topic_switch(pair["new"]) is not None
            similarity = float(max(topic @ vector)) if vector is not None else None
            verdict = judge_message(
                pair["new"], similarity=similarity, model=model,
                domain=classify(vector, model).domain if vector is not None else None,
                topic_domains=domains, topic_likely=likely, named=sorted(named_domains(pair["new"])),
            ).outcome  # fmt: skip
            shift = verdict == "switch"
            costs.append((time.perf_counter() - start) * 1000)
            scored.append((pair, rule, shift, similarity, verdict))
        print(f"\n{model} ({'+'.join(langs)}, {len(rows)} pairs, threshold {SHIFT_THRESHOLDS[model]:.2f})")
        print("| langs | rules P/R | rules + domains P/R | + a confirmed maybe P/R |")
        for lang in (*langs, "all"):
            part = [s for s in scored if lang in ("all", s[0]["lang"])]
            rp, rr, n = prf([(rule, p["switch"]) for p, rule, *_ in part])
            ep, er, _ = prf([(rule or shift, p["switch"]) for p, rule, shift, *_ in part])
            mp, mr, _ = prf([(rule or v in ("switch", "maybe"), p["switch"]) for p, rule, _, _, v in part])
            print(f"| {lang} ({n}) | {rp:.2f}/{rr:.2f} | {ep:.2f}/{er:.2f} | {mp:.2f}/{mr:.2f} |")
        print(f"per message: median {statistics.median(costs):.2f} ms, max {max(costs):.2f} ms (embedding + rules)")
        if args.sweep:
            for t in [x / 100 for x in range(15, 51, 5)]:
                p, r, _ = prf([(rule or (s is not None and s < t), x["switch"]) for x, rule, _, s, _ in scored])
                print(f"  distance alone at {t:.2f}: P {p:.2f} R {r:.2f}")
        if args.errors:
            for pair, rule, shift, similarity, verdict in scored:
                if (rule or shift) != pair["switch"]:
                    sim = "—" if similarity is None else f"{similarity:.2f}"
                    print(f"  wrong ({'switch' if pair['switch'] else 'stay'}, sim {sim}, {verdict}): "
                          f"{pair['previous'][-1]} → {pair['new']}")  # fmt: skip


if __name__ == "__main__":
    main()
