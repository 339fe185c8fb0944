"""What the browser tests share: Debian's Chromium and the mark that skips them without it, memdesk under uvicorn,
and a Chromium page that records every Content-Security-Policy violation.

The ``asgi_server`` fixture is registered for every test in tests/conftest.py."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.live_server import uvicorn_in_thread

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TENANT_SITE = "http://shop.example.test"

needs_chromium = pytest.mark.skipif(
    not shutil.which("chromium"), reason="Debian's chromium is not installed (.ci/run installs it)"
)

#: The flags every browser test launches Chromium with.
CHROMIUM_FLAGS = ("--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update")

#: Runs before any page script and is not subject to the page's CSP: records every violation the browser reports.
WATCH_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + e.blockedURI);
}, true);
"""


@pytest.fixture
def asgi_server(settings: Any) -> Iterator[str]:
    """memdesk's ASGI app under uvicorn in a thread (HTTP and WebSocket)."""
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    with uvicorn_in_thread(log_level="warning") as address:
        yield f"http://{address}"


def launch_chromium(playwright: Any, *args: str) -> Any:
    """Debian's Chromium, headless, with the shared flags and then ``args``."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_FLAGS, *args])


@contextmanager
def chromium_page(*args: str) -> Iterator[tuple[Any, list[str]]]:
    """A Chromium page and the CSP complaints of its console. Playwright runs an event loop on this thread, so
    the database is set up before it starts."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch_chromium(p, *args)
        page = browser.new_page()
        page.add_init_script(WATCH_VIOLATIONS)
        console: list[str] = []
        page.on("console", lambda m: console.append(m.text) if "Content Security Policy" in m.text else None)
        yield page, console
        browser.close()


def violations(page: Any, console: list[str]) -> list[str]:
    """Every violation the page recorded, then every CSP complaint of its console."""
    return page.evaluate("window.__csp") + console
