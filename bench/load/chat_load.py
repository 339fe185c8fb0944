"""Chat load: N concurrent WebSocket sessions against a fake Ollama that streams
instantly, so a turn's time is memdesk's own platform overhead (store,
extract, recall, prompt, persist, relay) — plus the seed's comparison (S20):
prompt tokens of our two-channel prompt vs the raw history at turns 10/30/50
of a 50-turn dialogue.

    nice -n 5 .venv/bin/python bench/load/chat_load.py --sessions 10,100,300 --mode paced --workers 4

Two ways to load the server, both reported:

- **paced** (the target's figure): each session sends its next message a
  think time after the previous reply is done — what customers do. The think
  time is exponential with mean ``--think-s`` (default 15 s, the middle of
  the 10–30 s a customer takes to read a reply and type the next message),
  seeded per session; memoryless gaps make the sessions' messages together a
  Poisson stream, the standard open-workload model, and burstier than real
  typists (a few gaps are under a second), so the figure errs pessimistic.
  Each session starts after one think time, so arrivals do not bunch at t=0,
  and keeps going for ``--duration-s``: a message due after that is not
  sent, one sent before it is answered and counted. Offered rate =
  sessions / think time; achieved = turns / duration.
- **closed** (throughput/saturation): every session sends its next message
  the moment the previous reply is done, so the server is always saturated
  and turn times are mostly queueing; turns/s is the capacity.

With the background worker (``--memory-writer worker``, the product's default), each measured run
starts once the worker has written what the warm-up and earlier runs left (``drain_memory_jobs``;
the seconds it took are ``memory_backlog_drained_s``): the run carries the worker's load for its own turns.
What the worker still has to write when the run ends takes ``memory_caught_up_s``; ``sustained_turns_per_s``
is the turns over the run and that catch-up together.

memdesk runs as a real server (uvicorn, ``--workers`` processes, each with a
psycopg connection pool (``--db-pool``, default the product's); with more than one worker the channel
layer is Redis at ``--redis-url``; WebSocket compression off, as the image
runs it, unless ``--ws-deflate``) on its own benchmark database; clients are
asyncio WebSocket clients in this process; the fake Ollama is a real HTTP
server in a process of its own, as Ollama is (``bench/fake_process.py``;
``--fake-in-process`` runs it in this process: its threads then share a GIL
with the clients that time the turns, which delays their measurement).
Server CPU per turn is the CPU time of the uvicorn processes and of the
PostgreSQL backends connected to the benchmark database during the run,
divided by its turns.

Each run also reports **the server's own view** of its turns
(``server_turn_ms``): what ``memdesk_turn_overhead_seconds`` and
``memdesk_turn_stage_seconds`` recorded between a scrape of ``/metrics`` before
and after it (the workers' metrics merged, as deployed with
``PROMETHEUS_MULTIPROC_DIR``): the overhead (a turn until its reply is stored,
less the model's time) and each unit of work (store, prepare, finish; waiting
for a thread and a connection included). Means are exact; p50/p95 are
interpolated within the histogram's buckets, as Prometheus does. The client's
turn time less the server's overhead is the WebSocket, the event loop and the
relay of the reply.

The machine is measured beside the code (``machine_cpu``): over the run and in
each 30 s window of a paced run, its busy, iowait and steal shares
(``/proc/stat``) and, per window, the server's CPU per turn. The same turns
cost the same CPU, so a window where they cost more is the machine slowing
down (these virtual machines drift by a third within minutes; bench/RESULTS.md),
not memdesk.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import (  # noqa: E402
    REPO_ROOT,
    child_pids,
    cpu_shares,
    cpu_ticks,
    log,
    machine_info,
    now_iso,
    pid_cpu_s,
    setup_django,
    summarise,
    table,
    tree_cpu_s,
    write_result,
)
from bench.common import make_tenant as common_make_tenant  # noqa: E402

DB = "memdesk_bench_chat"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/13"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    ollama_host: str,
    *,
    workers: int = 1,
    db_pool: int | None = None,
    redis_url: str | None = None,
    ws_deflate: bool = False,
    memory_writer: str = "worker",
) -> tuple[subprocess.Popen, str]:
    """memdesk as deployed: uvicorn and, unless ``memory_writer`` is "inline", the background worker (with
    "worker", the product's default, it writes each turn's conversation memory; with "off" nobody does: the
    build without conversation memory, for an A/B of its cost). The worker runs as a child of the
    uvicorn process, so the server's CPU (``server_cpu_s``) counts it."""
    port = _free_port()
    env = {
        **os.environ,
        "MEMDESK_DB_NAME": DB,
        "OLLAMA_HOST": ollama_host,
        "OLLAMA_TIMEOUT_S": "30",
        "LOG_LEVEL": "WARNING",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "MEMDESK_MEMORY_WRITER": memory_writer,
    }
    # Every worker's metrics in one /metrics (prometheus_client's multiprocess mode, as deployed), for the
    # server's own view of each turn (turn_histograms); a fresh directory per server.
    env["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="memdesk-bench-metrics-")
    if db_pool is not None:
        env["DB_POOL_MAX_SIZE"] = str(db_pool)
    else:
        env.pop("DB_POOL_MAX_SIZE", None)  # the product's default
    if redis_url:
        env["REDIS_URL"] = redis_url
    elif workers > 1:
        raise SystemExit("more than one worker needs --redis-url (the channel layer must span the processes)")
    else:
        env.pop("REDIS_URL", None)
    command = [sys.executable, "-m", "uvicorn", "config.asgi:application", "--host", "127.0.0.1",
               "--port", str(port), "--log-level", "warning", "--no-access-log"]  # fmt: skip
    if workers > 1:
        command += ["--workers", str(workers)]
    command += ["--ws-per-message-deflate", "true" if ws_deflate else "false"]
    if memory_writer != "inline":
        worker = shlex.join([sys.executable, "manage.py", "run_worker", "--poll", "1"])
        command = ["sh", "-c", f"{worker} >/dev/null & exec {shlex.join(command)}"]
    # A session of its own, so stop_server can end the workers with it.
    proc = subprocess.Popen(command, cwd=REPO_ROOT, env=env, start_new_session=True)
    proc.metrics_dir = env["PROMETHEUS_MULTIPROC_DIR"]  # type: ignore[attr-defined]  # stop_server removes it
    base = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("memdesk did not start")


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM, and after 30 s SIGKILL, for the server's whole process group
    (uvicorn's workers and the background worker included)."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        log("memdesk did not stop within 30 s; killing its process group")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    shutil.rmtree(getattr(proc, "metrics_dir", ""), ignore_errors=True)


def post_imports(base: str, conversations: int) -> float:
    """Import ``conversations`` past conversations (the Chinese set's sessions, ``bench/load/import_rate.py``) for a
    tenant of their own over HTTP, as a tenant's migration script would, just before a run: the worker beside the
    server turns them into memory while the run's live turns are measured. Returns the seconds the posting took."""
    import httpx

    from bench.load.import_rate import past_conversation

    key = make_tenant()
    started = time.monotonic()
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        for i in range(conversations):
            response = client.post(f"/api/v1/end-users/importer-{i % 40}/conversations", json=past_conversation(i))
            if response.status_code != 202:
                raise SystemExit(f"import {i}: {response.status_code} {response.text[:300]}")
    return round(time.monotonic() - started, 2)


def make_tenant() -> str:
    """A fresh tenant's API key: the load is one tenant's, with its per-minute limits lifted."""
    return common_make_tenant(f"load-{random.randrange(10**8)}").api_key


# --- the server's own view of its turns ---------------------------------------------------------------------

#: name → (metric, ``stage`` label): the turn histograms memdesk exports (memory/metrics.py).
TURN_HISTOGRAMS = {
    "overhead": ("memdesk_turn_overhead_seconds", None),
    "store": ("memdesk_turn_stage_seconds", "store"),
    "prepare": ("memdesk_turn_stage_seconds", "prepare"),
    "finish": ("memdesk_turn_stage_seconds", "finish"),
}


def turn_histograms(base: str) -> dict[str, dict[str, Any]]:
    """The server's turn histograms from its /metrics (every worker's, merged): for each of
    ``TURN_HISTOGRAMS``, the cumulative bucket counts by upper bound, the count and the sum."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    found: dict[str, dict[str, Any]] = {name: {"buckets": {}, "count": 0.0, "sum": 0.0} for name in TURN_HISTOGRAMS}
    for family in text_string_to_metric_families(httpx.get(base + "/metrics", timeout=60).text):
        for sample in family.samples:
            for name, (metric, stage) in TURN_HISTOGRAMS.items():
                suffix = sample.name.removeprefix(metric)
                if suffix == sample.name or (stage and sample.labels.get("stage") != stage):
                    continue
                if suffix == "_bucket":
                    found[name]["buckets"][float(sample.labels["le"])] = sample.value
                elif suffix in ("_count", "_sum"):
                    found[name][suffix[1:]] = sample.value
    return found


def histogram_summary(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """n, exact mean and p50/p95 (ms) of what a histogram recorded between two scrapes; the quantiles are
    interpolated within buckets as PromQL's ``histogram_quantile`` does, so they are only as fine as the
    buckets (chat.metrics.TURN_BUCKETS: 10 ms steps around the 50 ms target)."""
    n = after["count"] - before["count"]
    if n <= 0:
        return {"n": 0}
    bounds = sorted(after["buckets"])
    counts = [after["buckets"][b] - before["buckets"].get(b, 0.0) for b in bounds]

    def quantile(q: float) -> float | None:
        rank, lower, below = q * n, 0.0, 0.0
        for bound, count in zip(bounds, counts, strict=True):
            if count >= rank:
                if bound == float("inf"):
                    return round(lower * 1000, 1)
                return round((lower + (bound - lower) * (rank - below) / max(count - below, 1e-9)) * 1000, 1)
            lower, below = bound, count
        return None

    mean = (after["sum"] - before["sum"]) / n * 1000
    return {"n": int(n), "mean": round(mean, 1), "p50": quantile(0.5), "p95": quantile(0.95)}


# --- server CPU -------------------------------------------------------------------------------------------


def server_cpu_s(server_pid: int) -> tuple[float, float]:
    """CPU seconds so far of the uvicorn process tree, and of the PostgreSQL
    backends serving the benchmark database (other databases on the shared
    embedded server are left out)."""
    python = tree_cpu_s(server_pid)
    from django.conf import settings

    postgres = 0.0
    try:
        postmaster = int((Path(settings.EMBEDDED_PG_DIR) / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return python, postgres
    for pid in child_pids(postmaster):
        try:
            if f" {DB} " in Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " "):
                postgres += pid_cpu_s(pid)
        except OSError:
            continue
    return python, postgres


# --- clients ----------------------------------------------------------------------------------------------

# Sessions are opened by tenants' back ends over time, not in one burst: at
# most this many at once. (A burst of 100 concurrent HTTP requests takes 100
# threads and 100 database connections under ASGI — see bench/RESULTS.md.)
OPENING_AT_ONCE = 8


@dataclass(frozen=True)
class Pacing:
    """Think time between a reply and the session's next message."""

    mean_s: float
    dist: str = "exp"  # "exp" (memoryless) or "uniform" (0.5–1.5 × mean)

    def think(self, rng: random.Random) -> float:
        if self.dist == "uniform":
            return rng.uniform(0.5 * self.mean_s, 1.5 * self.mean_s)
        return rng.expovariate(1 / self.mean_s)


@dataclass
class Clock:
    """A paced run's window: ``go`` is set, and ``until`` known, once every session is connected."""

    go: asyncio.Event
    until: float = float("inf")


@dataclass
class Stats:
    turn_ms: list[float]
    first_turn_ms: list[float]  # each session's first message: it states an order number, a new memory
    later_turn_ms: list[float]
    alone_turn_ms: list[float]  # turns with no other turn in flight from send to done: overhead without contention
    ack_ms: list[float]
    ack_to_first_delta_ms: list[float]
    errors: list[dict[str, Any]]
    #: (sent at, turn ms, the session's turn number, turns in flight at its end, itself included) per turn
    timeline: list[tuple[float, float, int, int]] = field(default_factory=list)
    first_sent: float = float("inf")
    last_done: float = 0.0
    running: set[int] = field(default_factory=set)  # turns in flight
    overlapped: set[int] = field(default_factory=set)  # turns that had another in flight at some moment


async def _due_turns(turns: int, pacing: Pacing | None, rng: random.Random, clock: Clock | None) -> AsyncIterator[int]:
    """The session's turn numbers, each when it is due: at once (closed), or a think time after the previous
    reply until ``clock.until`` (paced)."""
    for turn in range(turns if pacing is None else 10**9):
        if pacing is not None:
            due = time.perf_counter() + pacing.think(rng)
            if clock is None or due >= clock.until:
                return
            await asyncio.sleep(due - time.perf_counter())
        yield turn


def _start_turn(stats: Stats, n: int, turn: int, marker: str) -> tuple[str, float, int]:
    """The turn's text, its send time and its id, counted as in flight."""
    text = f"我的订单号是 {marker}，第{turn}轮" if turn == 0 else f"帮我查一下订单进度（第{turn}轮）"
    sent = time.perf_counter()
    stats.first_sent = min(stats.first_sent, sent)
    turn_id = n * 1_000_000 + turn
    stats.running.add(turn_id)
    if len(stats.running) > 1:
        stats.overlapped.update(stats.running)
    return text, sent, turn_id


def _record_done(stats: Stats, turn: int, turn_id: int, sent: float, now: float, in_flight: int) -> None:
    ms = (now - sent) * 1000
    stats.turn_ms.append(ms)
    stats.timeline.append((sent, ms, turn, in_flight))
    (stats.first_turn_ms if turn == 0 else stats.later_turn_ms).append(ms)
    if turn_id not in stats.overlapped:
        stats.alone_turn_ms.append(ms)
    stats.last_done = max(stats.last_done, now)


async def one_session(
    base: str, key: str, n: int, turns: int, stats: Stats, opening: asyncio.Semaphore,
    pacing: Pacing | None = None, seed: int = 0, ready: asyncio.Barrier | None = None,
    clock: Clock | None = None, transport: str = "ws",
) -> None:  # fmt: skip
    """One customer: opens a session, connects, and sends ``turns`` messages
    (closed) or a message each think time until ``clock.until`` (paced; every
    session waits at ``ready`` and for ``clock.go`` first, so the clock starts
    with all of them connected). ``transport="rest"``: each message is a
    ``POST /api/v1/sessions/<id>/messages`` (a tenant's back end relaying its
    customers), timed to the response; there is no ack or delta to time."""
    import httpx
    import websockets

    rng = random.Random(seed * 1_000_003 + n)
    arrived = False

    async def arrive() -> None:
        nonlocal arrived
        if ready is not None and not arrived:
            arrived = True
            await ready.wait()

    async with opening, httpx.AsyncClient(base_url=base, timeout=60) as http:
        response = await http.post(
            "/api/v1/sessions", json={"end_user_id": f"user-{n}"}, headers={"Authorization": f"Bearer {key}"}
        )
    if response.status_code != 201:
        stats.errors.append({"code": f"http_{response.status_code}", "message": response.text[:200]})
        await arrive()
        return
    opened = response.json()
    marker = f"CODE{n:04d}X"
    if transport == "rest":
        await _rest_session(base, key, n, turns, stats, opened["session_id"], marker, pacing, rng, arrive, clock)
        return
    url = base.replace("http", "ws") + f"/ws/chat/?session_id={opened['session_id']}&token={opened['token']}"
    try:
        async with websockets.connect(url, open_timeout=60, max_size=2**22) as ws:
            await arrive()
            if clock is not None:
                await clock.go.wait()
            async for turn in _due_turns(turns, pacing, rng, clock):
                text, sent, turn_id = _start_turn(stats, n, turn, marker)
                await ws.send(json.dumps({"type": "message", "text": text, "client_msg_id": f"{n}-{turn}"}))
                ack_at = first_delta = None
                while True:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), timeout=120))
                    now = time.perf_counter()
                    if frame["type"] == "ack":
                        ack_at = now
                    elif frame["type"] == "delta" and first_delta is None:
                        first_delta = now
                    elif frame["type"] == "done":
                        _record_done(stats, turn, turn_id, sent, now, len(stats.running))
                        stats.ack_ms.append((ack_at - sent) * 1000)
                        stats.ack_to_first_delta_ms.append((first_delta - ack_at) * 1000)
                        break
                    elif frame["type"] == "error":
                        stats.errors.append(frame)
                        break
                stats.running.discard(turn_id)
    except Exception as exc:  # noqa: BLE001 - a load test counts every failure
        stats.errors.append({"code": type(exc).__name__, "message": str(exc)[:200]})
    await arrive()


async def _rest_session(
    base: str, key: str, n: int, turns: int, stats: Stats, session_id: str, marker: str,
    pacing: Pacing | None, rng: random.Random, arrive: Any, clock: Clock | None,
) -> None:  # fmt: skip
    import httpx

    headers = {"Authorization": f"Bearer {key}"}
    try:
        async with httpx.AsyncClient(base_url=base, timeout=120, headers=headers) as http:
            await arrive()
            if clock is not None:
                await clock.go.wait()
            async for turn in _due_turns(turns, pacing, rng, clock):
                text, sent, turn_id = _start_turn(stats, n, turn, marker)
                response = await http.post(
                    f"/api/v1/sessions/{session_id}/messages", json={"text": text, "client_msg_id": f"{n}-{turn}"}
                )
                now = time.perf_counter()
                stats.running.discard(turn_id)
                if response.status_code != 200:
                    stats.errors.append({"code": f"http_{response.status_code}", "message": response.text[:200]})
                    continue
                _record_done(stats, turn, turn_id, sent, now, len(stats.running) + 1)
    except Exception as exc:  # noqa: BLE001 - a load test counts every failure
        stats.errors.append({"code": type(exc).__name__, "message": str(exc)[:200]})
    await arrive()


def _by_window(
    timeline: list[tuple[float, float, int, int]], started: float, width_s: int
) -> list[tuple[int, list[float]]]:
    """The turns' times grouped by when they were sent: (window start in s, turn ms)."""
    windows: dict[int, list[float]] = {}
    for at, ms, _turn, _in_flight in timeline:
        windows.setdefault(max(0, int((at - started) // width_s) * width_s), []).append(ms)
    return sorted(windows.items())


#: Seconds between the machine samples of a paced run (and the width of its ``turn_ms_by_30s`` windows).
WINDOW_S = 30


async def machine_sample(server_pid: int | None) -> tuple[float, Any, Any]:
    """(time, server CPU seconds (Python, PostgreSQL) or None, the machine's ``cpu_ticks()``)."""
    cpu = await asyncio.to_thread(server_cpu_s, server_pid) if server_pid else None
    return time.perf_counter(), cpu, cpu_ticks()


async def sample_machine(server_pid: int | None, every_s: int, samples: list[tuple[float, Any, Any]]) -> None:
    """Append a ``machine_sample`` to ``samples`` every ``every_s`` seconds until cancelled: the same work
    costing more CPU in one window than in another means the machine itself was slower then (these virtual
    machines drift by a third within minutes)."""
    while True:
        samples.append(await machine_sample(server_pid))
        await asyncio.sleep(every_s)


def _window_machine(
    samples: list[tuple[float, Any, Any]], started: float, timeline: list[tuple[float, float, int, int]]
) -> dict[int, dict[str, Any]]:
    """Per window (start in s, as ``_by_window``): the server's CPU per turn done in it and the machine's
    shares (``cpu_shares``), from consecutive ``sample_machine`` samples."""
    out: dict[int, dict[str, Any]] = {}
    for (t0, cpu0, ticks0), (t1, cpu1, ticks1) in zip(samples, samples[1:], strict=False):
        lo = max(0, int(round((t0 - started) / WINDOW_S)) * WINDOW_S)
        done = sum(1 for at, ms, _turn, _in in timeline if t0 <= at + ms / 1000 < t1)
        entry: dict[str, Any] = {"machine_cpu": cpu_shares(ticks0, ticks1)}
        if cpu0 is not None and cpu1 is not None and done:
            entry["server_cpu_ms_per_turn"] = round((sum(cpu1) - sum(cpu0)) * 1000 / done, 1)
        out[lo] = entry
    return out


#: At most this long for the background worker to write what earlier turns queued before a measured run.
DRAIN_TIMEOUT_S = 300.0


def drain_memory_jobs(timeout_s: float = DRAIN_TIMEOUT_S) -> float:
    """Wait until the background worker has written the conversation memory of every chat message so far (the
    warm-up's, a previous run's): a measured run then carries the worker's load for its own turns only, not a
    backlog it inherited. Returns the seconds waited. Counted as the superuser: row-level security would show
    the benchmark's connection, which has no tenant scope, nothing."""
    from bench.common import _superuser_conn

    started = time.monotonic()
    with _superuser_conn(DB) as conn:
        while True:
            (waiting,) = conn.execute(
                "SELECT count(*) FROM chat_message WHERE memory_indexed_at IS NULL"
                " AND role IN ('user', 'assistant') AND status <> 'failed'"
            ).fetchone()
            waited = time.monotonic() - started
            if not waiting:
                return round(waited, 1)
            if waited > timeout_s:
                raise SystemExit(f"the worker left {waiting} chat message(s) unwritten after {timeout_s:g} s")
            time.sleep(0.5)


def clear_requests(fake: Any) -> None:
    """Forget the requests the fake recorded (in-process fake or FakeOllamaProcess)."""
    if hasattr(fake, "clear_requests"):
        fake.clear_requests()
    else:
        fake.requests.clear()


def leaks(chat_requests: list[dict[str, Any]]) -> int:
    """Prompts that mention another session's order code."""
    count = 0
    for body in chat_requests:
        text = " ".join(m.get("content", "") for m in body.get("messages", []))
        if len(set(re.findall(r"CODE\d{4}X", text))) > 1:
            count += 1
    return count


async def load(
    base: str, key: str, sessions: int, turns: int, *, pacing: Pacing | None = None, seed: int = 0,
    server_pid: int | None = None, duration_s: float = 60.0, fake_pid: int | None = None, transport: str = "ws",
    opening_at_once: int = OPENING_AT_ONCE,
) -> dict[str, Any]:  # fmt: skip
    """One run. Closed: ``turns`` back-to-back turns per session, timed from
    the first message to the last reply (CPU includes opening the sessions).
    Paced: sessions open and connect first, then send for ``duration_s``;
    CPU is counted from that moment."""
    stats = Stats([], [], [], [], [], [], [])
    opening = asyncio.Semaphore(opening_at_once)
    ready = asyncio.Barrier(sessions + 1) if pacing else None
    clock = Clock(asyncio.Event()) if pacing else None
    tasks = [
        asyncio.create_task(one_session(base, key, n, turns, stats, opening, pacing, seed, ready, clock, transport))
        for n in range(sessions)
    ]
    if ready is not None:
        await ready.wait()  # every session connected
    histograms_before = turn_histograms(base) if server_pid else None
    load_before = os.getloadavg()[0]
    machine_before = cpu_ticks()
    client_cpu_before = time.process_time()  # this process: the clients (and the fake Ollama when in-process)
    fake_cpu_before = pid_cpu_s(fake_pid) if fake_pid else 0.0
    cpu_before = server_cpu_s(server_pid) if server_pid else (0.0, 0.0)
    started = time.perf_counter()
    if clock is not None:
        clock.until = started + duration_s
        clock.go.set()
    samples: list[tuple[float, Any, Any]] = []
    sampler = asyncio.create_task(sample_machine(server_pid, WINDOW_S, samples)) if pacing else None
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    if sampler is not None:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
        samples.append(await machine_sample(server_pid))
    per_window = _window_machine(samples, started, stats.timeline)
    machine_cpu = cpu_shares(machine_before, cpu_ticks())
    cpu_after = server_cpu_s(server_pid) if server_pid else None
    client_cpu = time.process_time() - client_cpu_before
    fake_cpu = pid_cpu_s(fake_pid) - fake_cpu_before if fake_pid else None
    python_cpu = cpu_after[0] - cpu_before[0] if cpu_after else None
    postgres_cpu = cpu_after[1] - cpu_before[1] if cpu_after else None
    cpu = python_cpu + postgres_cpu if cpu_after else None
    histograms_after = turn_histograms(base) if histograms_before is not None else None
    done = len(stats.turn_ms)
    window = duration_s if pacing else (stats.last_done - stats.first_sent if done else elapsed)
    return {
        "mode": "paced" if pacing else "closed",
        "transport": transport,
        "sessions": sessions,
        "turns_per_session": None if pacing else turns,
        "duration_s": duration_s if pacing else None,
        "think_s": pacing.mean_s if pacing else None,
        "think_dist": pacing.dist if pacing else None,
        "offered_turns_per_s": round(sessions / pacing.mean_s, 2) if pacing else None,
        "turns": done,
        "turns_per_s": round(done / window, 2) if window > 0 else None,
        "elapsed_s": round(elapsed, 1),
        "server_cpu_ms_per_turn": round(cpu * 1000 / done, 1) if cpu is not None and done else None,
        "client_cpu_ms_per_turn": round(client_cpu * 1000 / done, 1) if done else None,
        "fake_ollama_cpu_ms_per_turn": round(fake_cpu * 1000 / done, 1) if fake_cpu is not None and done else None,
        "server_python_cpu_ms_per_turn": round(python_cpu * 1000 / done, 1)
        if python_cpu is not None and done
        else None,
        "server_postgres_cpu_ms_per_turn": (
            round(postgres_cpu * 1000 / done, 1) if postgres_cpu is not None and done else None
        ),
        "loadavg_before": round(load_before, 2),
        "loadavg_after": round(os.getloadavg()[0], 2),
        "machine_cpu": machine_cpu,
        "errors": len(stats.errors),
        "error_samples": stats.errors[:3],
        "turn_ms": summarise(stats.turn_ms),
        "first_turn_ms": summarise(stats.first_turn_ms),
        "later_turn_ms": summarise(stats.later_turn_ms),
        "alone_turn_ms": summarise(stats.alone_turn_ms),
        # The same turns as the server timed them (memdesk_turn_*): its overhead (the turn until the reply is
        # stored, less the model's time) and each unit of work, waiting for a thread and connection included.
        "server_turn_ms": {
            name: histogram_summary(histograms_before[name], histograms_after[name]) for name in TURN_HISTOGRAMS
        }
        if histograms_before is not None and histograms_after is not None
        else None,
        "ack_ms": summarise(stats.ack_ms),
        "ack_to_first_delta_ms": summarise(stats.ack_to_first_delta_ms),
        # p50/p95 of the turns sent in each 30 s of the run: a transient (a slow start, a stall) shows here;
        # beside them the server's CPU per turn done in the window and the machine's busy/steal shares (paced
        # runs): the same turns costing more CPU is the machine slowing down, not memdesk.
        "turn_ms_by_30s": [
            {
                "from_s": lo,
                **{k: v for k, v in summarise(ms).items() if k in ("n", "p50", "p95")},
                **per_window.get(lo, {}),
            }
            for lo, ms in _by_window(stats.timeline, started, WINDOW_S)
        ],
        # The slowest turns, to line them up with what else happened then (seconds from the start).
        "slowest_turns": [
            {"at_s": round(at - started, 2), "ms": round(ms, 1), "turn": turn, "in_flight": in_flight}
            for at, ms, turn, in_flight in sorted(stats.timeline, key=lambda t: -t[1])[:20]
        ],
    }


# --- S20 --------------------------------------------------------------------------------------------------

DIALOGUE = {
    1: "你好，我叫张伟", 5: "我的订单号是 ABC123", 10: "帮我取消这个订单吧", 20: "我换号了，新号是 13912345678",
    30: "订单的事先不说了，我要投诉快递员，他态度很差", 50: "你还记得我叫什么、订单号是多少吗？",
}  # fmt: skip
FILLER = ["好的", "嗯嗯，明白", "还有一个问题", "请稍等一下", "谢谢你", "这个我知道了", "那运费怎么算", "可以开发票吗"]


def seed_comparison(base: str, key: str, fake: Any) -> list[dict[str, Any]]:
    """S20: our prompt vs the raw history, at turns 10, 30 and 50."""
    import httpx

    from chat.prompt.tokens import count_messages

    headers = {"Authorization": f"Bearer {key}"}
    sid = httpx.post(base + "/api/v1/sessions", json={"end_user_id": "zhangwei"}, headers=headers).json()["session_id"]
    history: list[dict[str, str]] = []
    rows = []
    for turn in range(1, 51):
        text = DIALOGUE.get(turn, FILLER[turn % len(FILLER)] + f"（第{turn}轮）")
        fake.script(f"好的，已为您处理第{turn}轮的问题，请问还有什么可以帮您？")
        started = time.perf_counter()
        reply = httpx.post(f"{base}/api/v1/sessions/{sid}/messages", json={"text": text}, headers=headers, timeout=60)
        elapsed_ms = (time.perf_counter() - started) * 1000
        body = reply.json()
        ours = fake.chat_requests[-1]["messages"]
        raw = [ours[0]] + history + [{"role": "user", "content": text}]  # same system role, all turns verbatim
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": body["reply"]}]
        if turn in (10, 30, 50):
            ours_tokens, raw_tokens = count_messages(ours), count_messages(raw)
            rows.append({
                "turn": turn, "our_prompt_tokens": ours_tokens, "raw_history_tokens": raw_tokens,
                "ratio": round(ours_tokens / raw_tokens, 3), "platform_ms": round(elapsed_ms, 1),
                "usage_prompt_tokens": body["usage"]["prompt_tokens"],
            })  # fmt: skip
    return rows


# --- main -------------------------------------------------------------------------------------------------


def _fmt(value: Any) -> Any:
    return "—" if value is None else value


_REPLY = ["好的，", "已为您", "查询，", "订单", "正在", "配送中。"]


def _reply_deltas(n: int) -> list[str]:
    """The fake's reply as ``n`` deltas: the six-piece reply of earlier runs, or that text cycled."""
    if n < 1:
        raise SystemExit("--reply-deltas must be at least 1")
    return [_REPLY[i % len(_REPLY)] for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", default="10,100", help="comma-separated concurrent session counts")
    parser.add_argument("--turns", type=int, default=3, help="turns per session of a closed run")
    parser.add_argument("--duration-s", type=float, default=90.0, help="length of a paced run")
    parser.add_argument("--mode", choices=["paced", "closed", "both"], default="both")
    parser.add_argument("--think-s", type=float, default=15.0, help="mean think time of the paced mode")
    parser.add_argument("--think-dist", choices=["exp", "uniform"], default="exp")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--memory-writer", choices=["worker", "inline", "off"], default="worker",
        help="who writes each turn's conversation memory (MEMDESK_MEMORY_WRITER; off: nobody, for an A/B of its cost); "
        "run_worker runs beside the server unless inline",
    )  # fmt: skip
    parser.add_argument("--workers", type=int, default=4, help="uvicorn worker processes (the image runs 4)")
    parser.add_argument(
        "--db-pool", type=int, default=None, help="DB_POOL_MAX_SIZE per worker (0: no pool; default: the product's)"
    )
    parser.add_argument(
        "--redis-url", default=None, help=f"channel layer; default {DEFAULT_REDIS_URL} when --workers > 1"
    )
    parser.add_argument(
        "--ws-deflate", action="store_true",
        help="WebSocket compression on (the image turns it off: WS_PER_MESSAGE_DEFLATE)",
    )  # fmt: skip
    parser.add_argument(
        "--reply-deltas", type=int, default=6,
        help="deltas (stream chunks) per reply of the fake Ollama; Ollama sends one per token, so a real "
        "reply of a hundred tokens is a hundred deltas, each parsed and relayed by memdesk",
    )  # fmt: skip
    parser.add_argument("--no-seed-comparison", action="store_true")
    parser.add_argument(
        "--import-beside", type=int, default=0,
        help="N > 0: each run twice, alternating, without and with N past conversations imported just before it "
        "(a tenant of their own; the worker indexes them during the run), for the live-turn p95 ratio",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=1, help="with --import-beside: pairs of runs per setting")
    parser.add_argument(
        "--transport", choices=["ws", "rest"], default="ws",
        help="ws: the chat socket, streamed; rest: POST /api/v1/sessions/<id>/messages, as a tenant's back end",
    )  # fmt: skip
    parser.add_argument(
        "--cold", action="store_true",
        help="no warm-up, and every session opens at once: a burst right after the server starts",
    )  # fmt: skip
    parser.add_argument(
        "--fake-in-process", action="store_true",
        help="run the fake Ollama in this process (its threads then share a GIL with the clients that time the "
        "turns); default: a process of its own, as Ollama is",
    )  # fmt: skip
    args = parser.parse_args()
    redis_url = args.redis_url or (DEFAULT_REDIS_URL if args.workers > 1 else None)

    setup_django(DB, fresh=True)
    from bench.fake_process import FakeOllamaProcess
    from testkit.fake_ollama import FakeOllama, Reply

    modes = ["paced", "closed"] if args.mode == "both" else [args.mode]
    counts = [int(x) for x in args.sessions.split(",")]
    config = {
        "workers": args.workers, "db_pool": args.db_pool, "channel_layer": "redis" if redis_url else "in-memory",
        "ws_deflate": args.ws_deflate, "memory_writer": args.memory_writer,
        "think_s": args.think_s, "think_dist": args.think_dist, "seed": args.seed, "turns": args.turns,
        "duration_s": args.duration_s, "reply_deltas": args.reply_deltas,
        "fake_ollama": "in-process" if args.fake_in_process else "own process",
        "transport": args.transport, "cold": args.cold,
        "command": " ".join(sys.argv),
    }  # fmt: skip
    results: dict[str, Any] = {
        "benchmark": "chat_load", "date": now_iso(), "machine": machine_info(), "config": config, "runs": [],
    }  # fmt: skip
    pacing = Pacing(args.think_s, args.think_dist)
    deltas = _reply_deltas(args.reply_deltas)
    fake_ollama = (
        FakeOllama(default_reply=Reply(deltas=deltas)) if args.fake_in_process else FakeOllamaProcess(deltas=deltas)
    )
    with fake_ollama as fake:
        server, base = start_server(
            fake.host,
            workers=args.workers,
            db_pool=args.db_pool,
            redis_url=redis_url,
            ws_deflate=args.ws_deflate,
            memory_writer=args.memory_writer,
        )
        try:
            # Warm up every worker: model loads, rjieba's dictionary, pooled connections.
            if not args.cold:
                asyncio.run(load(base, make_tenant(), 8 * args.workers, 3, transport=args.transport))
            # The database is new for every run: give the planner the statistics a running deployment's
            # tables have (autovacuum would only get to them a minute or more into the run).
            from django.db import connection

            with connection.cursor() as cursor:
                for name in connection.introspection.table_names(cursor):  # memdesk's, not the shared catalogs
                    cursor.execute(f'ANALYZE "{name}"')
            plan = [
                (mode, sessions, importing)
                for mode in modes
                for sessions in counts
                for r in range(args.rounds if args.import_beside else 1)
                # alternate which of the pair goes first, round by round
                for importing in (((False, True) if r % 2 == 0 else (True, False)) if args.import_beside else (False,))
            ]
            for mode, sessions, importing in plan:
                clear_requests(fake)
                drained = drain_memory_jobs() if args.memory_writer == "worker" else 0.0
                what = f"{args.duration_s:g} s" if mode == "paced" else f"{args.turns} turns each"
                posted_s = post_imports(base, args.import_beside) if importing else None
                log(f"{mode}: {sessions} concurrent sessions, {what} …")
                run = asyncio.run(
                    load(base, make_tenant(), sessions, args.turns, pacing=pacing if mode == "paced" else None,
                         seed=args.seed, server_pid=server.pid, duration_s=args.duration_s,
                         fake_pid=getattr(fake, "pid", None), transport=args.transport,
                         opening_at_once=sessions if args.cold else OPENING_AT_ONCE)
                )  # fmt: skip
                prompts = fake.chat_requests
                run["cross_session_leaks"] = leaks(prompts)
                run["prompts_checked_for_leaks"] = len(prompts)
                run["workers"] = args.workers
                run["memory_backlog_drained_s"] = drained
                run["import_beside"] = args.import_beside if importing else 0
                run["imports_posted_s"] = posted_s
                # What the worker still had to write when the run ended: a closed run's turns/s counts
                # only while turns were sent, so the sustained figure adds the catch-up.
                caught_up = drain_memory_jobs() if args.memory_writer == "worker" else 0.0
                run["memory_caught_up_s"] = caught_up
                run["sustained_turns_per_s"] = round(run["turns"] / (run["elapsed_s"] + caught_up), 2)
                results["runs"].append(run)
                log(f"  turn p95 {run['turn_ms'].get('p95')} ms (first turns p50/p95 "
                    f"{run['first_turn_ms'].get('p50')}/{run['first_turn_ms'].get('p95')}, later "
                    f"{run['later_turn_ms'].get('p50')}/{run['later_turn_ms'].get('p95')}, alone "
                    f"{run['alone_turn_ms'].get('n')} turns {run['alone_turn_ms'].get('p50')}/"
                    f"{run['alone_turn_ms'].get('p95')}), {run['turns_per_s']} turns/s, client CPU "
                    f"{run['client_cpu_ms_per_turn']} ms/turn, "
                    f"{run['errors']} errors, load {run['loadavg_after']}, machine CPU "
                    f"{run['machine_cpu']}")  # fmt: skip
                if run["server_turn_ms"]:
                    log("  server's view (mean / p50 / p95 ms): " + ", ".join(
                        f"{name} {f.get('mean')} / {f.get('p50')} / {f.get('p95')}"
                        for name, f in run["server_turn_ms"].items()
                    ))  # fmt: skip
            if not args.no_seed_comparison:
                clear_requests(fake)
                results["seed_comparison"] = seed_comparison(base, make_tenant(), fake)
        finally:
            stop_server(server)

    print(table(
        ["mode", "sessions", "workers", "offered turns/s", "achieved turns/s", "turns", "turn p50 ms", "turn p95 ms",
         "turn p99 ms", "ack p95 ms", "ack→first delta p95 ms", "server CPU ms/turn (Python + PostgreSQL)", "errors",
         "leaks", "load avg"],
        [[r["mode"], r["sessions"], r["workers"], _fmt(r["offered_turns_per_s"]), r["turns_per_s"], r["turns"],
          r["turn_ms"].get("p50"), r["turn_ms"].get("p95"), r["turn_ms"].get("p99"), r["ack_ms"].get("p95"),
          r["ack_to_first_delta_ms"].get("p95"),
          f"{_fmt(r['server_cpu_ms_per_turn'])} ({_fmt(r.get('server_python_cpu_ms_per_turn'))} + "
          f"{_fmt(r.get('server_postgres_cpu_ms_per_turn'))})", r["errors"],
          r["cross_session_leaks"], f"{r['loadavg_before']}→{r['loadavg_after']}"] for r in results["runs"]],
    ))  # fmt: skip
    if "seed_comparison" in results:
        print(table(
            ["turn", "our prompt tokens", "raw history tokens", "ratio", "platform ms"],
            [[r["turn"], r["our_prompt_tokens"], r["raw_history_tokens"], r["ratio"], r["platform_ms"]]
             for r in results["seed_comparison"]],
        ))  # fmt: skip
    path = write_result("chat_load" if args.transport == "ws" else "chat_load_rest", results)
    print(f"written to {path}")


if __name__ == "__main__":
    main()
