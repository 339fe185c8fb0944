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


def _production_layer_config(redis_url: str) -> dict:
    """``CHANNEL_LAYERS["default"]`` as config/settings.py builds it for ``redis_url``."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = "import json, config.settings as s; print(json.dumps(s.CHANNEL_LAYERS['default']))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


async def test_an_idle_socket_outlives_the_layers_blocking_read():
    # given: the channel layer exactly as production configures it
    import asyncio

    from channels_redis.core import RedisChannelLayer

    if not _redis_up():
        pytest.skip("no Redis on 127.0.0.1:6379 (.ci/run starts one)")
    config = _production_layer_config("redis://127.0.0.1:6379/0")
    assert config["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    layer = RedisChannelLayer(**config["CONFIG"], prefix="memdesk-test-idle")
    channel = await layer.new_channel()
    # when: nothing arrives for longer than channels_redis blocks in BZPOPMIN
    receiving = asyncio.ensure_future(layer.receive(channel))
    await asyncio.sleep(layer.brpop_timeout + 1.5)
    # then: the receiver is still waiting (redis-py's 5 s read timeout used to kill it) and gets the next frame
    assert not receiving.done(), receiving.exception()
    await layer.send(channel, {"type": "chat.frame", "frame": {"type": "pong"}})
    assert (await asyncio.wait_for(receiving, timeout=5))["frame"] == {"type": "pong"}


async def test_group_size_counts_the_tabs_of_every_worker(redis_layer):
    # given: two channels (say, two workers' tabs) in one session's group
    from chat.consumers import group_size

    layer = channel_layers["default"]
    group = "chat.session.group-size-test"
    first, second = await layer.new_channel(), await layer.new_channel()
    # when / then
    assert await group_size(layer, group) == 0
    await layer.group_add(group, first)
    await layer.group_add(group, second)
    assert await group_size(layer, group) == 2
    await layer.group_discard(group, first)
    await layer.group_discard(group, second)
    assert await group_size(layer, group) == 0
