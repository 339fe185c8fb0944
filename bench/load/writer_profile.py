"""Where the background writer's time goes: the conversation memory of chat turns written as the worker writes
it (``memory.conversation.units.index_turns``, the batch ``memory.conversation.writer`` hands it), per turn, by batch
size.

    nice -n 5 .venv/bin/python bench/load/writer_profile.py --sessions 20 --turns 10 --batches 1,10
    nice -n 5 .venv/bin/python bench/load/writer_profile.py --cprofile bench/out/writer.prof

The turns run first, through ``chat.turn.run.run_turn`` with the fake Ollama answering and ``MEMORY_WRITER``
"worker" (their announcements go unheard: no worker runs), so their messages wait unwritten. Then each batch
size writes an equal share of them, in turn, timed: wall, this process's CPU and the PostgreSQL backend's CPU
per turn. Batch size 1 is what one job per turn did, without the job's own overhead. The messages are
chat_load's (an order number, then questions about it, the agent's short answer); the tenant is Chinese.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import random
import sys
import time
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

DB = "memdesk_bench_writer"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=10, help="turns per session")
    parser.add_argument("--batches", default="1,10", help="comma-separated batch sizes (turns per write)")
    parser.add_argument("--cprofile", help="write a cProfile of the writes here (largest batch size)")
    args = parser.parse_args()

    os.environ.setdefault("DB_POOL_MAX_SIZE", "4")
    setup_django(DB, fresh=True)
    from django.conf import settings

    from chat.llm import OllamaChat
    from chat.turn.run import run_turn
    from conversations.models import Message
    from memory.conversation.units import index_turns
    from tenants.rls import tenant_scope
    from testkit.fake_ollama import FakeOllama, Reply

    settings.MEMORY_WRITER = "worker"
    tenant = make_tenant(f"writer-{random.randrange(10**8)}").tenant
    sessions = [open_session(tenant, f"user-{n}") for n in range(args.sessions)]

    async def talk(llm: OllamaChat) -> None:
        for turn in range(args.turns):
            for n, session in enumerate(sessions):
                text = f"我的订单号是 CODE{n:04d}X，第{turn}轮" if turn == 0 else f"帮我查一下订单进度（第{turn}轮）"
                await run_turn(tenant, session, text, f"{n}-{turn}", llm=llm)

    log(f"{args.sessions * args.turns} turns through run_turn …")
    with FakeOllama(default_reply=Reply(deltas=["好的，", "已为您", "查询，", "订单", "正在", "配送中。"])) as fake:
        settings.OLLAMA_HOST = fake.host
        asyncio.run(talk(OllamaChat(fake.host, settings.OLLAMA_MODEL, timeout_s=30)))

    with tenant_scope(tenant):
        rows = list(
            Message.objects.for_tenant(tenant)
            .filter(memory_indexed_at__isnull=True, role__in=["user", "assistant"])
            .order_by("created_at", "seq")
            .values_list("session_id", "id", "reply_to_id")
        )
    # the turns in the order they happened: a user message and its reply
    turns: list[tuple[Any, list[Any]]] = []
    by_user: dict[Any, int] = {}
    for session_id, message_id, reply_to in rows:
        if reply_to is None:
            by_user[message_id] = len(turns)
            turns.append((session_id, [message_id]))
        elif reply_to in by_user:
            turns[by_user[reply_to]][1].append(message_id)
    sizes = [int(x) for x in args.batches.split(",")]
    share = len(turns) // len(sizes)
    profiler = cProfile.Profile() if args.cprofile else None
    results = []
    # alternate the sizes over the shares so a drift of the machine's speed hits each alike
    queues = {size: turns[i * share : (i + 1) * share] for i, size in enumerate(sizes)}
    timings: dict[int, dict[str, list[float]]] = {s: {"wall": [], "cpu": [], "db": []} for s in sizes}
    written = dict.fromkeys(sizes, 0)
    while any(queues.values()):
        for size in sizes:
            batch, queues[size] = queues[size][:size], queues[size][size:]
            if not batch:
                continue
            if profiler is not None and size == max(sizes):
                profiler.enable()
            db, wall, cpu = backend_cpu_s(), time.perf_counter(), time.process_time()
            written[size] += index_turns(tenant, batch)
            wall, cpu, db = time.perf_counter() - wall, time.process_time() - cpu, backend_cpu_s() - db
            if profiler is not None and size == max(sizes):
                profiler.disable()
            for key, value in (("wall", wall), ("cpu", cpu), ("db", db)):
                timings[size][key].append(value * 1000 / len(batch))
    for size in sizes:
        figures = {key: summarise(values) for key, values in timings[size].items()}
        results.append({"batch_turns": size, "turns": share, "messages_written": written[size], **figures})
    print(table(
        ["turns a batch", "turns", "messages written", "wall ms/turn (mean)", "Python CPU ms/turn (mean)",
         "PostgreSQL CPU ms/turn (mean)"],
        [[r["batch_turns"], r["turns"], r["messages_written"], r["wall"].get("mean"), r["cpu"].get("mean"),
          r["db"].get("mean")] for r in results],
    ))  # fmt: skip
    if profiler is not None:
        profiler.dump_stats(args.cprofile)
        pstats.Stats(args.cprofile).sort_stats("cumulative").print_stats(40)
    write_result("writer_profile", {
        "benchmark": "writer_profile", "date": now_iso(), "machine": machine_info(), "command": " ".join(sys.argv),
        "results": results,
    })  # fmt: skip


if __name__ == "__main__":
    main()
