"""Many REST turns at once, retries of a turn still running, and the database going away mid-turn.

Served by the real ASGI application under uvicorn (tests/live_server.py), with the process's own
connection pool (``DB_POOL_MAX_SIZE``, 10 by default) and the fake Ollama answering after a delay, so
turns overlap for real."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import httpx
import pytest
from django.db import connection
from psycopg_pool import PoolTimeout

from chat.sessions import messages as chat_messages
from chat.turn import run as chat_turn
from config.embedded_pg import ensure_embedded
from conversations.models import ChatSession, Message
from tenants.rls import tenant_scope
from testkit.fake_ollama import Reply
from tests.factories import open_session
from tests.live_server import uvicorn_in_thread

pytestmark = pytest.mark.django_db(transaction=True)


def _echo(delay_s: float):
    """Each reply names the message it answers, so a reply sent to the wrong request shows."""

    def reply(body: dict[str, Any]) -> Reply:
        return Reply(text=f"echo: {body['messages'][-1]['content']}", first_token_delay_s=delay_s)

    return reply


def _post(base: str, key: str, sid: str, text: str, client_msg_id: str | None = None) -> httpx.Response:
    body = {"text": text} if client_msg_id is None else {"text": text, "client_msg_id": client_msg_id}
    return httpx.post(
        f"http://{base}/api/v1/sessions/{sid}/messages",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
        timeout=120,
    )


def _messages(ctx, sid: str) -> list[Message]:
    with tenant_scope(ctx.tenant):
        return list(Message.objects.for_tenant(ctx.tenant).filter(session_id=sid).order_by("seq"))


def _until_generating(fake, calls: int = 1) -> None:
    """Wait until the fake model has been asked ``calls`` times: the first turn is past storing its message."""
    deadline = time.monotonic() + 30
    while len(fake.chat_requests) < calls and time.monotonic() < deadline:
        time.sleep(0.05)


def _in_threads(calls: list) -> list[Any]:
    """Run the calls at the same moment, one thread each; their results in order."""
    results: list[Any] = [None] * len(calls)
    start = threading.Barrier(len(calls))

    def run(index: int) -> None:
        start.wait()
        results[index] = calls[index]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    return results


def test_a_burst_of_concurrent_rest_turns_all_succeed(acme, fake_ollama, settings):
    # given 100 sessions, each about to send its messages over REST at once, with a model that takes a
    # moment to answer: ten times more turns in flight than the worker's pool has connections
    fake_ollama.default_reply = _echo(0.3)
    settings.OLLAMA_TIMEOUT_S = 120.0  # the fake shares this process's two cores with the server and clients
    sessions = [open_session(acme, f"burst-{n}")["session_id"] for n in range(100)]
    turns_each = 3

    async def burst(base: str) -> list[tuple[str, str, int, str]]:
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
        async with httpx.AsyncClient(base_url=f"http://{base}", timeout=120, limits=limits) as client:
            headers = {"Authorization": f"Bearer {acme.api_key}"}

            async def session_turns(sid: str) -> list[tuple[str, str, int, str]]:
                out = []
                for turn in range(turns_each):
                    text = f"session {sid} turn {turn}"
                    response = await client.post(
                        f"/api/v1/sessions/{sid}/messages", json={"text": text}, headers=headers
                    )
                    out.append((sid, text, response.status_code, response.json().get("reply", response.text)))
                return out

            results = await asyncio.gather(*(session_turns(sid) for sid in sessions))
            return [turn for per_session in results for turn in per_session]

    # when every session sends its messages, one after the other, all sessions at once
    # (keep-alive longer than the burst: a connection the server closes while idle is the client's race)
    with uvicorn_in_thread(log_level="warning", timeout_keep_alive=300) as base:
        turns = asyncio.run(burst(base))

    # then every turn answered 200 with the reply to its own message (no cross-talk), all stored
    failures = [(status, body) for _, _, status, body in turns if status != 200]
    assert failures == []
    assert all(reply == f"echo: {text}" for _, text, _, reply in turns)
    with tenant_scope(acme.tenant):
        stored = Message.objects.for_tenant(acme.tenant).filter(session_id__in=sessions)
        assert stored.filter(role=Message.Role.ASSISTANT, status=Message.Status.COMPLETE).count() == 300


def test_liveness_answers_while_every_pooled_connection_is_taken():
    # given a worker whose every pooled connection is busy (turns, a slow query)
    pool = connection.pool
    if pool is None:
        pytest.skip("the connection pool is off (DB_POOL_MAX_SIZE=0)")
    held = []
    with contextlib.suppress(PoolTimeout):
        while True:  # every connection the pool will give (the test's own thread may hold one already)
            held.append(pool.getconn(timeout=1.0))
    try:
        with uvicorn_in_thread(log_level="warning") as base:
            # when the orchestrator probes liveness, with a deadline far below the pool's wait
            response = httpx.get(f"http://{base}/healthz", timeout=pool.timeout / 3)
    finally:
        for conn in held:
            pool.putconn(conn)
    # then the probe is answered: it never waits for a connection
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_a_retry_while_the_turn_is_running_gets_the_same_reply_and_no_second_model_call(acme, fake_ollama):
    # given a turn that takes a while, and four retries of it sent while it runs
    fake_ollama.default_reply = _echo(1.5)
    sid = open_session(acme, "retry-user")["session_id"]
    with uvicorn_in_thread(log_level="warning") as base:
        first = threading.Thread(target=lambda: results.append(_post(base, acme.api_key, sid, "我的订单呢", "m-1")))
        results: list[httpx.Response] = []
        first.start()
        _until_generating(fake_ollama)
        # when the retries arrive together
        retries = _in_threads([lambda: _post(base, acme.api_key, sid, "我的订单呢", "m-1") for _ in range(4)])
        first.join(timeout=60)

    # then all five answers carry the one reply, and the model was called once
    answers = [r.json() for r in [*results, *retries]]
    assert [r.status_code for r in [*results, *retries]] == [200] * 5
    assert {a["reply_id"] for a in answers} == {answers[0]["reply_id"]}
    assert {a["message_id"] for a in answers} == {answers[0]["message_id"]}
    assert len(fake_ollama.chat_requests) == 1
    stored = _messages(acme, sid)
    assert [(m.role, m.text) for m in stored] == [("user", "我的订单呢"), ("assistant", "echo: 我的订单呢")]


def test_a_retry_that_outwaits_the_running_turn_gets_409_then_the_reply(acme, fake_ollama, monkeypatch):
    # given a retry that waits less than the running turn takes
    monkeypatch.setattr(chat_turn, "TURN_WAIT_S", 0.5)
    fake_ollama.default_reply = _echo(2.5)
    sid = open_session(acme, "impatient")["session_id"]
    results: list[httpx.Response] = []
    with uvicorn_in_thread(log_level="warning") as base:
        first = threading.Thread(target=lambda: results.append(_post(base, acme.api_key, sid, "在吗", "m-2")))
        first.start()
        _until_generating(fake_ollama)
        # when the retry comes while the first turn is still generating
        early = _post(base, acme.api_key, sid, "在吗", "m-2")
        first.join(timeout=60)
        # and again once it is done
        late = _post(base, acme.api_key, sid, "在吗", "m-2")

    # then the early retry is told to come back, with the stored message's id
    assert early.status_code == 409
    assert early.json()["error"]["code"] == "turn_in_progress"
    assert early.json()["error"]["retryable"] is True
    assert int(early.headers["Retry-After"]) >= 1
    assert early.json()["message_id"] == results[0].json()["message_id"]
    # and the late one gets the first turn's reply; the model answered once
    assert late.status_code == 200
    assert late.json()["reply_id"] == results[0].json()["reply_id"]
    assert len(fake_ollama.chat_requests) == 1


def test_a_turn_whose_process_died_is_answered_by_a_retry_once_its_lease_lapses(acme, fake_ollama, monkeypatch):
    # given a stored message whose turn claimed it and then died (nothing renews its lease)
    monkeypatch.setattr(chat_messages, "TURN_LEASE_S", 1.0)
    fake_ollama.default_reply = "您的订单已发货。"
    sid = open_session(acme, "orphan")["session_id"]
    with tenant_scope(acme.tenant):
        session = ChatSession.objects.for_tenant(acme.tenant).get(pk=sid)
    message, reply = chat_messages.store_user_message(acme.tenant, session, "订单发货了吗", "m-3")
    assert reply is None
    assert message.turn_lease_until is not None

    # when the client retries
    started = time.monotonic()
    with uvicorn_in_thread(log_level="warning") as base:
        response = _post(base, acme.api_key, sid, "订单发货了吗", "m-3")

    # then the retry waited for the lease to lapse, ran the turn and answered the same message
    assert response.status_code == 200, response.content
    assert response.json()["message_id"] == str(message.pk)
    assert response.json()["reply"] == "您的订单已发货。"
    assert time.monotonic() - started < 10
    assert [m.role for m in _messages(acme, sid)] == ["user", "assistant"]


def test_a_failed_turn_frees_its_message_for_an_immediate_retry(acme, fake_ollama):
    # given a model that fails once
    fake_ollama.script(Reply(status=500))
    fake_ollama.default_reply = "好的，已为您查询。"
    sid = open_session(acme, "unlucky")["session_id"]
    with uvicorn_in_thread(log_level="warning") as base:
        failed = _post(base, acme.api_key, sid, "查一下积分", "m-4")
        # when the client retries at once
        started = time.monotonic()
        retried = _post(base, acme.api_key, sid, "查一下积分", "m-4")
        waited = time.monotonic() - started

    # then the failure said the message is stored and retryable, and the retry ran without waiting for a lease
    assert failed.status_code == 503
    assert failed.json()["error"]["retryable"] is True
    assert retried.status_code == 200
    assert retried.json()["message_id"] == failed.json()["message_id"]
    assert waited < chat_messages.TURN_LEASE_S / 2


def _database_accepts_connections(allowed: bool) -> None:
    """As an outage looks to the application: the database refuses new connections and (when it goes
    down) every open one is ended. Only this test run's database; the cluster serves others."""
    import psycopg
    from django.conf import settings

    if not connection.settings_dict.get("EMBEDDED"):
        pytest.skip("needs the embedded PostgreSQL's superuser")
    host = ensure_embedded(settings.EMBEDDED_PG_DIR).socket_dir
    name = connection.settings_dict["NAME"]
    with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS {"true" if allowed else "false"}')
        if not allowed:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name])


def test_the_database_going_away_mid_turn_answers_503_with_the_message_id_and_the_retry_succeeds(acme, fake_ollama):
    # given a turn whose model is still generating when the database goes away
    fake_ollama.default_reply = _echo(1.5)
    sid = open_session(acme, "outage")["session_id"]
    results: list[httpx.Response] = []
    pool = connection.pool
    pool.timeout = 2.0  # a pool's wait for a connection, shortened so the outage shows in seconds
    try:
        with uvicorn_in_thread(log_level="warning") as base:
            first = threading.Thread(
                target=lambda: results.append(_post(base, acme.api_key, sid, "地址改成人民路8号", "m-5"))
            )
            first.start()
            _until_generating(fake_ollama)
            _database_accepts_connections(False)
            first.join(timeout=60)
            listing = httpx.get(
                f"http://{base}/api/v1/memories",
                headers={"Authorization": f"Bearer {acme.api_key}", "X-Session-ID": sid},
                timeout=30,
            )
            # when the database is back and the client retries
            _database_accepts_connections(True)
            retried = _post(base, acme.api_key, sid, "地址改成人民路8号", "m-5")
    finally:
        _database_accepts_connections(True)
        pool.timeout = 30.0
        connection.close()

    # then the failed turn said so: retryable, with the id of the stored message
    failed = results[0]
    assert failed.status_code == 503, failed.content
    assert failed.json()["error"]["code"] == "database_unavailable"
    assert failed.json()["error"]["retryable"] is True
    assert failed.json()["message_id"]
    # and any other request during the outage said the same, not a bare 500
    assert listing.status_code == 503, listing.content
    assert listing.json()["error"]["code"] == "database_unavailable"
    assert listing.headers["Retry-After"] == "1"
    # and the retry answered that same message, once
    assert retried.status_code == 200, retried.content
    assert retried.json()["message_id"] == failed.json()["message_id"]
    stored = _messages(acme, sid)
    assert [(m.role, m.text) for m in stored] == [
        ("user", "地址改成人民路8号"),
        ("assistant", "echo: 地址改成人民路8号"),
    ]
    assert len(fake_ollama.chat_requests) == 2
