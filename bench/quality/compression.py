"""Compression benchmark (S3): do the facts survive, does every output fit, how much shorter, how fast.

Corpora: every turn of LoCoMo (``/work/shared/bench/locomo10.json`` or ``$LOCOMO_PATH``; English) and the
Chinese customer-service set in ``bench/data/zh_cs_dialogues.json``. For each text: ``entities(original)``, then
``compress(original)`` at the default 150-character limit. Reported per corpus and overall:

* entity survival — share of entities found verbatim in the compressed text (target ≥ 98 %);
* within limit — share of outputs of at most 150 characters (must be 100 %);
* mean compression ratio — mean of len(compressed) / len(original);
* throughput — texts per second for entities() + compress() together, single thread.

Run: ``.venv/bin/python bench/quality/compression.py``; writes ``bench/out/compression.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from memory.text.compression import compress, entities  # noqa: E402

LIMIT = 150
LOCOMO = Path(os.environ.get("LOCOMO_PATH", "/work/shared/bench/locomo10.json"))
ZH_SET = ROOT / "bench" / "data" / "zh_cs_dialogues.json"
OUT = ROOT / "bench" / "out" / "compression.json"


def locomo_texts(path: Path) -> list[str]:
    samples = json.loads(path.read_text(encoding="utf-8"))
    texts: list[str] = []
    for sample in samples:
        for turns in sample["conversation"].values():
            if isinstance(turns, list):
                texts.extend(turn["text"] for turn in turns if turn.get("text"))
    return texts


def zh_texts(path: Path) -> list[str]:
    return [item["text"] for item in json.loads(path.read_text(encoding="utf-8"))]


def measure(name: str, texts: list[str]) -> dict[str, Any]:
    total_entities = kept_entities = within = 0
    ratios: list[float] = []
    losses: list[dict[str, Any]] = []
    started = time.perf_counter()
    for text in texts:
        found = entities(text)
        result = compress(text, limit=LIMIT)
        within += len(result) <= LIMIT
        ratios.append(len(result) / max(1, len(text)))
        lost = [entity for entity in found if entity not in result]
        total_entities += len(found)
        kept_entities += len(found) - len(lost)
        if lost and len(losses) < 10:
            losses.append({"text": text, "compressed": result, "lost": lost})
    elapsed = time.perf_counter() - started
    return {
        "corpus": name,
        "texts": len(texts),
        "texts_over_limit_before": sum(len(t) > LIMIT for t in texts),
        "entities": total_entities,
        "entity_survival": kept_entities / total_entities if total_entities else 1.0,
        "within_limit": within / len(texts) if texts else 1.0,
        "mean_compression_ratio": sum(ratios) / len(ratios) if ratios else 1.0,
        "texts_per_second": len(texts) / elapsed if elapsed else 0.0,
        "seconds": elapsed,
        "examples_of_loss": losses,
    }


def main() -> int:
    compress("预热分词词典。", limit=LIMIT)  # load the dictionary outside the timed loop
    corpora = [("zh_cs_dialogues", zh_texts(ZH_SET))]
    if LOCOMO.exists():
        corpora.insert(0, ("locomo10", locomo_texts(LOCOMO)))
    else:
        print(f"LoCoMo not found at {LOCOMO}; measuring the Chinese set only", file=sys.stderr)
    results = [measure(name, texts) for name, texts in corpora]
    total_texts = sum(r["texts"] for r in results)
    total_entities = sum(r["entities"] for r in results)
    overall = {
        "texts": total_texts,
        "entity_survival": sum(r["entity_survival"] * r["entities"] for r in results) / max(1, total_entities),
        "within_limit": sum(r["within_limit"] * r["texts"] for r in results) / max(1, total_texts),
        "mean_compression_ratio": sum(r["mean_compression_ratio"] * r["texts"] for r in results) / max(1, total_texts),
        "texts_per_second": total_texts / max(1e-9, sum(r["seconds"] for r in results)),
    }
    report = {
        "limit": LIMIT,
        "python": sys.version.split()[0],
        "machine": os.uname().machine,
        "corpora": results,
        "overall": overall,
    }
    for result in results:
        print(
            f"{result['corpus']:<16} texts={result['texts']:<5} (>{LIMIT} chars: {result['texts_over_limit_before']}) "
            f"entities={result['entities']:<5} survival={result['entity_survival']:.2%} "
            f"within_limit={result['within_limit']:.2%} ratio={result['mean_compression_ratio']:.3f} "
            f"throughput={result['texts_per_second']:.0f} texts/s"
        )
    print(
        f"{'overall':<16} texts={overall['texts']:<5} survival={overall['entity_survival']:.2%} "
        f"within_limit={overall['within_limit']:.2%} ratio={overall['mean_compression_ratio']:.3f} "
        f"throughput={overall['texts_per_second']:.0f} texts/s"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0 if overall["within_limit"] == 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
