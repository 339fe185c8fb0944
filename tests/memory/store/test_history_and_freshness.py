"""History is kept; health counts what is current; the scrape only reads (issue #18 item 2, S4 and S8)."""

from __future__ import annotations

import re
import time
from datetime import timedelta
from functools import partial

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory.models import MemoryEvent, MemoryHealth, MemoryUnit
from memory.store import health
from memory.store.lifecycle import history_retention
from tenants.models import Tenant
from tenants.rls import operator_scope, tenant_scope
from tests.factories import open_session_obj, write_memory

VECTOR = [0.0] * 383 + [1.0]
DAY = 86400


# A profile memory for a year unless a test says otherwise (``write_memory``'s keywords override these).
_profile = partial(write_memory, type="user_profile", expires_in=365 * DAY, embedding=VECTOR)


def _stored(tenant):
    """The figures the periodic job stored for ``tenant`` (None if none)."""
    with operator_scope():
        return MemoryHealth.objects.unscoped(reason="test: the job's stored figures").filter(tenant=tenant).first()


def _rows(ctx):
    with tenant_scope(ctx.tenant):
        return MemoryUnit.objects.for_tenant(ctx.tenant).count()


def test_a_hundred_replaces_of_one_key_leave_the_tenant_healthy(acme):
    """S8: "Freshness = valid / total (healthy > 85%; below that a cleanup is triggered)." — over the
    memories meant to be current: a replaced version is history, not staleness."""
    # given one key replaced 100 times (what a 100-step batch's progress memory goes through)
    session = open_session_obj(acme, "alice")
    for i in range(100):
        _profile(acme, session, f"Delivery address: {i} Harbour Road", key="address")
    # when the periodic job computes the tenant's health
    result = health.do_refresh_health(acme.tenant)
    # then the tenant is healthy, and the 99 superseded versions are all still there
    assert result.freshness_ratio == 1.0
    assert result.status == "ok"
    assert result.memories == {"total": 1, "valid": 1, "expired": 0}
    assert result.superseded == 99
    assert _rows(acme) == 100


def test_an_expired_current_memory_still_counts_as_stale(acme):
    """S8: "Freshness = valid / total (healthy > 85%; below that a cleanup is triggered)." — a memory meant
    to be current that has expired is staleness, as before."""
    # given 1 live memory, 1 expired one and 5 superseded versions of a third
    session = open_session_obj(acme, "alice")
    _profile(acme, session, "Name: Alice")
    _profile(acme, session, "Coupon SPRING10", now=timezone.now() - timedelta(days=2), expires_in=60)
    for i in range(6):
        _profile(acme, session, f"Phone: 1391234567{i}", key="phone")
    # when
    result = health.tenant_health(acme.tenant)
    # then freshness is 2 valid of 3 current; the superseded versions count nowhere
    assert result.memories == {"total": 3, "valid": 2, "expired": 1}
    assert result.freshness_ratio == pytest.approx(0.6667)
    assert result.superseded == 5


def test_cleanup_keeps_superseded_versions_for_the_retention_and_as_of_answers_them(acme):
    """S4: "every recall takes `as_of` (default now) and returns only memories with
    `created_at ≤ as_of < expires_at`. A cleanup job removes or archives expired ones." — a superseded
    version younger than the tenant's retention is history that ``as_of`` answers from; past it, it goes."""
    # given a tenant keeping history 30 days, and an address that changed 40 and 10 days ago
    acme.tenant.settings = {**acme.tenant.settings, "history_retention_days": 30}
    acme.tenant.save()
    session = open_session_obj(acme, "alice")
    now = timezone.now()
    first = _profile(acme, session, "Address: 1 Old Road", key="address", now=now - timedelta(days=50))
    march = _profile(acme, session, "Address: 2 March Street", key="address", now=now - timedelta(days=40))
    current = _profile(acme, session, "Address: 3 Current Avenue", key="address", now=now - timedelta(days=10))
    coupon = _profile(acme, session, "Coupon SPRING10", now=now - timedelta(days=3), expires_in=DAY)
    # when the periodic job runs its (first, so due) cleanup
    health.do_refresh_health(acme.tenant)
    # then the version replaced 40 days ago and the expired coupon are gone; the one replaced 10 days ago stays
    with tenant_scope(acme.tenant):
        left = set(MemoryUnit.objects.for_tenant(acme.tenant).values_list("pk", flat=True))
        notes = dict(MemoryEvent.objects.for_tenant(acme.tenant).filter(kind="delete").values_list("memory_id", "note"))
    assert left == {march.pk, current.pk}
    assert notes == {
        first.pk: "cleanup of a superseded version past its retention",
        coupon.pk: "cleanup of expired memory",
    }
    # and as_of a moment in that period answers with the address of then
    acme.client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}", HTTP_X_SESSION_ID=str(session.pk))
    then = (now - timedelta(days=20)).isoformat()
    body = acme.client.get("/api/v1/memories", {"as_of": then}).json()
    assert [m["content"] for m in body["memories"]] == ["Address: 2 March Street"]
    before = (now - timedelta(days=45)).isoformat()
    assert acme.client.get("/api/v1/memories", {"as_of": before}).json()["memories"] == []


@pytest.mark.parametrize(
    ("setting", "days"),
    [(None, 90), (7, 7), (3650, 3650), (0, 90), (3651, 90), ("30", 90), (True, 90), (2.5, 90)],
)
def test_history_retention_is_a_tenant_setting_with_a_safe_default(acme, setting, days):
    """S4: "A cleanup job removes or archives expired ones." — superseded versions are kept
    ``history_retention_days`` (1–3650, default 90); a bad value falls back to the default."""
    acme.tenant.settings = {} if setting is None else {"history_retention_days": setting}
    assert history_retention(acme.tenant) == timedelta(days=days)


def test_a_metrics_scrape_only_reads_and_serves_the_stored_figures(client, acme):
    """S8: "Freshness = valid / total (healthy > 85%; below that a cleanup is triggered). […] `/memory/health`
    JSON and Prometheus metrics" — the figures are the periodic job's; the unauthenticated scrape computes
    nothing and never cleans up."""
    # given figures stored by the job (2 valid of 3 current; the cleanup not due: it just ran)
    session = open_session_obj(acme, "alice")
    _profile(acme, session, "Name: Alice")
    _profile(acme, session, "Plan: gold")
    _profile(acme, session, "Coupon SPRING10", now=timezone.now() - timedelta(days=2), expires_in=60)
    Tenant.objects.filter(pk=acme.tenant.pk).update(last_cleanup_at=timezone.now())
    health.do_refresh_health(acme.tenant)
    stored = _stored(acme.tenant)
    # and since then two more expired memories, and a cleanup that would be due
    for content in ("Coupon SUMMER5", "Coupon AUTUMN7"):
        _profile(acme, session, content, now=timezone.now() - timedelta(days=2), expires_in=60)
    Tenant.objects.filter(pk=acme.tenant.pk).update(last_cleanup_at=None)
    # when Prometheus scrapes
    with CaptureQueriesContext(connection) as queries:
        text = client.get("/metrics").content.decode()
    # then it served the stored figures, not live ones (2/5 = 0.4) ...
    assert stored.freshness_ratio == pytest.approx(0.6667)
    assert 'memdesk_memory_freshness_ratio{tenant="acme"} 0.6667' in text
    assert re.search(r'memdesk_memory_health_computed_timestamp_seconds\{tenant="acme"\} [0-9.e+]+', text)
    # ... and wrote nothing: no statement that changes a row, every memory still there, no cleanup claimed
    writes = [q["sql"] for q in queries.captured_queries if re.match(r"\s*(INSERT|UPDATE|DELETE)", q["sql"], re.I)]
    assert writes == []
    assert _rows(acme) == 5
    assert Tenant.objects.get(pk=acme.tenant.pk).last_cleanup_at is None
    assert _stored(acme.tenant).computed_at == stored.computed_at


def test_the_periodic_job_is_registered_with_procrastinate():
    """S8: "Freshness = valid / total (healthy > 85%; below that a cleanup is triggered)." — the worker
    triggers it: a periodic task every minute on a queue ``run_worker`` listens on."""
    from procrastinate.contrib.django import app

    from memory.tasks import HEALTH_QUEUE, REFRESH_HEALTH

    periodic = app.periodic_registry.periodic_tasks[(REFRESH_HEALTH, "memory-health")]
    assert periodic.cron == "* * * * *"
    assert periodic.task is app.tasks[REFRESH_HEALTH]
    assert periodic.task.queue == HEALTH_QUEUE
    run_worker = (health.__file__.rsplit("/memory/", 1)[0]) + "/chat/management/commands/run_worker.py"
    with open(run_worker, encoding="utf-8") as source:
        assert "queues=[BATCH_QUEUE, HEALTH_QUEUE, IMPORT_QUEUE]" in source.read()


@pytest.mark.django_db(transaction=True)
def test_one_run_of_the_periodic_job_updates_the_stored_figures(acme, globex):
    """S8: "Freshness = valid / total (healthy > 85%; below that a cleanup is triggered)." — one run computes
    every tenant's figures, stores them and runs the cleanup that is due."""
    from memory.tasks import refresh_health_task

    # given figures from an earlier run, then an expired memory in acme
    session = open_session_obj(acme, "alice")
    _profile(acme, session, "Name: Alice")
    Tenant.objects.update(last_cleanup_at=timezone.now())
    refresh_health_task(int(time.time()))
    earlier = _stored(acme.tenant)
    _profile(acme, session, "Coupon SPRING10", now=timezone.now() - timedelta(days=2), expires_in=60)
    # when the job runs once more
    result = refresh_health_task(int(time.time()))
    # then both tenants' figures are stored, acme's are new (1 valid of 2: degraded, cleanup in cooldown)
    assert result == {"acme": "degraded", "globex": "ok"}
    assert _stored(globex.tenant).status == "ok"
    now = _stored(acme.tenant)
    assert now.computed_at > earlier.computed_at
    assert (now.freshness_ratio, now.current, now.valid, now.status) == (0.5, 2, 1, "degraded")
    # and once the cooldown has passed, the next run cleans up and stores the healthy figures
    Tenant.objects.filter(pk=acme.tenant.pk).update(last_cleanup_at=timezone.now() - timedelta(hours=1))
    assert refresh_health_task(int(time.time()))["acme"] == "ok"
    after = _stored(acme.tenant)
    assert (after.freshness_ratio, after.current, after.valid) == (1.0, 1, 1)
