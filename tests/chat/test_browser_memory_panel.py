"""The "What we remember about you" panel in a real headless Chromium: the end user reads what memdesk remembers,
corrects one fact and forgets another, on the chat page and in the widget on a tenant's site, under their CSPs."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from conversations.models import ChatSession
from tenants.rls import tenant_scope
from tests.browser_kit import TENANT_SITE, chromium_page, needs_chromium
from tests.factories import TenantCtx, open_session, write_memory

pytestmark = [pytest.mark.django_db(transaction=True), needs_chromium]


def _session(ctx: TenantCtx, end_user: str) -> tuple[dict[str, Any], ChatSession]:
    opened = open_session(ctx, end_user)
    with tenant_scope(ctx.tenant):
        return opened, ChatSession.objects.for_tenant(ctx.tenant).get(pk=opened["session_id"])


def _two_memories(ctx: TenantCtx, session: ChatSession) -> None:
    write_memory(
        ctx, session, "用户手机号：13812345678", type="user_profile", key="phone", data={"phone": "13812345678"}
    )
    write_memory(
        ctx, session, "用户地址：北京市朝阳区建国路88号", type="user_profile", key="address",
        data={"address": "北京市朝阳区建国路88号"},
    )  # fmt: skip


def _panel_texts(page: Any) -> list[str]:
    page.wait_for_selector(".mdm[data-loaded='1']", timeout=15000)
    return [text.strip() for text in page.locator(".mdm-text").all_text_contents()]


def _stored(ctx: TenantCtx, session_id: str) -> dict[str, bool]:
    """Every version of the session's end user's memories over the tenant's API: content → expired."""
    ctx.client.credentials(HTTP_AUTHORIZATION=f"Bearer {ctx.api_key}", HTTP_X_SESSION_ID=session_id)
    body = ctx.client.get("/api/v1/memories?include_expired=true").json()
    return {m["content"]: m["expired"] for m in body["memories"]}


def test_the_end_user_corrects_one_fact_and_forgets_another_on_the_chat_page(acme, asgi_server):
    # given alice with two memories, and bob with one of his own
    opened, session = _session(acme, "alice")
    _two_memories(acme, session)
    bob_opened, bob = _session(acme, "bob")
    write_memory(acme, bob, "用户姓名：李四", type="user_profile", key="name", data={"name": "李四"})
    with chromium_page() as (page, _console):
        page.goto(f"{asgi_server}/chat/?session_id={opened['session_id']}&token={opened['token']}&lang=zh")
        # when she opens the panel
        page.click("summary:text('我们记得的关于您的信息')")
        # then she reads both facts in plain words, her phone masked
        assert sorted(_panel_texts(page)) == ["用户地址：北京市朝阳区建国路88号", "用户手机号：138****5678"]
        # when she says the phone is wrong and gives the right one
        phone = page.locator(".mdm-item", has_text="用户手机号")
        phone.locator(".mdm-wrong").click()
        phone.locator(".mdm-input").fill("13900001111")
        phone.locator(".mdm-save").click()
        page.wait_for_selector(".mdm-text:text('139****1111')", timeout=15000)
        # and forgets the address
        page.locator(".mdm-item", has_text="用户地址").locator(".mdm-forget").click()
        page.wait_for_selector(".mdm-text:text('用户地址')", state="detached", timeout=15000)
        # then the panel shows what memdesk now remembers, and the browser reported no CSP violation
        assert _panel_texts(page) == ["用户手机号：139****1111"]
        assert page.evaluate("window.__csp") == []
        assert page.locator(".mdm-switch").is_hidden()  # acme does not let its end users turn memory off
        # and bob's panel never shows alice's memories
        page.goto(f"{asgi_server}/chat/?session_id={bob_opened['session_id']}&token={bob_opened['token']}&lang=zh")
        page.click("summary:text('我们记得的关于您的信息')")
        assert _panel_texts(page) == ["用户姓名：李四"]
    # and the tenant's API agrees: the phone has a new version (the old one kept, expired), the address is expired
    assert _stored(acme, opened["session_id"]) == {
        "用户手机号：13812345678": True,
        "用户手机号：13900001111": False,
        "用户地址：北京市朝阳区建国路88号": True,
    }
    assert _stored(acme, bob_opened["session_id"]) == {"用户姓名：李四": False}


def test_the_widget_on_a_tenant_site_shows_the_panel_in_english(acme, asgi_server):
    # given a tenant's site allowed to embed the widget, whose CSP lets memdesk's script and calls through
    acme.tenant.allowed_origins = [TENANT_SITE]
    acme.tenant.save(update_fields=["allowed_origins"])
    opened, session = _session(acme, "widget-user")
    _two_memories(acme, session)
    ws_origin = asgi_server.replace("http://", "ws://")
    site_policy = (
        f"default-src 'self'; script-src 'self' {asgi_server}; connect-src 'self' {asgi_server} {ws_origin}; "
        "style-src 'self'"
    )
    html = (
        f'<!doctype html><html><head><title>Shop</title></head><body><h1>Shop</h1><script src="{asgi_server}/widget.js"'
        f' data-session-id="{opened["session_id"]}" data-token="{opened["token"]}" data-lang="en" async></script>'
        "</body></html>"
    )
    headers = {"Content-Type": "text/html", "Content-Security-Policy": site_policy}
    # The tenant's site is public and memdesk on loopback here; Chromium's local-network-access block would
    # refuse the widget for that test-only reason (as in test_browser_csp.py).
    with chromium_page("--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests") as (
        page,
        _console,
    ):
        page.route(f"{TENANT_SITE}/", lambda route: route.fulfill(status=200, body=html, headers=headers))
        page.goto(f"{TENANT_SITE}/")
        # when the visitor opens the panel and forgets the address
        page.click("summary:text('What we remember about you')", timeout=15000)
        assert sorted(_panel_texts(page)) == ["用户地址：北京市朝阳区建国路88号", "用户手机号：138****5678"]
        page.locator(".mdm-item", has_text="用户地址").locator(".mdm-forget:text('Forget this')").click()
        page.wait_for_selector(".mdm-text:text('用户地址')", state="detached", timeout=15000)
        # then it is gone, across origins, with no CSP violation on the tenant's page
        assert _panel_texts(page) == ["用户手机号：138****5678"]
        assert page.evaluate("window.__csp") == []
    assert _stored(acme, opened["session_id"])["用户地址：北京市朝阳区建国路88号"] is True


def test_the_end_user_turns_memory_off_with_the_switch(acme, asgi_server):
    # given a tenant that lets its end users choose, and alice with a remembered phone
    acme.tenant.settings = {**acme.tenant.settings, "end_user_memory": "end_user_choice"}
    acme.tenant.save(update_fields=["settings"])
    opened, session = _session(acme, "alice")
    _two_memories(acme, session)
    with chromium_page() as (page, _console):
        page.goto(f"{asgi_server}/chat/?session_id={opened['session_id']}&token={opened['token']}&lang=en")
        page.click("summary:text('What we remember about you')")
        _panel_texts(page)
        assert page.locator(".mdm-toggle").is_checked()
        # when she unticks "Remember things about me"
        page.locator(".mdm-toggle").uncheck()
        # then the panel says memory is off, and her switch is stored
        page.wait_for_selector(".mdm-note:text('nothing new about you is remembered')", timeout=15000)
        assert page.evaluate("window.__csp") == []
    client = APIClient()
    client.credentials(HTTP_X_SESSION_ID=opened["session_id"], HTTP_X_SESSION_TOKEN=opened["token"])
    assert client.get("/api/v1/me/memories").json()["memory_enabled"] is False
