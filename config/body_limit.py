"""Request bodies are bounded before they are read, not after they are stored.

Django reads the whole body of an ASGI request (into memory, then into a temp
file past ``FILE_UPLOAD_MAX_MEMORY_SIZE``) before any middleware or view runs,
so a size check in Django middleware comes after the bytes have been taken in:
an unauthenticated POST far over the limit filled the temp directory before its 413.
:class:`BodyLimitMiddleware` sits between the server and Django and enforces
``settings.DATA_UPLOAD_MAX_MEMORY_SIZE`` (env ``MAX_REQUEST_BYTES``):

- a ``Content-Length`` above the limit is answered 413 at once; the app never
  runs and no byte of the body is read (the server frames a body by its
  ``Content-Length``, so a declared length within the limit bounds the body);
- a body without one (``Transfer-Encoding: chunked``) is read here, and the
  read that passes the limit ends the request with 413, so no more than the
  limit plus one server read is ever taken in. A body within the limit goes on
  to Django with its ``Content-Length`` set: DRF reads a body only when it has
  one, and a chunked request used to reach the views empty.

The 413 carries ``Connection: close``: the server then drops the connection
instead of draining the rest of an upload it refused. The proxy in front
should refuse the same bodies first (docs/operations.md, ``client_max_body_size``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings

from config.errors import error_body

__all__ = ["BodyLimitMiddleware"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server refuses a malformed length before the app sees the request
    return None


async def _refuse(send: Send, limit: int) -> None:
    body = json.dumps(
        error_body("request_too_large", f"The request body is larger than {limit} bytes."), ensure_ascii=False
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _read_within(receive: Receive, limit: int) -> tuple[Message, int] | None:
    """The whole body as one ``http.request`` message and its size, or ``None`` as soon as it passes ``limit``.
    A disconnect before the end is handed back as it came."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return message, size
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}, size


class BodyLimitMiddleware:
    """ASGI middleware for the HTTP app: 413 ``request_too_large`` for bodies over the limit, before they are read.

    ``max_bytes`` defaults to ``settings.DATA_UPLOAD_MAX_MEMORY_SIZE``, read per request (tests override it).
    """

    def __init__(self, app: ASGIApp, max_bytes: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_bytes if self.max_bytes is not None else settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        declared = _declared_length(scope)
        if declared is not None:
            if declared > limit:
                await _refuse(send, limit)
            else:
                await self.app(scope, receive, send)
            return

        read = await _read_within(receive, limit)
        if read is None:
            await _refuse(send, limit)
            return
        first, size = read
        if size:
            scope = {**scope, "headers": [*scope.get("headers", ()), (b"content-length", str(size).encode())]}
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return first
            return await receive()

        await self.app(scope, replay, send)
