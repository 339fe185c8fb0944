"""Mood detection: precision, recall and F1 of ``memory.text.mood.detect_mood`` on hand-labelled messages.

Data: ``bench/data/mood_labels.json`` — Chinese and English customer messages, each labelled ``negative`` (the
user is upset, worried or dissatisfied: a care memory would help the reply) or not, with a ``kind`` naming the
trap it sets (``negated``: 「我一点也不生气」; ``calm_complaint``: dissatisfaction without an emotional word;
``sarcasm``; ``resolved``: an anger already over; ``tricky_word``: 「垃圾分类」, 「不好意思」, "sorry").
The positive class is "negative mood".

Run from the repository root: ``.venv/bin/python bench/quality/mood.py`` (well under a second; no Django, no model).
``--errors`` lists each message it gets wrong with the cues it found; ``--data PATH`` scores another file of
the same schema.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR.parent) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR.parent))

from memory.text.mood import detect_mood  # noqa: E402

LABELS = BENCH_DIR / "data" / "mood_labels.json"


def prf(pairs: list[tuple[bool, bool]]) -> tuple[float, float, float, int]:
    """(precision, recall, F1, n) of (predicted, labelled) pairs, the positive class being a negative mood."""
    tp = sum(p and g for p, g in pairs)
    fp = sum(p and not g for p, g in pairs)
    fn = sum(g and not p for p, g in pairs)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1, len(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=LABELS)
    parser.add_argument("--errors", action="store_true", help="list the messages it gets wrong")
    args = parser.parse_args()
    rows = json.loads(args.data.read_text(encoding="utf-8"))

    start = time.perf_counter()
    moods = [detect_mood(row["text"]) for row in rows]
    per_message_us = (time.perf_counter() - start) / len(rows) * 1e6

    groups: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    kinds: dict[str, list[bool]] = defaultdict(list)
    for row, mood in zip(rows, moods, strict=True):
        pair = (mood.negative, bool(row["negative"]))
        groups["all"].append(pair)
        groups[row["lang"]].append(pair)
        kinds[row["kind"]].append(pair[0] == pair[1])

    negatives = sum(bool(r["negative"]) for r in rows)
    print(f"{len(rows)} messages ({negatives} negative), {args.data.name}; {per_message_us:.0f} µs a message\n")
    print("| set | n | precision | recall | F1 |")
    print("| --- | --- | --- | --- | --- |")
    for name in ("all", "zh", "en"):
        p, r, f, n = prf(groups[name])
        print(f"| {name} | {n} | {p:.2f} | {r:.2f} | {f:.2f} |")
    print("\naccuracy by kind: " + ", ".join(f"{k} {sum(v)}/{len(v)}" for k, v in sorted(kinds.items())))
    if args.errors:
        print()
        for row, mood in zip(rows, moods, strict=True):
            if mood.negative != bool(row["negative"]):
                wrong = "missed" if row["negative"] else "false alarm"
                print(f"{wrong:11} {row['kind']:16} {mood.score:.2f} {list(mood.cues)}  {row['text']}")


if __name__ == "__main__":
    main()
