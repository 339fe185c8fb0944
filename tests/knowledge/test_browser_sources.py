"""The widget on a tenant's site, in a real headless Chromium, shows the articles a reply cited as source links
under it; an invented label shows nothing, and a source without an http(s) link is plain text."""

from __future__ import annotations

import pytest

from tests.browser_kit import TENANT_SITE, chromium_page, needs_chromium, violations
from tests.factories import open_session
from tests.knowledge.chat_kit import knowledge_part
from tests.knowledge.conftest import write_article
from tests.knowledge.test_search import EN_POLICY

pytestmark = [pytest.mark.django_db(transaction=True), needs_chromium]


def test_the_widget_shows_the_replys_sources_as_links(globex, fake_ollama, asgi_server):
    # given globex's help centre and a model that cites the warranty passage (and a label it invents)
    globex.tenant.allowed_origins = [TENANT_SITE]
    globex.tenant.save(update_fields=["allowed_origins"])
    write_article(globex, EN_POLICY, title="Help centre", url="https://help.globex.test/centre")
    write_article(globex, "Every laptop may be returned within 30 days.", title="Laptop returns")

    def reply(body):
        label = next(label for label, line in knowledge_part(body).items() if "two year warranty" in line)
        return f"Laptops carry a two year warranty [{label}]. See also [K9]."

    fake_ollama.script(reply)
    opened = open_session(globex, "widget-user")
    html = (
        f'<!doctype html><html><head><title>Shop</title></head><body><script src="{asgi_server}/widget.js"'
        f' data-session-id="{opened["session_id"]}" data-token="{opened["token"]}" data-lang="en" async></script>'
        "</body></html>"
    )
    with chromium_page("--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests") as (
        page,
        console,
    ):
        page.route(f"{TENANT_SITE}/", lambda route: route.fulfill(status=200, body=html, headers={
            "Content-Type": "text/html"}))  # fmt: skip
        page.goto(f"{TENANT_SITE}/")
        page.wait_for_selector(".mdk-status:text('Connected')", timeout=15000)
        # when the customer asks
        page.fill(".mdk-input", "How long is the laptop warranty?")
        page.press(".mdk-input", "Enter")
        # then the reply shows one source, linking to the article
        page.wait_for_selector(".mdk-assistant[data-done='1']", timeout=30000)
        links = page.locator(".mdk-assistant .mdk-sources a.mdk-source")
        assert links.count() == 1
        assert links.first.text_content() == "Help centre"
        assert links.first.get_attribute("href") == "https://help.globex.test/centre"
        assert links.first.get_attribute("rel") == "noopener noreferrer"
        assert page.locator(".mdk-sources").first.text_content().startswith("Sources:")
        assert violations(page, console) == []
        # and after the customer reloads the page, the reply from the history still shows its source
        page.reload()
        page.wait_for_selector(".mdk-status:text('Connected')", timeout=15000)
        page.wait_for_selector(".mdk-assistant .mdk-sources a.mdk-source", timeout=15000)
        reloaded = page.locator(".mdk-assistant .mdk-sources a.mdk-source")
        assert reloaded.count() == 1
        assert reloaded.first.get_attribute("href") == "https://help.globex.test/centre"
