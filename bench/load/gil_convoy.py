"""GIL convoy: how much a query embedding slows down when another thread of the process runs Python.

A chat turn embeds its query on a pool thread while the turn's own thread extracts facts, and a worker
runs several turns at once. Multilingual USE (memdesk's Chinese default) is numpy: dozens of small
operations per sentence, each releasing the GIL and taking it back. Beside a thread that runs pure
Python, every take-back waits for the interpreter's switch interval (5 ms by default), so the embedding
stretches far beyond its CPU time while the other thread hardly slows down. MiniLM on onnxruntime takes
the GIL once per call and is measured for comparison.

    nice -n 5 .venv/bin/python bench/load/gil_convoy.py               # ~1 minute
    nice -n 5 .venv/bin/python bench/load/gil_convoy.py --n 50 --switch-ms 1

Prints, per model: ms per embedding alone and beside a spinning Python thread, and the spinning thread's
speed with and without the embeddings; writes ``bench/out/gil_convoy.json``. Needs no database.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import log, machine_info, now_iso, table, write_result  # noqa: E402

TEXT = "我的订单号是 ABC123，帮我查一下物流到哪了，什么时候能到"


def spin(stop: threading.Event, counter: list[int]) -> None:
    """Pure Python until ``stop``: the competing turn's extraction, say."""
    while not stop.is_set():
        total = 0
        for i in range(1000):
            total += i
        counter[0] += 1


def measure(model: str, n: int) -> dict[str, Any]:
    from memory.embeddings import models as embeddings

    for _ in range(10):  # load and warm
        embeddings.embed_one(TEXT, model=model, kind="query")

    started = time.perf_counter()
    for _ in range(n):
        embeddings.embed_one(TEXT, model=model, kind="query")
    alone_s = time.perf_counter() - started

    def spin_rate(seconds: float | None) -> tuple[float, float]:
        stop, counter = threading.Event(), [0]
        thread = threading.Thread(target=spin, args=(stop, counter))
        thread.start()
        began = time.perf_counter()
        if seconds is None:
            for _ in range(n):
                embeddings.embed_one(TEXT, model=model, kind="query")
        else:
            time.sleep(seconds)
        elapsed = time.perf_counter() - began
        stop.set()
        thread.join()
        return counter[0] / elapsed, elapsed

    spin_alone, _ = spin_rate(max(alone_s, 1.0))
    spin_beside, beside_s = spin_rate(None)
    return {
        "model": model,
        "embeddings": n,
        "alone_ms": round(alone_s * 1000 / n, 2),
        "beside_spinning_thread_ms": round(beside_s * 1000 / n, 2),
        "slowdown": round(beside_s / alone_s, 1),
        "spinning_thread_speed_kept": round(spin_beside / spin_alone, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100, help="embeddings per measurement")
    parser.add_argument("--switch-ms", type=float, default=None, help="sys.setswitchinterval, in ms")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from memory.embeddings import models as embeddings

    if args.switch_ms is not None:
        sys.setswitchinterval(args.switch_ms / 1000)
    rows = []
    for model in (embeddings.USE_MODEL, embeddings.DEFAULT_MODEL):
        log(f"measuring {model}")
        rows.append(measure(model, args.n))
    print(table(
        ["model", "alone ms", "beside a Python thread ms", "slowdown", "Python thread's speed kept"],
        [[r["model"], r["alone_ms"], r["beside_spinning_thread_ms"], f"{r['slowdown']}×",
          r["spinning_thread_speed_kept"]] for r in rows],
    ))  # fmt: skip
    path = write_result(
        "gil_convoy",
        {
            "benchmark": "gil_convoy", "date": now_iso(), "machine": machine_info(with_db=False),
            "switch_interval_ms": round(sys.getswitchinterval() * 1000, 3), "results": rows,
        },
    )  # fmt: skip
    log(f"written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
