"""In a real headless Chromium that asks for Chinese: a staff member signs in with their password, lands in the
admin in Chinese, and switches it to English in the header; the choice is saved and no CSP rule is broken."""

from __future__ import annotations

import pytest

from staff_auth.models import StaffPreference
from tests.browser_kit import WATCH_VIOLATIONS, launch_chromium, needs_chromium

pytestmark = [pytest.mark.django_db(transaction=True), needs_chromium]


def test_a_staff_member_signs_in_in_chinese_and_switches_to_english(staff, asgi_server):
    from playwright.sync_api import sync_playwright

    # given acme's owner, on a browser set to Simplified Chinese
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_context(locale="zh-CN").new_page()
        page.add_init_script(WATCH_VIOLATIONS)
        page.goto(f"{asgi_server}/admin/login/?next=/admin/")
        sign_in_page = page.text_content("#content")

        # when they sign in with their password
        page.fill("#id_username", "owner_a")
        page.fill("#id_password", "pw-owner_a-123")
        page.click("#login-form [type=submit]")
        page.wait_for_url(f"{asgi_server}/admin/", timeout=15000)
        chinese = page.text_content("body")
        chinese_lang = page.get_attribute("html", "lang")

        # and press English in the header
        page.click("#mdk-language button[value='en']")
        page.wait_for_selector("html[lang='en']", timeout=15000)
        english = page.text_content("body")
        violations = page.evaluate("window.__csp")
        browser.close()

    # then the sign-in page and the admin were Chinese, the admin is English now, and English is saved
    assert "用户名" in sign_in_page  # Django's catalogue: "Username"
    assert chinese_lang == "zh-hans"
    assert "站点管理" in chinese
    assert "记忆" in chinese  # memdesk's memory app
    assert "Site administration" in english
    assert "Memory" in english
    assert StaffPreference.objects.get(user=staff["owner_a"]).language == "en"
    assert violations == []
