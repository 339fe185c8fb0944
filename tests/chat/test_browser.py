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


MARKDOWN_REPLY = (
    "**重要**：请看订单 `ABC123` 的 *状态*\n"
    "\n"
    "- 第一步\n"
    "- 第二步\n"
    "\n"
    '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> '
    "[官网](https://shop.example.test/help) [坏链接](javascript:window.__pwned=3)"
)


def test_a_markdown_reply_is_drawn_and_cannot_inject_markup(acme, fake_ollama, asgi_server):
    from testkit.fake_ollama import Reply
    from tests.browser_kit import chromium_page, violations

    # given a model that answers in Markdown, with markup and a script link in it
    opened = open_session(acme, "markdown-user")
    fake_ollama.script(Reply(deltas=[MARKDOWN_REPLY[:40], MARKDOWN_REPLY[40:]]))
    url = f"{asgi_server}/chat/?session_id={opened['session_id']}&token={opened['token']}&lang=zh"
    with chromium_page() as (page, console):
        page.goto(url)
        page.wait_for_selector(".mdk-status:text('已连接')", timeout=15000)
        # when the customer asks and the reply is done
        page.fill(".mdk-input", "订单怎么样了？")
        page.press(".mdk-input", "Enter")
        page.wait_for_selector(".mdk-assistant[data-done='1']", timeout=20000)
        reply = page.locator(".mdk-assistant")
        # then the Markdown is drawn: bold, code, italics, a list, a link to an http(s) address
        assert reply.locator("strong").first.text_content() == "重要"
        assert reply.locator("code").first.text_content() == "ABC123"
        assert reply.locator("em").first.text_content() == "状态"
        assert reply.locator("li").all_text_contents() == ["第一步", "第二步"]
        link = reply.locator("a")
        assert link.count() == 1
        assert link.get_attribute("href") == "https://shop.example.test/help"
        assert "noopener" in (link.get_attribute("rel") or "")
        # and nothing of the reply became markup: no element, no handler, no script ran, the script link is text
        assert reply.locator("img, script").count() == 0
        assert page.evaluate("window.__pwned") is None
        assert "<script>" in reply.text_content()
        assert "[坏链接](javascript:" in reply.text_content()
        assert violations(page, console) == []
        # and a reload draws the stored reply the same way
        page.reload()
        page.wait_for_selector(".mdk-assistant li", timeout=15000)
        assert page.locator(".mdk-assistant li").count() == 2
        assert page.locator(".mdk-assistant img, .mdk-assistant script").count() == 0
