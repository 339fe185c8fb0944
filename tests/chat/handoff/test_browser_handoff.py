"""Two real browsers (headless Chromium): the end user in the chat page asks 「转人工」, a staff member claims the
conversation in the console, they exchange a message each, the staff member hands back, the AI answers the
next message, and the end user rates the conversation — with no CSP violation on either page."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings

from conversations.models import SessionRating
from tenants.rls import tenant_scope
from testkit.fake_ollama import Reply
from tests.browser_kit import WATCH_VIOLATIONS, launch_chromium, needs_chromium
from tests.factories import open_session, staff_login

pytestmark = [pytest.mark.django_db(transaction=True), needs_chromium]


def _staff_cookie(user) -> str:
    client = staff_login(user)
    return client.cookies[django_settings.SESSION_COOKIE_NAME].value


def test_a_person_takes_over_in_the_console_and_hands_back(acme, staff, fake_ollama, asgi_server):
    from playwright.sync_api import sync_playwright

    # given (the database work first: Playwright runs an event loop on this thread)
    opened = open_session(acme, "browser-customer")
    sid = opened["session_id"]
    cookie = _staff_cookie(staff["agent_a"])
    fake_ollama.script(Reply(text="不客气，还有什么可以帮您？"))
    chat_url = f"{asgi_server}/chat/?session_id={sid}&token={opened['token']}&lang=zh"
    with sync_playwright() as p:
        browser = launch_chromium(p)
        customer = browser.new_context().new_page()
        agent_context = browser.new_context()
        agent_context.add_cookies([{"name": django_settings.SESSION_COOKIE_NAME, "value": cookie, "url": asgi_server}])
        agent = agent_context.new_page()
        for page in (customer, agent):
            page.add_init_script(WATCH_VIOLATIONS)
        agent.goto(f"{asgi_server}/staff/console/")
        agent.wait_for_selector("#mdk-status:text('Online')", timeout=15000)
        customer.goto(chat_url)
        customer.wait_for_selector(".mdk-status:text('已连接')", timeout=15000)

        # when the end user asks for a person
        customer.fill(".mdk-input", "转人工")
        customer.press(".mdk-input", "Enter")
        notice = customer.wait_for_selector(".mdk-assistant[data-done='1']", timeout=15000)
        assert "排在第 1 位" in notice.text_content()
        customer.wait_for_selector(".mdk-status:text('您排在第 1 位')", timeout=10000)

        # the console shows the session waiting; the agent opens and claims it
        agent.click(f"li[data-session-id='{sid}']", timeout=10000)
        agent.wait_for_selector("#mdk-note li:has-text('user_request')", timeout=10000)
        agent.click("#mdk-claim")
        agent.wait_for_selector("#mdk-session[data-state='with_human']", timeout=10000)
        customer.wait_for_selector(".mdk-status:text('人工客服为您服务中')", timeout=10000)

        # one message each
        customer.fill(".mdk-input", "我的订单A123丢了")
        customer.press(".mdk-input", "Enter")
        agent.wait_for_selector(".mdk-msg-user:text('我的订单A123丢了')", timeout=10000)
        agent.fill("#mdk-reply-text", "您好，我是小王，马上为您补发。")
        agent.click("#mdk-send")
        staff_reply = customer.wait_for_selector(".mdk-staff[data-done='1']", timeout=10000)
        assert staff_reply.text_content() == "您好，我是小王，马上为您补发。"

        # the agent hands back; the AI answers the next message
        agent.click("#mdk-release")
        customer.wait_for_selector(".mdk-status:text('智能助手为您服务')", timeout=10000)
        customer.fill(".mdk-input", "谢谢")
        customer.press(".mdk-input", "Enter")
        customer.wait_for_selector(".mdk-assistant[data-done='1']:text('不客气')", timeout=15000)

        # the end user ends the chat and rates it
        customer.click("[data-action='close']")
        customer.click(".mdk-star[data-score='5']", timeout=10000)
        customer.click(".mdk-rating .mdk-send")
        customer.wait_for_selector(".mdk-rating[data-rated='5']", timeout=10000)
        violations = [page.evaluate("window.__csp") for page in (customer, agent)]
        browser.close()

    # then
    assert violations == [[], []]
    assert len(fake_ollama.chat_requests) == 1  # only the message after the hand-back reached the model
    with tenant_scope(acme.tenant):
        rating = SessionRating.objects.for_tenant(acme.tenant).get(session_id=sid)
    assert (rating.score, rating.handled_by, rating.staff_id) == (5, "both", staff["agent_a"].pk)
