"""The whole single sign-on in a real headless Chromium: memdesk under uvicorn, the provider on loopback, the
admin login page's button, the provider's redirect back, and the admin showing the claimed tenant only."""

from __future__ import annotations

import pytest

from tests.browser_kit import WATCH_VIOLATIONS, launch_chromium, needs_chromium
from tests.factories import open_session_obj, write_memory

pytestmark = [pytest.mark.django_db(transaction=True), needs_chromium]


@pytest.fixture
def memdesk_server(asgi_server: str) -> str:
    """memdesk under uvicorn (the kit's asgi_server), named apart from the provider's server."""
    return asgi_server


def test_a_staff_member_signs_in_with_the_button_and_sees_their_tenant(acme, globex, provider, memdesk_server):
    from playwright.sync_api import sync_playwright

    # given a person in acme's owner group at the provider
    provider.account.groups = ["memdesk:acme:owner"]
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
        page.goto(f"{memdesk_server}/admin/login/?next=/admin/tenants/tenant/")

        # when they press "Sign in with single sign-on" (the provider approves at once)
        page.click("text=Sign in with single sign-on")
        page.wait_for_url(f"{memdesk_server}/admin/tenants/tenant/", timeout=15000)

        # then they are in the admin's tenant list, which shows acme and not globex
        html = page.content()
        assert f"/admin/tenants/tenant/{acme.tenant.pk}/change/" in html
        assert f"/admin/tenants/tenant/{globex.tenant.pk}/change/" not in html
        assert "Alice" in page.text_content("#user-tools")  # the given_name claim
        assert ("GET", "/authorize") in provider.requests
        assert ("POST", "/token") in provider.requests
        browser.close()


def test_a_chinese_staff_member_signs_in_sees_only_their_tenants_memories_and_loses_access_with_the_claim(
    acme, globex, provider, memdesk_server
):
    from playwright.sync_api import sync_playwright

    # given a memory in each tenant, and a person in acme's agent group, on a browser set to Simplified Chinese
    write_memory(acme, open_session_obj(acme, "wang"), "客户偏好顺丰快递，工作日白天送货")
    write_memory(globex, open_session_obj(globex, "smith"), "Customer prefers deliveries after 6 pm")
    provider.account.groups = ["memdesk:acme:agent"]
    with sync_playwright() as p:
        browser = launch_chromium(p)
        context = browser.new_context(locale="zh-CN")
        page = context.new_page()
        page.add_init_script(WATCH_VIOLATIONS)

        # when they sign in with the button from acme's memory list
        page.goto(f"{memdesk_server}/admin/login/?next=/admin/memory/memoryunit/")
        page.click("#content a[href^='/oidc/authenticate/']")
        page.wait_for_url(f"{memdesk_server}/admin/memory/memoryunit/", timeout=15000)
        chinese_lang = page.get_attribute("html", "lang")
        memories_zh = page.text_content("#content")
        # and switch the admin to English
        page.click("#mdk-language button[value='en']")
        page.wait_for_selector("html[lang='en']", timeout=15000)
        memories_en = page.text_content("#content")
        violations = page.evaluate("window.__csp")

        # and, after the identity provider removed their group, sign in again
        provider.account.groups = []
        context.clear_cookies()
        page.goto(f"{memdesk_server}/admin/login/?next=/admin/memory/memoryunit/")
        page.click("#content a[href^='/oidc/authenticate/']")
        page.wait_for_url(f"{memdesk_server}/admin/login/**", timeout=15000)
        refused = page.text_content("body")
        page.goto(f"{memdesk_server}/admin/memory/memoryunit/")
        after = page.url
        browser.close()

    # then the admin was Chinese, showed acme's memory and never globex's, then English
    assert chinese_lang == "zh-hans"
    assert "客户偏好顺丰快递" in memories_zh
    assert "deliveries after 6 pm" not in memories_zh + memories_en
    assert "客户偏好顺丰快递" in memories_en
    assert violations == []
    # and without the claim the sign-in is refused and the memory list is out of reach
    assert "不属于任何 memdesk 组" in refused  # "no memdesk group", in the browser's language
    assert "/admin/login/" in after
