"""The product's default memory writer (``MEMORY_WRITER`` "worker"): a turn announces its messages in the
transaction that stores the reply (``memory.conversation.writer``), and the real worker (``manage.py run_worker``)
writes
them in batches. The reply never waits for them and nothing is lost: what nobody heard, the sweep writes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction

from conversations.models import Message
from memory.conversation.units import index_pending, index_turns
from memory.conversation.writer import CHANNEL, Announced, announce, parse, write_announced
from memory.models import MemoryUnit
from tenants.rls import tenant_scope
from testkit.fake_ollama import Reply
from tests.factories import TenantCtx, open_session

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]


def _talk(ctx: TenantCtx, fake: Any, sid: str, user: str, agent: str) -> None:
    fake.script(Reply(text=agent))
    response = ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": user}, format="json")
    assert response.status_code == 200, response.content


def _recall(ctx: TenantCtx, end_user: str, query: str) -> str:
    sid = open_session(ctx, end_user)["session_id"]
    response = ctx.client.post(
        "/api/v1/memories/recall", {"query": query, "k": 5}, format="json", HTTP_X_SESSION_ID=sid
    )
    assert response.status_code == 200, response.content
    return "\n".join(r["memory"]["content"] for r in response.json()["results"])


def _messages(ctx: TenantCtx, sid: str) -> list[Message]:
    with tenant_scope(ctx.tenant):
        return list(Message.objects.for_tenant(ctx.tenant).filter(session_id=sid).order_by("seq"))


def _units(ctx: TenantCtx) -> int:
    with tenant_scope(ctx.tenant):
        return MemoryUnit.objects.for_tenant(ctx.tenant).count()


def _worker_env() -> dict[str, str]:
    return {**os.environ, "MEMDESK_DB_NAME": connection.settings_dict["NAME"], "LOG_LEVEL": "WARNING"}


def _listener() -> psycopg.Connection:
    params = {k: v for k, v in connection.get_connection_params().items() if k not in ("cursor_factory", "context")}
    conn = psycopg.connect(**params, autocommit=True)
    conn.execute(f"LISTEN {CHANNEL}")
    return conn


def test_a_turn_announces_its_messages_when_the_reply_is_stored(acme, fake_ollama, settings):
    # given the product's default writer and a connection listening as the worker does
    settings.MEMORY_WRITER = "worker"
    sid = open_session(acme, "ines")["session_id"]
    listener = _listener()
    try:
        # when a customer says something no rule recognises
        _talk(acme, fake_ollama, sid, "I collect stamps from Iceland.", "What a lovely hobby!")

        # then the turn announced exactly its two messages, and wrote no unit in the web process
        heard = [parse(n.payload) for n in listener.notifies(timeout=5, stop_after=1)]
    finally:
        listener.close()
    messages = _messages(acme, sid)
    assert heard == [Announced(str(acme.tenant.pk), sid, tuple(str(m.pk) for m in messages))]
    assert [m.role for m in messages] == ["user", "assistant"]
    assert all(m.memory_indexed_at is None for m in messages)
    assert "Iceland" not in _recall(acme, "ines", "Which country are my stamps from?")


def test_an_announcement_is_heard_only_if_its_transaction_commits(acme):
    # given a listener, and messages announced in a transaction that then fails
    listener = _listener()
    session = open_session(acme, "kai")["session_id"]
    ids = ["00000000-0000-0000-0000-000000000001", "00000000-0000-0000-0000-000000000002"]

    def fail_after_announcing() -> None:
        with transaction.atomic():
            announce(acme.tenant, session, ids)
            raise RuntimeError("the reply's transaction failed")

    try:
        with pytest.raises(RuntimeError):
            fail_after_announcing()
        # then nothing is heard; an announcement that commits is
        assert list(listener.notifies(timeout=0.5, stop_after=1)) == []
        with transaction.atomic():
            announce(acme.tenant, session, ids)
        assert [parse(n.payload) for n in listener.notifies(timeout=5, stop_after=1)] == [
            Announced(str(acme.tenant.pk), session, tuple(ids))
        ]
    finally:
        listener.close()


def test_the_running_worker_writes_what_turns_announce(acme, fake_ollama, settings):
    # given a worker running as `make run` starts it (listening for announcements)
    settings.MEMORY_WRITER = "worker"
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "run_worker", "--index-every", "3600", "--memory-wait-ms", "50"],
        cwd=ROOT, env={**_worker_env(), "MEMDESK_WARMUP": "0"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert worker.stdout is not None
        started = worker.stdout.readline()  # printed once the writer listens
        assert started.startswith("run_worker: queues"), started + (worker.stderr.read() if worker.poll() else "")

        # when two customers talk while it runs
        first = open_session(acme, "ines")["session_id"]
        second = open_session(acme, "joao")["session_id"]
        _talk(acme, fake_ollama, first, "I collect stamps from Iceland.", "What a lovely hobby!")
        _talk(acme, fake_ollama, second, "My cat Mochi only eats salmon.", "Noted, salmon for Mochi.")

        # then both turns are written soon after, by the worker, with no job queued for them
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
            m.memory_indexed_at for sid in (first, second) for m in _messages(acme, sid)
        ):
            time.sleep(0.2)
    finally:
        worker.terminate()
        worker.communicate(timeout=60)
    assert all(m.memory_indexed_at for sid in (first, second) for m in _messages(acme, sid))
    assert "Iceland" in _recall(acme, "ines", "Which country are my stamps from?")
    assert "salmon" in _recall(acme, "joao", "What does my cat eat?")
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM procrastinate_jobs WHERE task_name = 'memory.index_turn'")
        assert cursor.fetchone()[0] == 0


def test_what_no_worker_heard_is_written_when_one_starts(acme, fake_ollama, settings):
    # given a turn announced while no worker was running (its announcement is lost)
    settings.MEMORY_WRITER = "worker"
    sid = open_session(acme, "pia")["session_id"]
    _talk(acme, fake_ollama, sid, "I collect stamps from Greenland.", "Lovely!")
    assert all(m.memory_indexed_at is None for m in _messages(acme, sid))

    # when a worker starts, with the warm-up on (the default)
    env = _worker_env()
    env.pop("MEMDESK_WARMUP", None)
    out = subprocess.run(
        [sys.executable, "manage.py", "run_worker", "--once", "--index-every", "3600"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr

    # then it loaded its models before taking work, and the turn, seconds old, is written all the same
    lines = out.stdout.splitlines()
    loaded = next(i for i, line in enumerate(lines) if line.startswith("run_worker: models loaded in"))
    started = next(i for i, line in enumerate(lines) if line.startswith("run_worker: queues"))
    assert loaded < started
    assert "2 message(s) indexed" in lines[started]
    assert all(m.memory_indexed_at is not None for m in _messages(acme, sid))
    assert "Greenland" in _recall(acme, "pia", "Where are my stamps from?")


def test_a_batch_writes_several_sessions_and_nothing_twice(acme, fake_ollama, settings):
    # given two turns of two customers, announced, one of them already written by the sweep
    settings.MEMORY_WRITER = "worker"
    first = open_session(acme, "olaf")["session_id"]
    second = open_session(acme, "sven")["session_id"]
    _talk(acme, fake_ollama, first, "My dog is called Biscuit.", "Biscuit is a great name!")
    assert index_pending(acme.tenant, settle=timedelta(0)) == 2
    before = _units(acme)
    _talk(acme, fake_ollama, second, "I play the cello on Sundays.", "How lovely.")

    # when the writer gets a batch naming both turns
    batch = [
        Announced(str(acme.tenant.pk), sid, tuple(str(m.pk) for m in _messages(acme, sid))) for sid in (first, second)
    ]
    written = write_announced(batch)

    # then only the turn not yet written is, and the memory of the first is there once
    assert written == 2
    assert "cello" in _recall(acme, "sven", "Which instrument do I play?")
    after = _units(acme)
    assert after > before
    assert write_announced(batch) == 0
    assert _units(acme) == after


def test_an_announcement_never_crosses_tenants_or_sessions(acme, globex, fake_ollama, settings):
    # given a turn of acme's, not yet written
    settings.MEMORY_WRITER = "worker"
    sid = open_session(acme, "mia")["session_id"]
    _talk(acme, fake_ollama, sid, "My locker code is kept in the blue notebook.", "Understood.")
    ids = tuple(str(m.pk) for m in _messages(acme, sid))
    other = open_session(acme, "noah")["session_id"]

    # when announcements name its messages under another tenant, or under another session of the same tenant
    written = write_announced([Announced(str(globex.tenant.pk), sid, ids), Announced(str(acme.tenant.pk), other, ids)])

    # then nothing is written, for anyone
    assert written == 0
    assert index_turns(globex.tenant, [(sid, ids)]) == 0
    assert all(m.memory_indexed_at is None for m in _messages(acme, sid))
    assert _units(globex) == 0
    assert "notebook" not in _recall(acme, "noah", "Where is my locker code?")


@pytest.mark.parametrize(
    "payload",
    ["", "hello", "not-a-uuid 1 2", "00000000-0000-0000-0000-000000000001 00000000-0000-0000-0000-000000000002"],
)
def test_a_notification_that_names_no_messages_is_ignored(payload, caplog):
    # anyone with a connection may NOTIFY on the channel: what is not an announcement reaches no query
    assert parse(payload) is None
    assert write_announced([]) == 0
    assert "names no messages" in caplog.text


def test_one_session_that_fails_costs_the_others_of_its_batch_nothing(acme, fake_ollama, settings, monkeypatch):
    # given two announced turns, and a store that fails for one customer's session
    settings.MEMORY_WRITER = "worker"
    good = open_session(acme, "lena")["session_id"]
    bad = open_session(acme, "omar")["session_id"]
    _talk(acme, fake_ollama, good, "I keep bees in my garden.", "How wonderful.")
    _talk(acme, fake_ollama, bad, "I restore old clocks.", "A fine craft.")
    from memory.store import write as store

    def fails_for_omar(real: Any) -> Any:
        def write(tenant: Any, *args: Any, **kwargs: Any) -> Any:
            sessions = [s for s, _ in args[0]] if real is store.write_sessions_memories else [args[0]]
            if any(str(s.pk) == bad for s in sessions):
                raise RuntimeError("disk full")
            return real(tenant, *args, **kwargs)

        return write

    monkeypatch.setattr(store, "write_sessions_memories", fails_for_omar(store.write_sessions_memories))
    monkeypatch.setattr(store, "write_memories", fails_for_omar(store.write_memories))

    # when the writer gets both in one batch
    written = write_announced(
        [Announced(str(acme.tenant.pk), sid, tuple(str(m.pk) for m in _messages(acme, sid))) for sid in (good, bad)]
    )

    # then the good session is written and the failing one is left unmarked for the sweep to retry
    assert written == 2
    assert all(m.memory_indexed_at for m in _messages(acme, good))
    assert all(m.memory_indexed_at is None for m in _messages(acme, bad))
    monkeypatch.undo()
    assert "bees" in _recall(acme, "lena", "What do I keep in my garden?")


def test_with_conversation_memory_off_only_keyed_facts_are_kept(acme, fake_ollama, settings):
    # given an operator who turned conversation memory off (MEMDESK_MEMORY_WRITER=off)
    settings.MEMORY_WRITER = "off"
    sid = open_session(acme, "rui")["session_id"]
    listener = _listener()
    try:
        # when a customer gives a phone number and says something no rule recognises
        _talk(acme, fake_ollama, sid, "My phone is 13912345678. I collect stamps from Iceland.", "Noted!")
        heard = list(listener.notifies(timeout=0.5, stop_after=1))
    finally:
        listener.close()
    # and a worker runs with the same setting
    out = subprocess.run(
        [sys.executable, "manage.py", "run_worker", "--once", "--index-every", "3600"],
        cwd=ROOT, env={**_worker_env(), "MEMDESK_WARMUP": "0", "MEMDESK_MEMORY_WRITER": "off"},
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr

    # then nothing was announced or written as conversation memory, and the keyed fact is recalled
    assert heard == []
    assert "0 message(s) indexed" in out.stdout
    assert all(m.memory_indexed_at is None for m in _messages(acme, sid))
    recalled = _recall(acme, "rui", "What is my phone number?")
    assert "13912345678" in recalled
    assert "Iceland" not in recalled


def test_an_unknown_memory_writer_fails_at_start():
    env = {**_worker_env(), "MEMDESK_MEMORY_WRITER": "sometimes"}
    out = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0
    assert "MEMDESK_MEMORY_WRITER must be one of worker, inline, off, got 'sometimes'" in out.stderr
