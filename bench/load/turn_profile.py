"""Where one chat turn's time goes: sequential turns in-process against the
fake Ollama, with each turn's wall and CPU time, the PostgreSQL backend's CPU
per turn, and the stage figures the product itself records (the
``memdesk_turn_stage_seconds`` and ``memdesk_recall_latency_seconds``
histograms of ``memory/metrics.py``) — the figures behind the chat-load target
(bench/RESULTS.md § Chat load).

    nice -n 5 .venv/bin/python bench/load/turn_profile.py --sessions 20 --turns 6
    nice -n 5 .venv/bin/python bench/load/turn_profile.py --cprofile bench/out/turn.prof

The turn runs exactly as in the server (``chat.turn.run.run_turn``); its units
of work, which the server hands to a thread pool, run inline on the event
loop's thread here (the loop's default executor is one that runs a call at
once), so one profiler sees all of them. ``--cprofile`` adds a table of the
finer stages (``STAGES``: cumulative time per call under the profiler, which
slows Python calls; compare stages with each other, not with the turn
figures). Nothing of the product is replaced. The messages are chat_load's:
an order number first, then questions about it; the tenant is Chinese (its
default embedding model). The first turns warm the caches and the models and
are left out of the figures (``--warmup``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib
import inspect
import os
import pstats
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import (  # noqa: E402
    backend_cpu_s,
    log,
    machine_info,
    make_tenant,
    now_iso,
    open_session,
    setup_django,
    summarise,
    table,
    write_result,
)

DB = "memdesk_bench_turn"

#: (module, function, stage name): the finer stages read from ``--cprofile``. A stage includes what it calls.
STAGES = [
    ("chat.sessions.messages", "store_user_message", "store"),
    ("chat.turn.prepare", "prepare_turn", "prepare"),
    ("chat.turn.prepare", "_turn_state", "prepare: session state"),
    ("memory.extraction.run", "extract_and_store", "extract"),
    ("memory.recall.pipeline", "recall", "prepare: recall"),
    ("memory.embeddings.models", "embed_one", "embedding (each)"),
    ("chat.prompt.summary", "summarize", "prepare: summary"),
    ("chat.prompt.build", "build_prompt", "prepare: prompt"),
    ("chat.turn.finish", "finish_turn", "finish"),
    ("memory.store.feedback", "apply_feedback", "feedback (batch)"),
    ("memory.store.health", "check_after_turn", "finish: health check"),
    ("memory.conversation.units", "index_messages", "index: conversation units (after done)"),
    ("memory.conversation.units", "message_units", "index: split and facts"),
]

#: The product's own stage histograms: (metric module, attribute, stage label values).
HISTOGRAMS = [
    ("chat.metrics", "TURN_STAGE", "turn stage"),
    ("memory.metrics", "RECALL_LATENCY", "recall stage"),
]


class InlineExecutor(ThreadPoolExecutor):
    """An event loop's default executor that runs each call at once on the calling thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine, as a pool thread would
            future.set_exception(exc)
        return future


def histogram_totals() -> dict[str, tuple[float, float]]:
    """``"<histogram> <stage>"`` → (sum of seconds, count) so far, from the product's own histograms."""
    out: dict[str, tuple[float, float]] = {}
    for module_name, attr, label in HISTOGRAMS:
        metric = getattr(importlib.import_module(module_name), attr, None)
        if metric is None:
            continue
        sums: dict[str, float] = {}
        counts: dict[str, float] = {}
        for family in metric.collect():
            for sample in family.samples:
                stage = sample.labels.get("stage", "")
                if sample.name.endswith("_sum"):
                    sums[stage] = sample.value
                elif sample.name.endswith("_count"):
                    counts[stage] = sample.value
        for stage, count in counts.items():
            out[f"{label}: {stage}"] = (sums.get(stage, 0.0), count)
    return out


def profiled_stages(profile: cProfile.Profile) -> list[tuple[str, int, float, float]]:
    """(stage, calls, cumulative ms per call, own ms per call) of each ``STAGES`` function the profile saw."""
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    rows = []
    for module_name, attr, name in STAGES:
        fn = getattr(importlib.import_module(module_name), attr, None)
        code = getattr(inspect.unwrap(fn), "__code__", None) if fn is not None else None
        if code is None:
            continue
        entry = stats.get((code.co_filename, code.co_firstlineno, code.co_name))
        if entry is None:
            continue
        _, calls, own, cumulative, _ = entry
        rows.append((name, calls, round(cumulative * 1000 / calls, 3), round(own * 1000 / calls, 3)))
    return rows


def main(argv: list[str] | None = None, *, execute_wrapper: Callable[..., Any] | None = None) -> None:
    """Run the profile; ``execute_wrapper`` (Django's ``connection.execute_wrapper`` protocol) sees every
    statement of the turns (``bench/load/turn_statements.py``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=6, help="turns per session")
    parser.add_argument("--warmup", type=int, default=10, help="turns left out of the figures")
    parser.add_argument("--cprofile", help="write a cProfile of the measured turns here (and print STAGES)")
    parser.add_argument("--out", default="turn_profile")
    args = parser.parse_args(argv)

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # units of work run inline on the loop's thread
    os.environ.setdefault("DB_POOL_MAX_SIZE", "4")  # one backend for the whole run, as the server's pool does
    setup_django(DB, fresh=True)
    from django.conf import settings
    from django.db.backends.signals import connection_created

    from chat.llm import OllamaChat
    from chat.turn.run import run_turn
    from testkit.fake_ollama import FakeOllama, Reply

    tenant = make_tenant(f"turn-{random.randrange(10**8)}").tenant
    sessions = [open_session(tenant, f"user-{n}") for n in range(args.sessions)]
    profiler = cProfile.Profile() if args.cprofile else None
    turn_wall: list[float] = []
    turn_cpu: list[float] = []
    db_cpu: list[float] = []
    hist_start: dict[str, tuple[float, float]] = {}

    async def run_all(llm: OllamaChat) -> None:
        asyncio.get_running_loop().set_default_executor(InlineExecutor(max_workers=1))
        done = 0
        for turn in range(args.turns):
            for n, session in enumerate(sessions):
                text = f"我的订单号是 CODE{n:04d}X，第{turn}轮" if turn == 0 else f"帮我查一下订单进度（第{turn}轮）"
                record = done >= args.warmup
                if done == args.warmup:
                    hist_start.update(histogram_totals())
                db_before = backend_cpu_s() if record else 0.0
                if record and profiler is not None:
                    profiler.enable()
                wall, cpu = time.perf_counter(), time.process_time()
                await run_turn(tenant, session, text, f"{n}-{turn}", llm=llm)
                wall, cpu = (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000
                if record and profiler is not None:
                    profiler.disable()
                if record:
                    turn_wall.append(wall)
                    turn_cpu.append(cpu)
                    db_cpu.append((backend_cpu_s() - db_before) * 1000)
                done += 1

    if execute_wrapper is not None:
        # Django keeps a connection per context and the turn's units of work run in copies of the context, so
        # the wrapper goes on each connection as it is made (Django's own signal), not on this one alone.
        def add_wrapper(sender: Any, connection: Any, **kwargs: Any) -> None:
            if execute_wrapper not in connection.execute_wrappers:
                connection.execute_wrappers.append(execute_wrapper)

        connection_created.connect(add_wrapper, weak=False)
    with FakeOllama(default_reply=Reply(deltas=["好的，", "已为您", "查询，", "订单", "正在", "配送中。"])) as fake:
        settings.OLLAMA_HOST = fake.host
        asyncio.run(run_all(OllamaChat(fake.host, settings.OLLAMA_MODEL, timeout_s=30)))

    rows = [("turn (wall)", *_row(turn_wall)), ("turn (process CPU)", *_row(turn_cpu)),
            ("turn (PostgreSQL CPU)", *_row(db_cpu))]  # fmt: skip
    print(table(["per turn", "n", "mean ms", "p50 ms", "p95 ms"], rows))
    stage_means: dict[str, dict[str, float]] = {}
    for name, (total_s, count) in sorted(histogram_totals().items()):
        before_s, before_n = hist_start.get(name, (0.0, 0.0))
        if count > before_n:
            stage_means[name] = {
                "n": count - before_n,
                "mean_ms": round((total_s - before_s) * 1000 / (count - before_n), 3),
            }
    print()
    print(table(["stage (the product's histograms)", "n", "mean ms"],
                [(name, int(v["n"]), v["mean_ms"]) for name, v in stage_means.items()]))  # fmt: skip
    profiled: list[tuple[str, int, float, float]] = []
    if profiler is not None:
        profiler.dump_stats(args.cprofile)
        log(f"cProfile written to {args.cprofile}")
        profiled = profiled_stages(profiler)
        print()
        print(table(["stage (under cProfile)", "calls", "cumulative ms/call", "own ms/call"], profiled))
    payload = {
        "when": now_iso(),
        "machine": machine_info(),
        "args": vars(args),
        "turn_wall_ms": summarise(turn_wall),
        "turn_cpu_ms": summarise(turn_cpu),
        "db_cpu_ms": summarise(db_cpu),
        "stages_from_histograms": stage_means,
        "stages_under_cprofile": {
            name: {"calls": c, "cumulative_ms": cum, "own_ms": own} for name, c, cum, own in profiled
        },
    }
    log(f"written to {write_result(args.out, payload)}")


def _row(values: list[float]) -> tuple[int, float, float, float]:
    s = summarise(values)
    return s.get("n", 0), s.get("mean", 0.0), s.get("p50", 0.0), s.get("p95", 0.0)


if __name__ == "__main__":
    main()
