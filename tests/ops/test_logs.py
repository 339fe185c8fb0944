"""Session tokens never reach the server's log (uvicorn logs paths with their query strings)."""

from __future__ import annotations

import logging
import time

import pytest

from tests.factories import open_session
from tests.live_server import uvicorn_in_thread

pytestmark = pytest.mark.django_db(transaction=True)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def logged_server(settings):
    """memdesk under uvicorn in a thread, with uvicorn's connection and access logs at INFO, collected."""
    collect = _Collect()
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "uvicorn.access")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(collect)
        logger.setLevel(logging.INFO)
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    try:
        with uvicorn_in_thread(log_config=None, access_log=True) as address:
            yield address, collect
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(collect)
            logger.setLevel(level)


def test_the_session_token_is_redacted_from_connection_and_access_logs(acme, logged_server):
    import httpx
    from websockets.sync.client import connect

    # given: an end user's session
    address, collect = logged_server
    opened = open_session(acme, "log-reader")
    query = f"session_id={opened['session_id']}&token={opened['token']}"
    # when: the chat page is loaded and its WebSocket opened, both with the token in the query string
    assert httpx.get(f"http://{address}/chat/?{query}&lang=zh", timeout=10).status_code == 200
    with connect(f"ws://{address}/ws/chat/?{query}", open_timeout=10) as ws:
        ws.send('{"type": "ping"}')
        assert '"pong"' in ws.recv(timeout=10)
    time.sleep(0.2)
    # then: both requests are logged, by session id, and the token is not
    logged = "\n".join(collect.lines)
    assert f"/chat/?session_id={opened['session_id']}&token=[redacted]" in logged
    assert f"/ws/chat/?session_id={opened['session_id']}&token=[redacted]" in logged
    assert opened["token"] not in logged


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("GET /chat/?session_id=1&token=abc.def:ghi&lang=zh", "GET /chat/?session_id=1&token=[redacted]&lang=zh"),
        ("/x?api_key=sk-123", "/x?api_key=[redacted]"),
        ("/x?tokens=3&monkey=1", "/x?tokens=3&monkey=1"),  # not credentials
    ],
)
def test_redact_query_replaces_only_credential_values(line, expected):
    from config.logs import redact_query

    assert redact_query(line) == expected
