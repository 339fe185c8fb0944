"""/api/docs/: the schema's reference page (Swagger UI), served offline from memdesk's own static files and
working under the Content-Security-Policy — no CDN, no inline script, its one inline style carrying the nonce."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders

pytestmark = pytest.mark.django_db


class _Page(HTMLParser):
    """The URLs the page loads (``src``/``href``), its ``<script>`` tags and its ``<style>`` nonces."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.scripts: list[dict[str, str | None]] = []
        self.style_nonces: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]
        if tag == "script":
            self.scripts.append(found)
        if tag == "style":
            self.style_nonces.append(found.get("nonce"))


def _parsed(html: str) -> _Page:
    page = _Page()
    page.feed(html)
    return page


def test_the_reference_page_loads_only_memdesks_own_files(client):
    # when anyone asks for the page (as for /api/schema/, no credential)
    response = client.get("/api/docs/")
    # then it is HTML whose every file comes from memdesk itself
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    page = _parsed(html)
    assert len(page.urls) >= 5, page.urls  # favicon, stylesheet, two bundles, the start-up script
    assert [url for url in page.urls if not url.startswith("/") or url.startswith("//")] == []
    assert "http://" not in html
    assert "https://" not in html


def test_every_file_the_page_loads_is_served(client):
    # given the page's files
    page = _parsed(client.get("/api/docs/").content.decode())
    static_url = "/" + settings.STATIC_URL.lstrip("/")
    for url in page.urls:
        # when each is fetched
        response = client.get(url)
        # then it is there, the static ones from the sidecar's files
        assert response.status_code == 200, url
        if url.startswith(static_url):
            assert finders.find(url.removeprefix(static_url)) is not None, url


def test_the_start_up_script_is_a_file_that_loads_the_schema(client):
    # given the page's own script (not the bundles)
    page = _parsed(client.get("/api/docs/").content.decode())
    [own] = [s["src"] for s in page.scripts if s.get("src") and not s["src"].startswith("/static/")]
    # when it is fetched
    response = client.get(own)
    # then it is JavaScript that points Swagger UI at the schema, and asks no validator elsewhere
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/javascript")
    script = response.content.decode()
    assert 'url: "/api/schema/"' in script
    assert '"validatorUrl": null' in script
    assert "https://" not in script


def test_the_page_runs_under_the_content_security_policy(client):
    # when the page is served
    response = client.get("/api/docs/")
    # then the policy is sent, allowing scripts only from memdesk or with this response's nonce
    policy = response["Content-Security-Policy"]
    script_src = re.search(r"script-src ([^;]*)", policy).group(1).split()
    assert "'self'" in script_src
    assert "'unsafe-inline'" not in script_src
    nonce = re.search(r"'nonce-([^']+)'", policy).group(1)
    # and no script is inline; the one inline style carries the nonce
    page = _parsed(response.content.decode())
    assert [s for s in page.scripts if not s.get("src")] == []
    assert page.style_nonces == [nonce]
