"""A page that shows one tenant's data shows its times in the tenant's time zone; stored times stay UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from django.test import Client

from conversations.models import ChatSession
from tenants.local_time import tenant_timezone
from tenants.models import Tenant
from tenants.rls import tenant_scope
from tests.factories import open_session_obj


def test_the_time_zone_is_the_tenants_then_its_business_hours_then_utc():
    # given
    own = Tenant(settings={"timezone": "Asia/Shanghai", "business_hours": {"timezone": "Europe/Paris"}})
    hours = Tenant(settings={"business_hours": {"timezone": "Europe/Paris"}})
    broken = Tenant(settings={"timezone": "Mars/Olympus"})
    # then
    assert tenant_timezone(own) == ZoneInfo("Asia/Shanghai")
    assert tenant_timezone(hours) == ZoneInfo("Europe/Paris")
    assert tenant_timezone(broken) is UTC
    assert tenant_timezone(Tenant()) is UTC


def test_the_live_view_shows_a_session_in_its_tenants_time(acme, staff):
    # given acme works in Shanghai, and a session last active at 01:30 UTC
    Tenant.objects.filter(pk=acme.tenant.pk).update(settings={"timezone": "Asia/Shanghai"})
    session = open_session_obj(acme, "alice")
    with tenant_scope(acme.tenant):
        ChatSession.objects.for_tenant(acme.tenant).filter(pk=session.pk).update(
            last_activity_at=datetime(2030, 5, 1, 1, 30, tzinfo=UTC), expires_at=datetime(2030, 5, 2, tzinfo=UTC)
        )
    client = Client()
    client.force_login(staff["agent_a"])
    # when
    html = client.get("/staff/sessions/").content.decode()
    # then: 9:30 in Shanghai, and the zone is named
    assert "May 1, 2030, 9:30 a.m. (Asia/Shanghai)" in html
    with tenant_scope(acme.tenant):
        stored = ChatSession.objects.for_tenant(acme.tenant).get(pk=session.pk).last_activity_at
    assert stored == datetime(2030, 5, 1, 1, 30, tzinfo=UTC)


def test_the_tenant_form_refuses_a_time_zone_that_does_not_exist(staff, acme):
    # given acme's owner
    client = Client()
    client.force_login(staff["owner_a"])
    url = f"/admin/tenants/tenant/{acme.tenant.pk}/change/"
    form = {
        "slug": "acme", "name": "Acme", "agent_role": "", "allowed_origins": "[]", "language": "zh",
        "settings": '{"timezone": "Mars/Olympus"}', "send_legacy_signature": "on",
        "message_retention_days": "", "memory_retention_days": "", "history_retention_days": "",
    }  # fmt: skip
    # when
    response = client.post(url, form)
    # then
    assert response.status_code == 200
    assert "timezone must be a time zone name such as Asia/Shanghai" in response.content.decode()
    assert "timezone" not in Tenant.objects.get(pk=acme.tenant.pk).settings
