"""A batch whose worker is killed mid-way resumes after its last finished item
in a new worker, without calling finished items again."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.db import connection

from chat.management.commands import run_worker
from tests.chat.tools.backend import Answer
from tests.chat.tools.conftest import register
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
FAST = ["--heartbeat", "0.5", "--stalled-after", "2", "--poll", "0.2"]


def _worker(tmp_path: Path, *args: str) -> subprocess.Popen:
    """``manage.py run_worker`` in its own process, on this test's database."""
    env = {**os.environ, "MEMDESK_DB_NAME": connection.settings_dict["NAME"], "LOG_LEVEL": "INFO"}
    log = (tmp_path / f"worker-{time.monotonic_ns()}.log").open("w")
    return subprocess.Popen(
        [sys.executable, "manage.py", "run_worker", *FAST, *args], cwd=ROOT, env=env, stdout=log, stderr=log
    )


def _logs(tmp_path: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(tmp_path.glob("worker-*.log")))


def _jobs() -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, status, attempts, scheduled_at, now() FROM procrastinate_jobs"
            " WHERE task_name = 'chat.run_batch'"
            " ORDER BY id DESC LIMIT 5"
        )
        return "\n".join(map(str, cursor.fetchall()))


def _resume(acme, tmp_path: Path, sid: str, task_id: str) -> dict:
    """A new worker, as a restarted deployment runs one, until the batch is done (or 120 s); its state then.
    (A ``--once`` worker would race the aborted job's retry delay and a dead worker's stale heartbeat.)"""
    worker = _worker(tmp_path)
    try:
        deadline = time.monotonic() + 120
        while (batch := acme.client.get(f"/api/v1/sessions/{sid}/batches/{task_id}").json())["status"] == "running":
            assert worker.poll() is None, _logs(tmp_path)
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        worker.terminate()
        assert worker.wait(timeout=30) == 0, _logs(tmp_path)
    finally:
        if worker.poll() is None:
            worker.kill()
    return batch


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

    # and a new worker starts
    final = _resume(acme, tmp_path, sid, task_id)

    # then
    assert midway == {
        "task_id": task_id,
        "completed": 5,
        "failed": 0,
        "total": 10,
        "last_success_id": "c4",
        "status": "running",
    }
    assert final == {**midway, "completed": 10, "last_success_id": "c9", "status": "done"}, _logs(tmp_path) + _jobs()
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
    final = _resume(acme, tmp_path, sid, task_id)
    # then the item in flight finished, the worker stopped before the next one
    assert exit_code == 0, _logs(tmp_path)
    assert (stopped["completed"], stopped["status"], stopped["last_success_id"]) == (3, "running", "c2")
    assert (final["completed"], final["status"]) == (6, "done"), _logs(tmp_path) + _jobs()
    assert {f"c{i}": backend.calls_where("id", f"c{i}") for i in range(6)} == {f"c{i}": 1 for i in range(6)}


class _Jobs:
    """A job manager whose watch finds the given jobs stalled (their worker's heartbeat late)."""

    def __init__(self, stalled: list[SimpleNamespace]) -> None:
        self.stalled, self.retried = stalled, []

    async def get_stalled_jobs(self, **kwargs: object) -> list[SimpleNamespace]:
        return self.stalled

    async def retry_job(self, job: SimpleNamespace) -> None:
        self.retried.append(job.id)


def test_a_job_this_worker_runs_is_never_taken_for_a_dead_worker_s(monkeypatch):
    # given two batch jobs whose worker's heartbeat is late, one of them running in this process (starved of CPU)
    monkeypatch.setattr(run_worker, "RUNNING_JOBS", {7})
    jobs = _Jobs([SimpleNamespace(id=7, call_string="ours"), SimpleNamespace(id=8, call_string="a dead worker's")])
    # when the watch looks for stalled jobs
    count = asyncio.run(run_worker.recover_stalled_jobs(SimpleNamespace(job_manager=jobs), stalled_after=2))
    # then only the other worker's job is queued again
    assert jobs.retried == [8]
    assert count == 1
