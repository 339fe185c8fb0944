"""The whole single sign-on in a real headless Chromium: memdesk under uvicorn, the provider on loopback, the
admin login page's button, the provider's redirect back, and the admin showing the claimed tenant only."""

from __future__ import annotations

import pytest

from tests.browser_kit import launch_chromium, needs_chromium

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
