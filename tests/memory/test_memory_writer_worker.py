"""The product's default memory writer: a turn queues its conversation units for the background worker
(``MEMORY_WRITER`` "worker"), in the transaction that stores the reply, and the real worker
(``manage.py run_worker --once``) writes them. The reply never waits for them and nothing is lost."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from conversations.models import Message
from memory.conversation import index_pending, index_turn
from memory.models import MemoryUnit
from tenants.rls import tenant_scope
from testkit.fake_ollama import Reply
from tests.factories import TenantCtx, open_session

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]


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


def _queued_jobs(session_id: str) -> list[tuple[str, str]]:
    """The conversation-memory jobs queued for the session (other tests may have left jobs of their own)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT task_name, status FROM procrastinate_jobs"
            " WHERE task_name = 'memory.index_turn' AND args->>'session_id' = %s",
            [session_id],
        )
        return list(cursor.fetchall())


def _messages(ctx: TenantCtx, sid: str) -> list[Message]:
    with tenant_scope(ctx.tenant):
        return list(Message.objects.for_tenant(ctx.tenant).filter(session_id=sid).order_by("seq"))


def test_the_worker_writes_what_a_turn_queued(acme, fake_ollama, settings):
    # given the product's default writer
    settings.MEMORY_WRITER = "worker"
    sid = open_session(acme, "ines")["session_id"]

    # when a customer says something no rule recognises
    _talk(acme, fake_ollama, sid, "I collect stamps from Iceland.", "What a lovely hobby!")

    # then the reply is out, the turn's units are queued, not written in the web process
    assert [status for _, status in _queued_jobs(sid)] == ["todo"]
    assert all(m.memory_indexed_at is None for m in _messages(acme, sid))
    assert "Iceland" not in _recall(acme, "ines", "Which country are my stamps from?")

    # when the background worker runs the waiting jobs
    env = {**os.environ, "MEMDESK_DB_NAME": connection.settings_dict["NAME"], "LOG_LEVEL": "WARNING"}
    out = subprocess.run(
        [sys.executable, "manage.py", "run_worker", "--once", "--index-every", "3600"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr

    # then the customer's words are recallable, both messages are marked, and no job is left
    assert "Iceland" in _recall(acme, "ines", "Which country are my stamps from?")
    assert all(m.memory_indexed_at is not None for m in _messages(acme, sid))
    assert _queued_jobs(sid) == []


def test_a_job_for_messages_already_indexed_writes_nothing_twice(acme, fake_ollama, settings):
    # given a turn whose units the sweep already wrote
    settings.MEMORY_WRITER = "worker"
    sid = open_session(acme, "olaf")["session_id"]
    _talk(acme, fake_ollama, sid, "My dog is called Biscuit.", "Biscuit is a great name!")
    assert index_pending(acme.tenant, settle=timedelta(0)) == 2
    with tenant_scope(acme.tenant):
        before = MemoryUnit.objects.for_tenant(acme.tenant).count()

    # when the queued job runs after all
    ids = [m.pk for m in _messages(acme, sid)]
    written = index_turn(acme.tenant, sid, ids)

    # then it writes nothing and the memory is there once
    assert written == 0
    with tenant_scope(acme.tenant):
        assert MemoryUnit.objects.for_tenant(acme.tenant).count() == before


def test_the_worker_loads_its_models_before_its_first_job(acme, fake_ollama, settings):
    """An operator starting a worker sees it load the models first: the turns queued while it starts do not
    wait behind the loads of whichever job came first."""
    # given a turn whose memory waits for the worker
    settings.MEMORY_WRITER = "worker"
    sid = open_session(acme, "pia")["session_id"]
    _talk(acme, fake_ollama, sid, "I collect stamps from Greenland.", "Lovely!")

    # when a worker starts with the warm-up on (the default)
    env = {**os.environ, "MEMDESK_DB_NAME": connection.settings_dict["NAME"], "LOG_LEVEL": "WARNING"}
    env.pop("MEMDESK_WARMUP", None)
    out = subprocess.run(
        [sys.executable, "manage.py", "run_worker", "--once", "--index-every", "3600"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr

    # then it said so before taking jobs, and the turn's memory is written
    lines = out.stdout.splitlines()
    loaded = next(i for i, line in enumerate(lines) if line.startswith("run_worker: models loaded in"))
    started = next(i for i, line in enumerate(lines) if line.startswith("run_worker: queues"))
    assert loaded < started
    assert "Greenland" in _recall(acme, "pia", "Where are my stamps from?")
