"""memdesk's ASGI application under a real uvicorn, in a thread of the test process (HTTP and WebSocket)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def uvicorn_in_thread(app: Any = None, **config: Any) -> Iterator[str]:
    """Serve ``app`` (default ``config.asgi.application``) on a free local port until the block ends; yields
    ``host:port``. ``config`` goes to ``uvicorn.Config`` (e.g. ``log_level``, ``log_config``, ``access_log``)."""
    import uvicorn

    if app is None:
        from config.asgi import application as app

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
