"""Request bodies over MAX_REQUEST_BYTES are refused before they are read (config/body_limit.py), on a real uvicorn."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.live_server import uvicorn_in_thread

pytestmark = pytest.mark.django_db(transaction=True)

MIB = 1024 * 1024


class _CountingApp:
    """memdesk's ASGI application, counting the body bytes it pulls from the server: what the app saw."""

    def __init__(self) -> None:
        from config.asgi import application

        self.app = application
        self.body_bytes = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        async def counting_receive() -> dict[str, Any]:
            message = await receive()
            self.body_bytes += len(message.get("body", b""))
            return message

        await self.app(scope, counting_receive, send)


@pytest.fixture
def server(settings) -> Iterator[tuple[tuple[str, int], _CountingApp]]:
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    app = _CountingApp()
    with uvicorn_in_thread(app=app, log_level="warning") as address:
        host, port = address.rsplit(":", 1)
        yield (host, int(port)), app


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of the one HTTP/1.1 response on ``sock`` (read until the server closes)."""
    data = b""
    while True:
        try:
            piece = sock.recv(65536)
        except ConnectionResetError:
            break  # the server closed a connection whose upload it did not read: what it answered is already here
        if not piece:
            break
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def _post_head(path: str, *headers: str) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_a_chunked_upload_is_refused_before_a_mebibyte_is_read(server):
    # given: a client that streams 50 MiB in chunks, with no Content-Length
    address, app = server
    chunk = b"x" * 65536
    frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
    sent = 0
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(_post_head("/api/v1/sessions", "Transfer-Encoding: chunked"))
        # when: it sends until the server answers (or stops taking bytes)
        try:
            while sent < 50 * MIB and not select.select([sock], [], [], 0)[0]:
                sock.sendall(frame)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        status, headers, body = _read_response(sock)
    # then: 413 with the error shape, and the app took in no more than the limit and one server read
    assert status == 413
    assert json.loads(body)["error"]["code"] == "request_too_large"
    assert headers["connection"] == "close"
    assert sent < 50 * MIB
    assert app.body_bytes < MIB


def test_a_300_mib_content_length_without_auth_is_refused_unread(settings, server):
    # given: an unauthenticated POST that announces 300 MiB
    address, app = server
    with socket.create_connection(address, timeout=10) as sock:
        # when: the headers and the first bytes of the body are sent
        sock.sendall(_post_head("/api/v1/sessions", f"Content-Length: {300 * MIB}") + b"{" * 65536)
        started = time.monotonic()
        status, _headers, body = _read_response(sock)
    # then: the server answered without waiting for (or reading) the body
    assert status == 413
    assert json.loads(body)["error"] == {
        "code": "request_too_large",
        "message": f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.",
    }
    assert time.monotonic() - started < 5
    assert app.body_bytes == 0


def test_a_chunked_body_under_the_limit_reaches_the_api(acme, server):
    # given: a session request sent in two chunks, with no Content-Length
    address, _app = server
    payload = json.dumps({"end_user_id": "chunked-user", "metadata": {}}).encode()
    halves = (payload[:10], payload[10:])
    frames = b"".join(f"{len(h):x}\r\n".encode() + h + b"\r\n" for h in halves) + b"0\r\n\r\n"
    with socket.create_connection(address, timeout=10) as sock:
        # when
        auth = f"Authorization: Bearer {acme.api_key}"
        sock.sendall(_post_head("/api/v1/sessions", "Transfer-Encoding: chunked", auth, "Connection: close") + frames)
        status, _headers, body = _read_response(sock)
    # then: the body was read and the session created
    assert status == 201, body
    assert json.loads(body)["session_id"]


def test_the_limit_follows_max_request_bytes(settings, server):
    # given: a lower limit
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    address, app = server
    with socket.create_connection(address, timeout=10) as sock:
        # when: a body of 4 KiB is announced
        sock.sendall(_post_head("/api/v1/sessions", "Content-Length: 4096"))
        status, _headers, body = _read_response(sock)
    # then
    assert status == 413
    assert "2048 bytes" in json.loads(body)["error"]["message"]
    assert app.body_bytes == 0
