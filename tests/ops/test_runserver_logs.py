"""``manage.py runserver`` logs request lines too: the session token in the chat page's URL is redacted there."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

SESSION = "5b3c1f1e-0000-4000-8000-000000000001"
TOKEN = "eyJzIjoiNWIzYyJ9:1uAbCd:secret-signature"  # noqa: S105 - a made-up token
CHAT_PATH = f"/chat/?session_id={SESSION}&token={TOKEN}&lang=zh"


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def server_log(request: pytest.FixtureRequest) -> Iterator[_Collect]:
    """Collects what the logger named by the test's parameter prints, with the filters every server gets:
    each imports config.asgi to find the application, and that installs them."""
    import config.asgi  # noqa: F401

    logger = logging.getLogger(request.param)
    collect = _Collect()
    level = logger.level
    logger.addHandler(collect)
    logger.setLevel(logging.INFO)
    try:
        yield collect
    finally:
        logger.removeHandler(collect)
        logger.setLevel(level)


@pytest.mark.parametrize("server_log", ["django.channels.server"], indirect=True)
def test_daphnes_runserver_redacts_the_token(server_log):
    from daphne.management.commands.runserver import Command

    # given: runserver as `manage.py runserver` runs it while daphne is installed
    command = Command()
    # when: it logs the chat page's request and its WebSocket
    command.log_action(
        "http",
        "complete",
        {"path": CHAT_PATH, "status": 200, "method": "GET", "client": "127.0.0.1:50000", "time_taken": 0.01},
    )
    command.log_action(
        "websocket", "connected", {"path": f"/ws/chat/?session_id={SESSION}&token={TOKEN}", "client": "x"}
    )
    # then
    logged = "\n".join(server_log.lines)
    assert f"/chat/?session_id={SESSION}&token=[redacted]&lang=zh" in logged
    assert f"/ws/chat/?session_id={SESSION}&token=[redacted]" in logged
    assert TOKEN not in logged


@pytest.mark.parametrize("server_log", ["django.server"], indirect=True)
def test_djangos_runserver_redacts_the_token(server_log):
    from django.core.servers.basehttp import WSGIRequestHandler

    # given: Django's own development server's request handler, as it stands after parsing a request
    handler = WSGIRequestHandler.__new__(WSGIRequestHandler)
    handler.request = None
    handler.requestline = f"GET {CHAT_PATH} HTTP/1.1"
    # when: it logs the request line
    handler.log_request(200, 1234)
    # then
    logged = "\n".join(server_log.lines)
    assert f"GET /chat/?session_id={SESSION}&token=[redacted]&lang=zh HTTP/1.1" in logged
    assert TOKEN not in logged
