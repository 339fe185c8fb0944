"""A batch whose worker is killed mid-way resumes after its last finished item
in a new worker, without calling finished items again."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

from tests.factories import open_session
from tests.tools.backend import Answer
from tests.tools.conftest import register

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
FAST = ["--heartbeat", "0.5", "--stalled-after", "2", "--poll", "0.2"]


def _worker(tmp_path: Path, *args: str) -> subprocess.Popen:
    """``manage.py run_worker`` in its own process, on this test's database."""
    env = {**os.environ, "MEMDESK_DB_NAME": connection.settings_dict["NAME"], "LOG_LEVEL": "WARNING"}
    log = (tmp_path / f"worker-{time.monotonic_ns()}.log").open("w")
    return subprocess.Popen(
        [sys.executable, "manage.py", "run_worker", *FAST, *args], cwd=ROOT, env=env, stdout=log, stderr=log
    )


def _logs(tmp_path: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(tmp_path.glob("worker-*.log")))


def test_a_killed_worker_resumes_after_the_last_finished_item(acme, backend, tmp_path):
    # given a batch of 10 whose item c5 hangs the first time it is called
    register(acme, backend.url, name="sync_item", schema=SCHEMA)
    sid = open_session(acme)["session_id"]
    hold = threading.Event()

    def respond(request):
        if request.arguments["id"] == "c5" and backend.calls_where("id", "c5") == 1:
            return Answer(json={"ok": True}, hold=hold)
        return Answer(json={"ok": True})

    backend.responder = respond
    items = [{"id": f"c{i}"} for i in range(10)]
    task_id = acme.client.post(
        f"/api/v1/sessions/{sid}/batches", {"tool": "sync_item", "items": items}, format="json"
    ).json()["task_id"]

    # when the worker is killed (SIGKILL: no cleanup) while c5 is in flight
    first = _worker(tmp_path)
    try:
        deadline = time.monotonic() + 120
        while backend.calls_where("id", "c5") == 0:
            assert first.poll() is None, _logs(tmp_path)
            assert time.monotonic() < deadline, "the worker never reached item c5\n" + _logs(tmp_path)
            time.sleep(0.05)
        first.kill()
        first.wait(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()
        hold.set()
    midway = acme.client.get(f"/api/v1/sessions/{sid}/batches/{task_id}").json()

    # and a new worker starts once the dead one's heartbeat is stale
    time.sleep(2.5)
    second = _worker(tmp_path, "--once")
    assert second.wait(timeout=120) == 0, _logs(tmp_path)

    # then
    assert midway == {
        "task_id": task_id,
        "completed": 5,
        "failed": 0,
        "total": 10,
        "last_success_id": "c4",
        "status": "running",
    }
    final = acme.client.get(f"/api/v1/sessions/{sid}/batches/{task_id}").json()
    # (seen once in CI, not reproduced: the second worker exited 0 without resuming; its log tells why next time)
    assert final == {**midway, "completed": 10, "last_success_id": "c9", "status": "done"}, _logs(tmp_path)
    calls = {f"c{i}": backend.calls_where("id", f"c{i}") for i in range(10)}
    # finished items were never repeated; only c5, in flight when the worker died, ran twice
    assert calls == {**{f"c{i}": 1 for i in range(10)}, "c5": 2}
    c5 = [r for r in backend.requests if r.arguments["id"] == "c5"]
    assert c5[0].headers["X-Memdesk-Call-Id"] == c5[1].headers["X-Memdesk-Call-Id"] == f"batch:{task_id}:5"


def test_sigterm_stops_between_items_and_the_next_worker_resumes(acme, backend, tmp_path):
    # given a batch of 6 whose item c2 is in flight when the worker is told to stop
    register(acme, backend.url, name="sync_item", schema=SCHEMA)
    sid = open_session(acme)["session_id"]
    hold = threading.Event()
    backend.responder = lambda r: Answer(json={"ok": True}, hold=hold if r.arguments["id"] == "c2" else None)
    items = [{"id": f"c{i}"} for i in range(6)]
    task_id = acme.client.post(
        f"/api/v1/sessions/{sid}/batches", {"tool": "sync_item", "items": items}, format="json"
    ).json()["task_id"]
    first = _worker(tmp_path)
    try:
        deadline = time.monotonic() + 120
        while backend.calls_where("id", "c2") == 0:
            assert first.poll() is None, _logs(tmp_path)
            assert time.monotonic() < deadline, "the worker never reached item c2\n" + _logs(tmp_path)
            time.sleep(0.05)
        # when
        first.terminate()
        time.sleep(0.5)
        hold.set()
        exit_code = first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
        hold.set()
    stopped = acme.client.get(f"/api/v1/sessions/{sid}/batches/{task_id}").json()
    # the aborted job is retried after RetryStrategy(wait=2): a `--once` worker started sooner finds
    # nothing due yet and exits (seen once worker start-up got fast enough to beat it)
    time.sleep(2.5)
    second = _worker(tmp_path, "--once")
    assert second.wait(timeout=120) == 0, _logs(tmp_path)
    # then the item in flight finished, the worker stopped before the next one
    assert exit_code == 0, _logs(tmp_path)
    assert (stopped["completed"], stopped["status"], stopped["last_success_id"]) == (3, "running", "c2")
    final = acme.client.get(f"/api/v1/sessions/{sid}/batches/{task_id}").json()
    assert (final["completed"], final["status"]) == (6, "done")
    assert {f"c{i}": backend.calls_where("id", f"c{i}") for i in range(6)} == {f"c{i}": 1 for i in range(6)}
