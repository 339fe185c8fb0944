"""Memory health (S8): freshness, hit rate, amnesia, /memory/health, /metrics, cleanup."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from conversations.models import Message
from memory.models import MemoryUnit
from memory.store import health
from tenants.models import Tenant
from tenants.rls import tenant_scope
from tests.factories import open_session, open_session_obj, write_memory


def _facts(ctx, session, n, *, expired=False):
    """``n`` facts of ``session``, live for a day or expired two days ago."""
    past = timezone.now() - timedelta(days=2)
    for i in range(n):
        write_memory(
            ctx, session, f"fact {i} {'old' if expired else 'new'}",
            expires_in=60 if expired else 86400, now=past if expired else None, embedding=[0.0] * 383 + [1.0],
        )  # fmt: skip


def _reply(ctx, session, recalled, used):
    with tenant_scope(ctx.tenant):
        Message.objects.create(
            tenant=ctx.tenant, session=session, role="assistant", text="…", seq=1,
            data={"recalled": [str(i) for i in range(recalled)], "used": [str(i) for i in range(used)]},
        )  # fmt: skip


def test_freshness_and_hit_rate_on_known_data(acme):
    session = open_session_obj(acme, "alice")
    _facts(acme, session, 9)
    _facts(acme, session, 1, expired=True)
    _reply(acme, session, recalled=10, used=7)
    _reply(acme, session, recalled=10, used=9)
    result = health.tenant_health(acme.tenant)
    assert result.freshness_ratio == pytest.approx(0.9)
    assert result.memories == {"total": 10, "valid": 9, "expired": 1}
    assert result.hit_rate == pytest.approx(0.8)
    assert result.status == "ok"


def test_low_hit_rate_is_degraded(acme):
    session = open_session_obj(acme, "alice")
    _reply(acme, session, recalled=10, used=6)
    assert health.tenant_health(acme.tenant).status == "degraded"


def test_health_endpoint_per_tenant_shows_no_other_tenant(acme, globex):
    a = open_session_obj(acme, "alice")
    g = open_session_obj(globex, "gina")
    _facts(acme, a, 3)
    _facts(globex, g, 1)
    _facts(globex, g, 4, expired=True)
    body = acme.client.get("/memory/health").json()
    assert set(body) == {"tenant", "freshness_ratio", "hit_rate", "memories", "amnesia_alerts", "status"}
    assert body["memories"] == {"total": 3, "valid": 3, "expired": 0}
    assert body["status"] == "ok"
    other = globex.client.get("/memory/health").json()
    assert other["memories"] == {"total": 5, "valid": 1, "expired": 4}
    assert other["freshness_ratio"] == pytest.approx(0.2)
    assert other["status"] == "degraded"


def test_health_endpoint_for_staff_lists_their_tenants(staff, acme, globex):
    client = Client()
    client.force_login(staff["root"])
    body = client.get("/memory/health").json()
    assert {t["tenant"] for t in body["tenants"]} == {"acme", "globex"}
    client.force_login(staff["owner_a"])
    assert [t["tenant"] for t in client.get("/memory/health").json()["tenants"]] == ["acme"]


def test_health_endpoint_refuses_anonymous(anon_client, db):
    response = anon_client.get("/memory/health")
    assert response.status_code == 401


def test_cleanup_fires_once_below_85_percent(acme):
    session = open_session_obj(acme, "alice")
    _facts(acme, session, 5)
    _facts(acme, session, 5, expired=True)
    first = health.maybe_cleanup(acme.tenant, health.tenant_health(acme.tenant))
    assert first == 5
    with tenant_scope(acme.tenant):
        assert MemoryUnit.objects.for_tenant(acme.tenant).count() == 5
    # freshness is healthy again, and even if it dropped the cooldown holds
    _facts(acme, session, 5, expired=True)
    second = health.maybe_cleanup(acme.tenant, health.tenant_health(acme.tenant))
    assert second is None
    Tenant.objects.filter(pk=acme.tenant.pk).update(last_cleanup_at=timezone.now() - timedelta(hours=1))
    third = health.maybe_cleanup(acme.tenant, health.tenant_health(acme.tenant))
    assert third == 5


def test_metrics_expose_every_memdesk_metric(client, acme):
    session = open_session_obj(acme, "alice")
    _facts(acme, session, 2)
    health.refresh_all()  # the worker's periodic job stores the figures the scrape serves
    text = client.get("/metrics").content.decode()
    for name in (
        "memdesk_memory_freshness_ratio", "memdesk_memory_hit_rate", "memdesk_amnesia_alerts_total",
        "memdesk_recall_latency_seconds", "memdesk_prompt_tokens", "memdesk_ollama_ttft_seconds",
        "memdesk_ollama_latency_seconds", "memdesk_ollama_errors_total", "memdesk_tool_calls_total",
        "memdesk_websocket_connections", "memdesk_batch_items_total", "memdesk_memory_cleanup_total",
        "memdesk_turn_overhead_seconds", "memdesk_turn_stage_seconds",
        "memdesk_memory_health_computed_timestamp_seconds",
    ):  # fmt: skip
        assert f"# TYPE {name.removesuffix('_total')}" in text, name
    assert 'memdesk_memory_freshness_ratio{tenant="acme"} 1.0' in text


@pytest.mark.django_db(transaction=True)
def test_amnesia_alert_fires_on_exactly_the_third_empty_turn_with_a_phrase(acme, fake_ollama):
    from memory.models import AmnesiaAlert

    sid = open_session(acme, "forgetful")["session_id"]
    fake_ollama.default_reply = "抱歉，我不太记得了，请再说一遍。"

    def alerts():
        with tenant_scope(acme.tenant):
            return AmnesiaAlert.objects.for_tenant(acme.tenant).count()

    # two empty-recall turns with the phrase: not yet
    for text in ("嗯", "啊"):
        assert acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": text}, format="json").status_code == 200
        assert alerts() == 0
    # the third fires
    acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "哦"}, format="json")
    assert alerts() == 1
    # the fourth in the same streak does not fire again
    acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "呃"}, format="json")
    assert alerts() == 1
    assert acme.client.get("/memory/health").json()["amnesia_alerts"] == 1


@pytest.mark.django_db(transaction=True)
def test_no_amnesia_alert_without_the_phrase(acme, fake_ollama):
    from memory.models import AmnesiaAlert

    sid = open_session(acme, "fine")["session_id"]
    fake_ollama.default_reply = "好的，明白了。"
    for text in ("嗯", "啊", "哦", "呃"):
        acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": text}, format="json")
    with tenant_scope(acme.tenant):
        assert AmnesiaAlert.objects.for_tenant(acme.tenant).count() == 0
