"""Two consumers through a real Redis channel layer (several workers)."""

from __future__ import annotations

import socket

import pytest
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator

from config.asgi import application
from tests.conftest import open_session

pytestmark = pytest.mark.django_db(transaction=True)


def _redis_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=0.5):
            return True
    except OSError:
        return False


@pytest.fixture
def redis_layer(settings):
    if not _redis_up():
        pytest.skip("no Redis on 127.0.0.1:6379 (.ci/run starts one)")
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:6379/0"], "prefix": "memdesk-test"},
        }
    }
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


async def test_reply_reaches_both_consumers_through_redis_and_no_one_else(acme, globex, fake_ollama, redis_layer):
    from asgiref.sync import sync_to_async

    layer = channel_layers["default"]
    assert type(layer).__name__ == "RedisChannelLayer"
    mine = await sync_to_async(open_session)(acme, "alice")
    other = await sync_to_async(open_session)(globex, "alice")
    fake_ollama.script("经由 Redis 的回复")

    def url(s):
        return f"/ws/chat/?session_id={s['session_id']}&token={s['token']}"

    headers = [(b"host", b"testserver")]
    tab1 = WebsocketCommunicator(application, url(mine), headers=headers)
    tab2 = WebsocketCommunicator(application, url(mine), headers=headers)
    stranger = WebsocketCommunicator(application, url(other), headers=headers)
    for c in (tab1, tab2, stranger):
        assert (await c.connect(timeout=10))[0]

    await tab1.send_json_to({"type": "message", "text": "你好"})
    for tab in (tab1, tab2):
        while (frame := await tab.receive_json_from(timeout=20))["type"] != "done":
            pass
        assert frame["text"] == "经由 Redis 的回复"
    assert await stranger.receive_nothing(timeout=0.5)
    for c in (tab1, tab2, stranger):
        await c.disconnect()
