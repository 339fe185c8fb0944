"""The chat page, the widget on a tenant's site and the admin login keep working under a strict
Content-Security-Policy, in a real headless Chromium, with no violation reported."""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser_kit import TENANT_SITE, chromium_page, needs_chromium, violations
from tests.factories import open_session

pytestmark = [pytest.mark.django_db(transaction=True), needs_chromium]


def test_the_chat_page_sends_and_streams_under_its_csp(acme, fake_ollama, asgi_server):
    from testkit.fake_ollama import Reply

    # given: the chat page of a session, served with memdesk's policy
    opened = open_session(acme, "csp-user")
    fake_ollama.script(Reply(deltas=["您好", "，已", "收到。"], token_delay_s=0.02))
    with chromium_page() as (page, console):
        _chat_page_sends_and_streams(page, console, asgi_server, opened)


def _chat_page_sends_and_streams(page: Any, console: list[str], asgi_server: str, opened: dict[str, Any]) -> None:
    response = page.goto(f"{asgi_server}/chat/?session_id={opened['session_id']}&token={opened['token']}&lang=zh")
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy
    assert "script-src 'self' 'nonce-" in policy
    assert "unsafe-inline" not in policy.split("style-src-attr")[0]
    assert f"ws://{asgi_server.removeprefix('http://')}" in policy
    page.wait_for_selector(".mdk-status:text('已连接')", timeout=15000)
    # when: a message is sent
    page.fill(".mdk-input", "你好")
    page.press(".mdk-input", "Enter")
    # then: the reply streams in, the styles apply, and the browser reported no violation
    done = page.wait_for_selector(".mdk-assistant[data-done='1']", timeout=30000)
    assert done.text_content() == "您好，已收到。"
    assert page.eval_on_selector(".mdk-send", "b => getComputedStyle(b).backgroundColor") == "rgb(31, 136, 61)"
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(246, 248, 250)"
    assert violations(page, console) == []


def test_an_injected_inline_script_is_blocked(acme, asgi_server):
    # given: the chat page
    opened = open_session(acme, "csp-injected")
    with chromium_page() as (page, _console):
        page.goto(f"{asgi_server}/chat/?session_id={opened['session_id']}&token={opened['token']}")
        # when: a script without the nonce gets into the page (what an XSS would do)
        page.evaluate(
            "() => { const s = document.createElement('script'); s.textContent = 'window.__pwned = 1';"
            " document.body.appendChild(s); }"
        )
        # then: it does not run, and the browser says why
        page.wait_for_function("window.__csp.length > 0", timeout=5000)
        assert page.evaluate("window.__pwned === undefined")
        assert any(v.startswith("script-src") for v in page.evaluate("window.__csp"))


def test_the_widget_works_on_a_tenant_site_with_a_strict_csp(acme, fake_ollama, asgi_server):
    from testkit.fake_ollama import Reply

    # given: a tenant's site that allows scripts and connections only to itself and memdesk, and no inline style
    acme.tenant.allowed_origins = [TENANT_SITE]
    acme.tenant.save(update_fields=["allowed_origins"])
    opened = open_session(acme, "widget-user")
    fake_ollama.script(Reply(deltas=["Hello", " from", " the widget."], token_delay_s=0.02))
    ws_origin = asgi_server.replace("http://", "ws://")
    site_policy = (
        f"default-src 'self'; script-src 'self' {asgi_server}; connect-src 'self' {ws_origin}; style-src 'self'"
    )
    html = (
        f'<!doctype html><html><head><title>Shop</title></head><body><h1>Shop</h1><script src="{asgi_server}/widget.js"'
        f' data-session-id="{opened["session_id"]}" data-token="{opened["token"]}" data-lang="en" async></script>'
        "</body></html>"
    )
    headers = {"Content-Type": "text/html", "Content-Security-Policy": site_policy}
    # The tenant's site is public and memdesk on loopback here; deployed, both are public. Chromium's
    # local-network-access block would refuse the widget for that test-only reason.
    with chromium_page("--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests") as (
        page,
        console,
    ):
        page.route(f"{TENANT_SITE}/", lambda route: route.fulfill(status=200, body=html, headers=headers))
        page.goto(f"{TENANT_SITE}/")
        page.wait_for_selector(".mdk-status:text('Connected')", timeout=15000)
        # when
        page.fill(".mdk-input", "hello")
        page.press(".mdk-input", "Enter")
        # then
        done = page.wait_for_selector(".mdk-assistant[data-done='1']", timeout=30000)
        assert done.text_content() == "Hello from the widget."
        assert page.eval_on_selector(".mdk-send", "b => getComputedStyle(b).backgroundColor") == "rgb(31, 136, 61)"
        assert violations(page, console) == []


def test_the_admin_login_page_reports_no_violation(asgi_server):
    with chromium_page() as (page, console):
        response = page.goto(f"{asgi_server}/admin/login/")
        assert "default-src 'self'" in response.headers["content-security-policy"]
        page.wait_for_selector("input[name='username']")
        assert violations(page, console) == []
