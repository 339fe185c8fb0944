"""Rate limits (API.md): per session and per tenant, counted from the stored
messages of the last minute, so they hold across connections and worker
processes; a replayed ``client_msg_id`` is not counted."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat.sessions import messages as chat_messages
from conversations.access import resolve_session
from conversations.models import Message
from tenants.rls import tenant_scope
from tests.factories import open_session

# Several threads, each with its own database connection, like several workers.
pytestmark = pytest.mark.django_db(transaction=True)


def _limits(ctx, *, per_session=60, per_tenant=600):
    ctx.tenant.settings = {"rate_limits": {"per_session_per_minute": per_session, "per_tenant_per_minute": per_tenant}}
    ctx.tenant.save(update_fields=["settings"])


def _session(ctx, end_user):
    return resolve_session(ctx.tenant, open_session(ctx, end_user)["session_id"])


def _store(ctx, session, text, client_msg_id=None):
    return chat_messages.store_user_message(ctx.tenant, session, text, client_msg_id)


def _in_thread(fn, *args):
    """Run ``fn`` on a thread of its own, i.e. on another database connection."""
    outcome = {}

    def run():
        try:
            outcome["value"] = fn(*args)
        except Exception as exc:  # noqa: BLE001 - handed back to the test
            outcome["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    return outcome


def test_per_session_limit_holds_for_concurrent_connections(acme):
    # given: 3 a minute for the session, and 8 connections sending at once
    _limits(acme, per_session=3)
    session = _session(acme, "alice")
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def send(n):
        barrier.wait(timeout=10)
        try:
            _store(acme, session, f"消息 {n}", f"c{n}")
            outcomes.append("stored")
        except chat_messages.RateLimited:
            outcomes.append("limited")
        finally:
            connection.close()

    # when
    threads = [threading.Thread(target=send, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    # then: the session lock serialises them; exactly 3 got in, with distinct seqs
    assert sorted(outcomes) == ["limited"] * 5 + ["stored"] * 3
    with tenant_scope(acme.tenant):
        seqs = list(Message.objects.for_tenant(acme.tenant).filter(session=session).values_list("seq", flat=True))
    assert sorted(seqs) == [1, 2, 3]


def test_per_tenant_limit_counts_every_session_and_connection(acme, globex):
    # given: 3 a minute for the tenant, 2 stored by one connection, 1 by another
    _limits(acme, per_tenant=3)
    alice, bob = _session(acme, "alice"), _session(acme, "bob")
    assert "error" not in _in_thread(_store, acme, alice, "一")
    assert "error" not in _in_thread(_store, acme, alice, "二")
    assert "error" not in _in_thread(_store, acme, bob, "三")
    # when / then: a fourth, from any session of the tenant, is refused
    with pytest.raises(chat_messages.RateLimited, match="for this tenant"):
        _store(acme, bob, "四")
    # and another tenant is not affected
    _store(globex, _session(globex, "alice"), "hello")


def test_only_the_last_minute_counts(acme):
    # given: a session at its limit, its messages now 61 s old
    _limits(acme, per_session=2, per_tenant=2)
    session = _session(acme, "alice")
    _store(acme, session, "一")
    _store(acme, session, "二")
    with pytest.raises(chat_messages.RateLimited):
        _store(acme, session, "三")
    with tenant_scope(acme.tenant):
        Message.objects.for_tenant(acme.tenant).update(created_at=timezone.now() - timedelta(seconds=61))
    # when
    message, _ = _store(acme, session, "三")
    # then
    assert message.seq == 3


def test_a_replay_is_not_counted(acme):
    # given: one message a minute, already sent
    _limits(acme, per_session=1)
    session = _session(acme, "alice")
    first, _ = _store(acme, session, "你好", "m1")
    # when: the client retries it, while its turn runs and after that turn failed
    with pytest.raises(chat_messages.TurnRunning):
        _store(acme, session, "你好", "m1")
    chat_messages.release_lease(acme.tenant, first.pk)
    again, reply = _store(acme, session, "你好", "m1")
    # then neither retry counted against the limit, and the second takes the message's turn over
    assert (again.pk, reply) == (first.pk, None)
    with pytest.raises(chat_messages.RateLimited, match="in this session"):
        _store(acme, session, "再来一条", "m2")


def test_a_zero_limit_refuses_every_message(acme):
    _limits(acme, per_session=0)
    with pytest.raises(chat_messages.RateLimited):
        _store(acme, _session(acme, "alice"), "你好")


def test_storing_a_message_takes_few_round_trips(acme):
    # given
    session = _session(acme, "alice")
    _store(acme, session, "第一条", "m1")
    # when
    with CaptureQueriesContext(connection) as queries:
        _store(acme, session, "第二条", "m2")
    # then: begin, RLS scope, lock, one read for replay + limits + seq, insert, activity, commit
    assert len(queries) <= 7, [q["sql"][:80] for q in queries]


def test_a_session_deleted_since_the_turn_began_stores_nothing_and_says_so(acme):
    # given a session resolved by a turn, then deleted (with its messages) before the turn stores anything
    from conversations.access import SessionNotFound
    from conversations.models import ChatSession

    session = _session(acme, "alice")
    _store(acme, session, "第一条", "c1")
    with tenant_scope(acme.tenant):
        ChatSession.objects.for_tenant(acme.tenant).filter(pk=session.pk).delete()
    # when the turn's store runs on an idle connection (its lock travels with BEGIN)
    with pytest.raises(SessionNotFound):
        _store(acme, session, "第二条", "c2")
    # then nothing was stored for it
    with tenant_scope(acme.tenant):
        assert not Message.objects.for_tenant(acme.tenant).filter(session_id=session.pk).exists()
