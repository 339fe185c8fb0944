"""Retention (issue #19): each tenant's message, memory and history retention applied by the hourly job and by
``manage.py apply_retention``; a tenant without settings keeps everything. Time is frozen by passing ``now``."""

from __future__ import annotations

import io
import time
from datetime import timedelta
from functools import partial

import pytest
from django.core.management import call_command
from django.utils import timezone

from chat.privacy.retention import apply_retention_all, do_apply_retention
from conversations.models import ChatSession, Message, StaffAccess
from memory.models import MemoryEvent, MemoryUnit
from memory.store.lifecycle import do_cleanup_expired
from tenants.rls import operator_scope, tenant_scope
from tests.factories import open_session_obj, write_memory

VECTOR = [0.0] * 383 + [1.0]
DAY = 86400

_profile = partial(write_memory, type="user_profile", expires_in=365 * DAY, embedding=VECTOR)


def _retain(ctx, **days):
    ctx.tenant.settings = {**ctx.tenant.settings, **days}
    ctx.tenant.save(update_fields=["settings"])


def _message(ctx, session, text, *, at, lease=None):
    with tenant_scope(ctx.tenant):
        seq = Message.objects.for_tenant(ctx.tenant).filter(session=session).count() + 1
        return Message.objects.create(
            tenant=ctx.tenant, session=session, role=Message.Role.USER, text=text, seq=seq, created_at=at,
            turn_lease_until=lease,
        )  # fmt: skip


def _texts(ctx):
    with tenant_scope(ctx.tenant):
        return set(Message.objects.for_tenant(ctx.tenant).values_list("text", flat=True))


def _contents(ctx):
    with tenant_scope(ctx.tenant):
        return set(MemoryUnit.objects.for_tenant(ctx.tenant).values_list("content", flat=True))


def _counts(ctx):
    with tenant_scope(ctx.tenant):
        return {
            model.__name__: model.objects.for_tenant(ctx.tenant).count()
            for model in (Message, ChatSession, MemoryUnit, MemoryEvent)
        }


def _old_session(ctx, end_user, *, now, days):
    """A session closed ``days`` ago."""
    session = open_session_obj(ctx, end_user)
    then = now - timedelta(days=days)
    with tenant_scope(ctx.tenant):
        ChatSession.objects.for_tenant(ctx.tenant).filter(pk=session.pk).update(
            status=ChatSession.Status.CLOSED, closed_at=then, last_activity_at=then, expires_at=then
        )
    return session


def test_messages_older_than_the_retention_go_and_newer_ones_stay(acme):
    # given 30 days of message retention, a message of 40 days ago (a memory came from it) and one of 10
    now = timezone.now()
    _retain(acme, message_retention_days=30)
    session = open_session_obj(acme, "alice")
    old = _message(acme, session, "my phone is 13812345678", at=now - timedelta(days=40))
    _message(acme, session, "where is my parcel", at=now - timedelta(days=10))
    memory = _profile(acme, session, "Phone: 13812345678", key="phone", source_message=old)
    # when retention runs
    result = do_apply_retention(acme.tenant, now=now)
    # then the old message is gone, the newer one stays, and the memory stays, let go of its source
    assert result.messages == 1
    assert _texts(acme) == {"where is my parcel"}
    with tenant_scope(acme.tenant):
        kept = MemoryUnit.objects.for_tenant(acme.tenant).get(pk=memory.pk)
    assert kept.source_message_id is None


def test_a_running_turns_message_is_never_deleted(acme):
    # given two old messages: one whose turn still holds its lease, one whose lease lapsed (its process died)
    now = timezone.now()
    _retain(acme, message_retention_days=1)
    session = open_session_obj(acme, "alice")
    _message(acme, session, "running", at=now - timedelta(days=3), lease=now + timedelta(seconds=15))
    _message(acme, session, "lapsed", at=now - timedelta(days=3), lease=now - timedelta(seconds=1))
    # when retention runs
    do_apply_retention(acme.tenant, now=now)
    # then the running turn's message stays and only the other goes
    assert _texts(acme) == {"running"}


def test_memories_older_than_the_retention_go_whatever_their_own_lifetime(acme):
    # given 30 days of memory retention; a memory of 40 days ago that would live a year, a newer one that
    # would too, and a newer one whose own lifetime (a day) has ended
    now = timezone.now()
    _retain(acme, memory_retention_days=30)
    session = open_session_obj(acme, "alice")
    old = _profile(acme, session, "Name: Alice", key="name", now=now - timedelta(days=40))
    _profile(acme, session, "City: Hangzhou", key="city", now=now - timedelta(days=10))
    _profile(acme, session, "Coupon SPRING10", key="coupon", now=now - timedelta(days=10), expires_in=DAY)
    # when retention runs
    result = do_apply_retention(acme.tenant, now=now)
    # then the old memory is gone, its audit trail reduced to one delete event without its content
    assert result.memories == 1
    assert _contents(acme) == {"City: Hangzhou", "Coupon SPRING10"}
    with tenant_scope(acme.tenant):
        events = list(MemoryEvent.objects.for_tenant(acme.tenant).filter(memory_id=old.pk))
    assert [(e.kind, e.actor, e.before) for e in events] == [
        ("delete", "system", {"type": "user_profile", "key": "name"})
    ]
    # and the memory with the shorter lifetime is the existing cleanup's, which removes it
    assert do_cleanup_expired(acme.tenant, now=now).expired == 1
    assert _contents(acme) == {"City: Hangzhou"}


def test_superseded_history_older_than_its_retention_goes(acme):
    # given 7 days of history retention and an address replaced 20 days ago and again 2 days ago
    now = timezone.now()
    _retain(acme, history_retention_days=7)
    session = open_session_obj(acme, "alice")
    _profile(acme, session, "Address: 1 Harbour Road", key="address", now=now - timedelta(days=30))
    _profile(acme, session, "Address: 2 Harbour Road", key="address", now=now - timedelta(days=20))
    _profile(acme, session, "Address: 3 Harbour Road", key="address", now=now - timedelta(days=2))
    # when retention runs
    result = do_apply_retention(acme.tenant, now=now)
    # then the version replaced 20 days ago is gone; the one replaced 2 days ago and the current one stay
    assert result.history == 1
    assert _contents(acme) == {"Address: 2 Harbour Road", "Address: 3 Harbour Road"}


def test_a_tenant_without_retention_settings_keeps_everything(acme, globex):
    # given the same old data in both tenants, and retention set in acme only
    now = timezone.now()
    _retain(acme, message_retention_days=30, memory_retention_days=30)
    for ctx in (acme, globex):
        session = _old_session(ctx, "old-customer", now=now, days=400)
        _message(ctx, session, "hello from last year", at=now - timedelta(days=400))
        live = open_session_obj(ctx, "alice")
        _message(ctx, live, "hello", at=now - timedelta(days=100))
        _profile(ctx, live, "Name: Alice", key="name", now=now - timedelta(days=100))
    globex_before, acme_before = _counts(globex), _counts(acme)
    # when the job runs for every tenant
    results = {r.tenant: r for r in apply_retention_all(now=now)}
    # then acme lost its old rows and globex has every row it had
    assert _counts(globex) == globex_before
    assert results["globex"].messages == results["globex"].memories == results["globex"].sessions == 0
    assert _counts(acme)["Message"] == acme_before["Message"] - 2
    assert _counts(acme)["MemoryUnit"] == acme_before["MemoryUnit"] - 1
    assert _counts(acme)["ChatSession"] == acme_before["ChatSession"] - 1


@pytest.mark.parametrize("bad", [0, 5000, "30", True, 30.5, None])
def test_a_retention_setting_that_is_not_whole_days_in_bounds_deletes_nothing(acme, bad):
    # given retention settings written into the JSON by hand, wrongly
    now = timezone.now()
    _retain(acme, message_retention_days=bad, memory_retention_days=bad)
    session = open_session_obj(acme, "alice")
    _message(acme, session, "old", at=now - timedelta(days=4000))
    _profile(acme, session, "Name: Alice", key="name", now=now - timedelta(days=4000))
    before = _counts(acme)
    # when retention runs
    do_apply_retention(acme.tenant, now=now)
    # then nothing is deleted: a bad value means the default, which keeps
    assert _counts(acme) == before


def test_sessions_left_empty_and_over_are_deleted_and_others_stay(acme, staff):
    # given 30 days of message retention and four sessions with messages of 40 days ago: one closed, one
    # still open, one closed with a session memory, one closed with a staff read on record
    now = timezone.now()
    _retain(acme, message_retention_days=30)
    closed = _old_session(acme, "carol", now=now, days=40)
    still_open = open_session_obj(acme, "olivia")
    with_memory = _old_session(acme, "mike", now=now, days=40)
    write_memory(acme, with_memory, "Checkout step 2", type="session_state", key="step", embedding=VECTOR)
    read = _old_session(acme, "rita", now=now, days=40)
    for session in (closed, still_open, with_memory, read):
        _message(acme, session, f"hi from {session.pk}", at=now - timedelta(days=40))
    with tenant_scope(acme.tenant):
        StaffAccess.objects.create(
            tenant=acme.tenant, end_user_id=read.end_user_id, session=read, user=staff["agent_a"], what="conversation"
        )
    # when retention runs
    result = do_apply_retention(acme.tenant, now=now)
    # then every old message is gone, and so are the two closed sessions with nothing left
    assert result.messages == 4
    assert result.sessions == 2
    with tenant_scope(acme.tenant):
        left = set(ChatSession.objects.for_tenant(acme.tenant).values_list("pk", flat=True))
        access = StaffAccess.objects.for_tenant(acme.tenant).get()
    assert left == {still_open.pk, with_memory.pk}
    # and the staff read of a deleted session is still on record, for its end user
    assert (access.session_id, access.end_user_id, access.user_id) == (None, read.end_user_id, staff["agent_a"].pk)


def test_the_commands_dry_run_counts_and_deletes_nothing(acme):
    # given an old message and an old memory under retention
    now = timezone.now()
    _retain(acme, message_retention_days=30, memory_retention_days=30)
    session = open_session_obj(acme, "alice")
    _message(acme, session, "old", at=now - timedelta(days=40))
    _profile(acme, session, "Name: Alice", key="name", now=now - timedelta(days=40))
    before = _counts(acme)
    # when the command runs dry
    out = io.StringIO()
    call_command("apply_retention", "--tenant", "acme", "--dry-run", stdout=out)
    # then it says what it would delete, and deleted nothing
    assert "acme: would delete 1 messages, 0 sessions, 1 memories" in out.getvalue()
    assert _counts(acme) == before
    # and without --dry-run it deletes what it counted
    out = io.StringIO()
    call_command("apply_retention", "--tenant", "acme", stdout=out)
    assert "acme: deleted 1 messages, 0 sessions, 1 memories" in out.getvalue()
    assert _texts(acme) == set()
    assert _contents(acme) == set()


def test_the_retention_job_is_registered_with_procrastinate():
    # given procrastinate's app, as the worker loads it
    from procrastinate.contrib.django import app

    from chat.tasks import APPLY_RETENTION, RETENTION_CRON
    from memory.tasks import HEALTH_QUEUE

    # when we look the job up
    periodic = app.periodic_registry.periodic_tasks[(APPLY_RETENTION, "retention")]
    # then it runs hourly on a queue the worker listens on
    assert periodic.cron == RETENTION_CRON
    assert RETENTION_CRON.split()[1:] == ["*", "*", "*", "*"]
    assert periodic.task is app.tasks[APPLY_RETENTION]
    assert periodic.task.queue == HEALTH_QUEUE
    assert periodic.task.queue in _worker_queues()


def _worker_queues():
    from chat.management.commands import run_worker
    from chat.tools.batches import BATCH_QUEUE
    from memory.tasks import HEALTH_QUEUE

    with open(run_worker.__file__, encoding="utf-8") as source:
        assert "queues=[BATCH_QUEUE, HEALTH_QUEUE, IMPORT_QUEUE]" in source.read()
    return {BATCH_QUEUE, HEALTH_QUEUE}


@pytest.mark.django_db(transaction=True)
def test_one_run_of_the_job_applies_retention(acme, globex):
    from chat.tasks import apply_retention_task

    # given an old and a new message in acme, which keeps messages 30 days, and an old one in globex
    now = timezone.now()
    _retain(acme, message_retention_days=30)
    session = open_session_obj(acme, "alice")
    _message(acme, session, "old", at=now - timedelta(days=40))
    _message(acme, session, "new", at=now - timedelta(days=1))
    _message(globex, open_session_obj(globex, "gina"), "old", at=now - timedelta(days=40))
    # when the job runs once
    result = apply_retention_task(int(time.time()))
    # then acme's old message is gone, and globex keeps its own
    assert result["acme"]["messages"] == 1
    assert result["globex"]["messages"] == 0
    assert _texts(acme) == {"new"}
    assert _texts(globex) == {"old"}
    with operator_scope():
        assert Message.objects.unscoped(reason="test: both tenants' messages").count() == 2
