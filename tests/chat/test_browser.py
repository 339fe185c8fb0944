"""The chat page in a real headless Chromium: a Chinese message, a streamed reply."""

from __future__ import annotations

import pytest

from tests.browser_kit import launch_chromium, needs_chromium
from tests.factories import open_session

pytestmark = [pytest.mark.django_db(transaction=True), needs_chromium]


def test_chinese_message_gets_a_streamed_reply_on_the_chat_page(acme, fake_ollama, asgi_server):
    from playwright.sync_api import sync_playwright

    # given a session and a model that streams its reply slowly enough to watch
    opened = open_session(acme, "browser-user")
    fake_ollama.script(
        __import__("testkit.fake_ollama", fromlist=["Reply"]).Reply(
            deltas=["您好", "张伟", "，您的", "订单", " ABC123 ", "已发货。"], token_delay_s=0.05
        )
    )
    url = f"{asgi_server}/chat/?session_id={opened['session_id']}&token={opened['token']}&lang=zh"
    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
        page.goto(url)
        page.wait_for_selector(".mdk-status:text('已连接')", timeout=15000)
        # when
        page.fill(".mdk-input", "我叫张伟，我的订单 ABC123 到哪了？")
        page.press(".mdk-input", "Enter")
        # then the question shows, the reply streams in and completes
        page.wait_for_selector(".mdk-user:text('我叫张伟')", timeout=10000)
        done = page.wait_for_selector(".mdk-assistant[data-done='1']", timeout=20000)
        assert done.text_content() == "您好张伟，您的订单 ABC123 已发货。"
        page.screenshot(path=str(__import__("pathlib").Path(__file__).parent / "last-chat-page.png"))
        # and a reload brings the conversation back from the server
        page.reload()
        page.wait_for_selector(".mdk-assistant:text('已发货')", timeout=15000)
        assert page.locator(".mdk-user").count() == 1
        browser.close()
