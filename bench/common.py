"""Shared helpers for the benchmarks in ``bench/``.

- :func:`setup_django` points Django at a dedicated benchmark database on the
  embedded PostgreSQL (``memdesk_bench_*``, created from ``template1``, which
  carries the ``vector`` extension) so a run never touches the dev data, and
  migrates it.
- :func:`make_tenant` and :func:`open_session`: the one tenant set-up (rate limits lifted so no benchmark
  turn is refused with 429).
- :class:`Timer`, :func:`percentile`, :func:`summarise` for latency figures; :func:`pid_cpu_s`,
  :func:`tree_cpu_s`, :func:`backend_cpu_s` for CPU time (a process, a process tree, this connection's
  PostgreSQL backend).
- :func:`machine_info` for the record (CPU, cores, RAM, Python, PostgreSQL,
  pgvector), :func:`git_state` (commit, dirty files) and :func:`write_result` for
  ``bench/out/<name>.json``.

Benchmarks are not tests: run them by hand, one at a time, ``nice -n 10``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
OUT_DIR = BENCH_DIR / "out"

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# --- database ---------------------------------------------------------------------------------------------


def _superuser_conn(dbname: str = "postgres") -> Any:
    import psycopg
    from django.conf import settings

    from config.embedded_pg import ensure_embedded

    server = ensure_embedded(settings.EMBEDDED_PG_DIR)
    return psycopg.connect(host=server.socket_dir, user="postgres", dbname=dbname, autocommit=True)


def setup_django(dbname: str, *, fresh: bool = False, migrate: bool = True) -> None:
    """Configure Django on its own benchmark database ``dbname`` (created if
    missing; dropped and recreated when ``fresh``) and migrate it.

    Only the embedded server is supported: with ``DATABASE_URL`` set the
    benchmark would need a database it may create, so we refuse rather than
    write into a production database by mistake.
    """
    if not dbname.startswith("memdesk_bench"):
        raise ValueError("benchmark databases are named memdesk_bench*")
    if os.environ.get("DATABASE_URL"):
        raise SystemExit("bench: unset DATABASE_URL; benchmarks run on the embedded PostgreSQL only")
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = dbname  # before any connection is opened
    with _superuser_conn() as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [dbname]).fetchone()
        if exists and fresh:
            conn.execute(f'DROP DATABASE "{dbname}" WITH (FORCE)')
            exists = None
        if not exists:
            conn.execute(f'CREATE DATABASE "{dbname}" OWNER memdesk TEMPLATE template1')
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)


def pg_versions() -> dict[str, str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        server = cursor.fetchone()[0]
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    return {"postgresql": server, "pgvector": row[0] if row else "missing"}


#: Per-minute limits high enough that no benchmark turn is refused with 429 (the defaults are 60 and 600).
RATE_LIMITS = {"per_session_per_minute": 100_000, "per_tenant_per_minute": 1_000_000}


def make_tenant(slug: str, *, language: str = "zh", settings: dict[str, Any] | None = None) -> Any:
    """A tenant made by the product's own service (``do_create_tenant``), with ``RATE_LIMITS`` and
    ``settings`` merged into its settings; the returned ``Provisioned`` carries ``tenant`` and ``api_key``."""
    from tenants.services import do_create_tenant

    provisioned = do_create_tenant(slug, slug, language=language)
    tenant = provisioned.tenant
    tenant.settings = {**(tenant.settings or {}), "rate_limits": dict(RATE_LIMITS), **(settings or {})}
    tenant.save(update_fields=["settings"])
    return provisioned


def open_session(tenant: Any, end_user: str, metadata: dict[str, Any] | None = None) -> Any:
    """A chat session of ``end_user`` opened by the product's own service, as the REST API opens one."""
    from chat.sessions.lifecycle import do_open_session
    from tenants.rls import tenant_scope

    with tenant_scope(tenant):
        return do_open_session(tenant, end_user, metadata or {}).session


# --- timing -----------------------------------------------------------------------------------------------


class Timer:
    """``with Timer() as t: ...`` then ``t.ms``."""

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        self.ms = 0.0
        return self

    def __exit__(self, *exc: Any) -> None:
        self.ms = (time.perf_counter() - self.start) * 1000


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), ``q`` in [0, 100]."""
    if not values:
        return math.nan
    data = sorted(values)
    pos = (len(data) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi:
        return float(data[lo])
    return float(data[lo] + (data[hi] - data[lo]) * (pos - lo))


def summarise(values: Iterable[float]) -> dict[str, float]:
    data = list(values)
    if not data:
        return {"n": 0}
    return {
        "n": len(data),
        "mean": round(sum(data) / len(data), 3),
        "p50": round(percentile(data, 50), 3),
        "p95": round(percentile(data, 95), 3),
        "p99": round(percentile(data, 99), 3),
        "max": round(max(data), 3),
    }


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, own CPU seconds: user + system) of a live process, from /proc."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


def child_pids(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _proc_stat(int(entry.name))
            if stat is not None and stat[0] == pid:
                kids.append(int(entry.name))
    return kids


def pid_cpu_s(pid: int) -> float:
    """CPU seconds so far of one process (0 once it is gone)."""
    stat = _proc_stat(pid)
    return stat[1] if stat is not None else 0.0


def tree_cpu_s(pid: int) -> float:
    """CPU seconds so far of a process and its live descendants."""
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        stat = _proc_stat(current)
        if stat is not None:
            total += stat[1]
            todo += child_pids(current)
    return total


def backend_cpu_s() -> float:
    """CPU seconds so far of this thread's PostgreSQL backend (the embedded server runs on this machine)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    return pid_cpu_s(pid)


# --- machine and output -----------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def python_loop_ms(n: int = 2_000_000, repeat: int = 3) -> float:
    """The machine's speed for plain Python: the best of ``repeat`` runs of a
    ``n``-step integer loop, in ms. Machines of one kind differ by 2× from day
    to day (the same chat turn took 31 ms on one and 60 ms on another;
    bench/RESULTS.md), so every result records this beside its figures:
    compare runs made on different machines only after scaling by it."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        total = 0
        for i in range(n):
            total += i
        best = min(best, time.perf_counter() - started)
    return round(best * 1000, 1)


#: The columns of /proc/stat's ``cpu`` line (Linux, in clock ticks).
_PROC_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_ticks() -> dict[str, int] | None:
    """The whole machine's CPU time so far, by kind (/proc/stat), or None where there is no /proc/stat."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    return dict(zip(_PROC_STAT_FIELDS, (int(x) for x in fields[1:]), strict=False))


def cpu_shares(before: dict[str, int] | None, after: dict[str, int] | None) -> dict[str, float] | None:
    """How the machine's CPUs spent the time between two ``cpu_ticks()``, in % of all of it: ``busy`` (every
    kind but idle, iowait and steal), ``iowait`` and ``steal`` — time the hypervisor gave our virtual CPUs to
    someone else: a run with steal above a few % measured a machine that was not all ours."""
    if not before or not after:
        return None
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in _PROC_STAT_FIELDS}
    total = sum(delta.values())
    if total <= 0:
        return None
    busy = total - delta["idle"] - delta["iowait"] - delta["steal"]
    return {
        "busy_pct": round(100 * busy / total, 1),
        "iowait_pct": round(100 * delta["iowait"] / total, 1),
        "steal_pct": round(100 * delta["steal"] / total, 1),
    }


def machine_info(*, with_db: bool = True) -> dict[str, Any]:
    info: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": _ram_gib(),
        "python": sys.version.split()[0],
        "loadavg_at_start": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "python_loop_2m_ms": python_loop_ms(),
    }
    try:
        import django
        import onnxruntime

        info["django"] = django.get_version()
        info["onnxruntime"] = onnxruntime.__version__
    except Exception:  # pragma: no cover - informational only
        pass
    if with_db:
        info.update(pg_versions())
    return info


def git_state() -> dict[str, Any]:
    """The commit the tree is at and how many files differ from it (``git status --porcelain`` lines): a
    result measured on a dirty tree names the commit it started from, not the code it ran."""

    def git(*args: str) -> str:
        try:
            run = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)  # noqa: S603,S607
        except (OSError, subprocess.SubprocessError):
            return ""
        return run.stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "dirty_files": len(git("status", "--porcelain").splitlines())}


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def write_result(name: str, payload: dict[str, Any]) -> Path:
    """Write ``payload`` to ``bench/out/<name>.json``; a ``machine`` section gets the Python-speed figure
    measured again now, at the end of the run (``python_loop_2m_ms_at_end``): the one at the start may
    have shared the CPU with whatever ran just before."""
    if isinstance(payload.get("machine"), dict):
        payload["machine"]["python_loop_2m_ms_at_end"] = python_loop_ms()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUT_DIR / f"{name}.json"
    path.write_text(json.dumps(payload, ensure_ascii=False, indent=2, default=str) + "\n")
    return path


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table (printable and pasteable into RESULTS.md)."""

    def fmt(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)
