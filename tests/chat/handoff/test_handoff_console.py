"""The staff console page: staff only, and nothing inline that its Content-Security-Policy would refuse."""

from __future__ import annotations

import re

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db(transaction=True)


def _page(user):
    client = Client()
    if user is not None:
        client.force_login(user)
    return client.get("/staff/console/")


def test_staff_get_the_console_under_a_strict_csp(staff):
    # when
    response = _page(staff["agent_a"])
    # then
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="mdk-console"' in html
    assert "memdesk/console.js" in html
    policy = response["Content-Security-Policy"]
    script_src = re.search(r"script-src ([^;]*)", policy).group(1)
    assert "'unsafe-inline'" not in script_src
    # no inline handler attributes, no javascript: URLs, every inline <script> carries the nonce
    assert not re.search(r"\son[a-z]+\s*=", html)
    assert "javascript:" not in html
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert "src=" in tag or "nonce=" in tag, tag


def test_anyone_else_is_sent_to_the_login(db):
    # when
    response = _page(None)
    # then
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_the_admin_lists_ratings_per_tenant_and_staff_member(acme, globex, staff):
    # given: a rating of each tenant, acme's handled by its agent
    from chat.handoff import state as handoff
    from conversations.models import ChatSession
    from tenants.rls import tenant_scope
    from tests.factories import open_session_obj

    rated = {}
    for ctx in (acme, globex):
        session = open_session_obj(ctx, f"rated-{ctx.tenant.slug}")
        with tenant_scope(ctx.tenant):
            ChatSession.objects.for_tenant(ctx.tenant).filter(pk=session.pk).update(staff_involved=True)
            session.refresh_from_db()
        if ctx is acme:
            handoff.do_request_handoff(acme.tenant, session, trigger="api", reason="test")
            handoff.do_claim(acme.tenant, session, staff["agent_a"])
        rated[ctx.tenant.slug] = handoff.do_rate(ctx.tenant, session, 4, "")
    # when
    client = Client()
    client.force_login(staff["agent_a"])
    page = client.get("/admin/conversations/sessionrating/")
    # then
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="rating-summary"' in html
    assert "agent_a" in html
    assert "globex" not in html
    assert rated["acme"].staff == staff["agent_a"]
