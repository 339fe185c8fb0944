"""Static files (the chat page's and the widget's ``memdesk/chat.js``) served by the ASGI app itself, as the
image runs it, and served asynchronously: Django's ASGI handler then streams them as they are read, instead
of warning that it must consume a synchronous iterator (a thread hop per chunk) on every request."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path
from typing import Any

import pytest
from django.core.asgi import get_asgi_application

CHAT_JS = Path(__file__).resolve().parents[2] / "chat" / "static" / "memdesk" / "chat.js"


async def asgi_get(path: str) -> tuple[int, dict[bytes, bytes], bytes]:
    """GET ``path`` through Django's own ASGI handler (the middleware stack the server runs)."""
    app = get_asgi_application()
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
        "headers": [(b"host", b"localhost")], "client": ("127.0.0.1", 50000), "server": ("localhost", 80),
    }  # fmt: skip
    requested = False
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client never goes away
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await asyncio.wait_for(app(scope, receive, send), timeout=30)
    start = next(m for m in messages if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return start["status"], {k.lower(): v for k, v in start["headers"]}, body


@pytest.mark.django_db(transaction=True)
async def test_chat_js_is_served_asynchronously_with_its_content_and_type() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        status, headers, body = await asgi_get("/static/memdesk/chat.js")
    assert status == 200
    assert body == CHAT_JS.read_bytes()
    assert headers[b"content-type"].startswith(b"text/javascript")
    assert headers[b"access-control-allow-origin"] == b"*"  # tenants' sites load it through the widget
    messages = [str(w.message) for w in caught]
    assert not [m for m in messages if "synchronous iterator" in m], messages


@pytest.mark.django_db(transaction=True)
async def test_a_missing_static_file_is_a_404() -> None:
    status, _headers, _body = await asgi_get("/static/memdesk/no-such-file.js")
    assert status == 404
