"""Where one chat turn's time goes: sequential turns in-process against the
fake Ollama, timed per stage (wall and CPU of the thread that runs it), plus
the PostgreSQL backend's CPU per turn — the figures behind the chat-load
target (bench/RESULTS.md § Chat load).

    nice -n 5 .venv/bin/python bench/turn_profile.py --sessions 20 --turns 6
    nice -n 5 .venv/bin/python bench/turn_profile.py --cprofile bench/out/turn.prof

The turn runs exactly as in the server (``chat.services.run_turn``), except
that each unit of work runs inline on the main thread instead of a pool
thread, so one profiler sees all of it. The messages are chat_load's: an
order number first, then questions about it; the tenant is Chinese (its
default embedding model). The first turns warm the caches and the models and
are left out of the figures (``--warmup``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import os
import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import log, machine_info, now_iso, setup_django, summarise, table, write_result  # noqa: E402

DB = "memdesk_bench_turn"

#: (module, attribute, stage name): what is timed. A stage's figure includes the stages it calls.
STAGES = [
    ("chat.services", "store_user_message", "store"),
    ("chat.services", "prepare_turn", "prepare"),
    ("chat.services", "_turn_state", "prepare: session state"),
    ("memory.extraction", "extract_and_store", "extract"),
    ("memory.recall", "recall", "prepare: recall"),
    ("memory.embeddings", "embed_one", "embedding (each)"),
    ("chat.summary", "summarize", "prepare: summary"),
    ("chat.prompt", "build_prompt", "prepare: prompt"),
    ("chat.services", "finish_turn", "finish"),
    ("memory.services", "apply_feedback", "feedback (batch)"),
    ("memory.health", "check_after_turn", "finish: health check"),
    ("chat.services", "index_messages", "index: conversation units (after done)"),
    ("memory.conversation", "message_units", "index: split and facts"),
]


class Stages:
    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = defaultdict(list)
        self.cpu: dict[str, list[float]] = defaultdict(list)
        self.recording = False

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stage = name
            if name == "extract":  # the user's message in prepare, the agent's reply in finish
                message = args[2] if len(args) > 2 else kwargs.get("message")
                stage = f"extract: {getattr(message, 'role', '?')} message"
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                if self.recording:
                    self.wall[stage].append((time.perf_counter() - wall) * 1000)
                    self.cpu[stage].append((time.thread_time() - cpu) * 1000)

        return timed


def install(stages: Stages) -> None:
    import importlib

    import chat.services

    for module_name, attr, name in STAGES:
        module = importlib.import_module(module_name)
        if hasattr(module, attr):
            setattr(module, attr, stages.wrap(name, getattr(module, attr)))

    def inline(fn: Callable[..., Any]) -> Callable[..., Any]:
        async def run(*args: Any, **kwargs: Any) -> Any:
            from django.db import close_old_connections

            try:
                return fn(*args, **kwargs)
            finally:
                close_old_connections()

        return run

    chat.services.unit_of_work = inline


def backend_cpu_s() -> float:
    """CPU seconds so far of this process's PostgreSQL backend."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=6, help="turns per session")
    parser.add_argument("--warmup", type=int, default=10, help="turns left out of the figures")
    parser.add_argument("--cprofile", help="write a cProfile of the measured turns here")
    parser.add_argument("--out", default="turn_profile")
    args = parser.parse_args()

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # units of work run inline on the loop's thread
    os.environ.setdefault("DB_POOL_MAX_SIZE", "4")  # one backend for the whole run, as the server's pool does
    setup_django(DB, fresh=True)
    from django.conf import settings

    from chat.llm import OllamaChat
    from chat.services import run_turn
    from chat.sessions import do_open_session
    from tenants.rls import tenant_scope
    from tenants.services import do_create_tenant
    from tests.fake_ollama import FakeOllama, Reply

    stages = Stages()
    install(stages)
    provisioned = do_create_tenant(f"turn-{random.randrange(10**8)}", "turn profile")
    tenant = provisioned.tenant
    tenant.settings = {"rate_limits": {"per_session_per_minute": 10_000, "per_tenant_per_minute": 1_000_000}}
    tenant.save(update_fields=["settings"])
    with tenant_scope(tenant):
        sessions = [do_open_session(tenant, f"user-{n}", {}).session for n in range(args.sessions)]
    profiler = cProfile.Profile() if args.cprofile else None
    turn_wall: list[float] = []
    turn_cpu: list[float] = []
    db_cpu: list[float] = []

    async def run_all(llm: OllamaChat) -> None:
        done = 0
        for turn in range(args.turns):
            for n, session in enumerate(sessions):
                text = f"我的订单号是 CODE{n:04d}X，第{turn}轮" if turn == 0 else f"帮我查一下订单进度（第{turn}轮）"
                record = done >= args.warmup
                stages.recording = record
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

    with FakeOllama(default_reply=Reply(deltas=["好的，", "已为您", "查询，", "订单", "正在", "配送中。"])) as fake:
        settings.OLLAMA_HOST = fake.host
        asyncio.run(run_all(OllamaChat(fake.host, settings.OLLAMA_MODEL, timeout_s=30)))

    if profiler is not None:
        profiler.dump_stats(args.cprofile)
        log(f"cProfile written to {args.cprofile}")
    rows = [("turn (wall)", *_row(turn_wall)), ("turn (process CPU)", *_row(turn_cpu)),
            ("turn (PostgreSQL CPU)", *_row(db_cpu))]  # fmt: skip
    for name in sorted(stages.wall):
        rows.append((f"{name} (wall)", *_row(stages.wall[name])))
        rows.append((f"{name} (CPU)", *_row(stages.cpu[name])))
    print(table(["stage", "n", "mean ms", "p50 ms", "p95 ms"], rows))
    payload = {
        "when": now_iso(),
        "machine": machine_info(),
        "args": vars(args),
        "turn_wall_ms": summarise(turn_wall),
        "turn_cpu_ms": summarise(turn_cpu),
        "db_cpu_ms": summarise(db_cpu),
        "stages": {k: {"wall": summarise(v), "cpu": summarise(stages.cpu[k])} for k, v in stages.wall.items()},
    }
    log(f"written to {write_result(args.out, payload)}")


def _row(values: list[float]) -> tuple[int, float, float, float]:
    s = summarise(values)
    return s.get("n", 0), s.get("mean", 0.0), s.get("p50", 0.0), s.get("p95", 0.0)


if __name__ == "__main__":
    main()
