"""Two consumers through a real Redis channel layer (several workers)."""

from __future__ import annotations

import socket

import pytest
from channels.layers import channel_layers
from channels.testing import WebsocketCommunicator

from config.asgi import application
from tests.factories import open_session

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

    code = (
        "import json, config.settings as s; "
        "print(json.dumps(s.CHANNEL_LAYERS['default'], default=lambda o: f'{o.__module__}.{o.__qualname__}'))"
    )
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
    from django.utils.module_loading import import_string

    host = config["CONFIG"]["hosts"][0]
    host["connection_class"] = import_string(host["connection_class"])
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


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6379/0", "config.redis.CancelSafeConnection"),
        ("rediss://:secret@redis.example:6380/2", "config.redis.CancelSafeSSLConnection"),
        ("unix:///run/redis.sock?db=3", "config.redis.CancelSafeUnixConnection"),
    ],
)
def test_production_layer_uses_cancel_safe_connections_and_keeps_the_urls_settings(url, expected):
    # given / when: the channel layer as config/settings.py builds it for each kind of URL
    host = _production_layer_config(url)["CONFIG"]["hosts"][0]
    # then: the scheme's own transport, with writes that pass cancellations on, and the URL's settings kept
    assert host["connection_class"] == expected
    assert host["socket_timeout"] == 30
    if url.startswith("rediss"):
        assert (host["host"], host["port"], host["db"], host["password"]) == ("redis.example", 6380, 2, "secret")
    if url.startswith("unix"):
        assert (host["path"], host["db"]) == ("/run/redis.sock", 3)


def test_channel_layer_host_rejects_other_schemes():
    from config.redis import channel_layer_host

    with pytest.raises(ValueError, match="redis://, rediss:// or unix://"):
        channel_layer_host("http://127.0.0.1:6379", socket_timeout=30)


async def test_a_cancelled_write_is_never_swallowed():
    """Python 3.11's wait_for, which redis-py bounds its writes with, returned normally from a task cancelled
    in the loop turn its write finished in; channels_redis's receive then looped on, and the consumer of a
    closed WebSocket waited for it forever. Every cancellation accepted during a write must end the write."""
    import asyncio

    from config.redis import CancelSafeConnection

    if not _redis_up():
        pytest.skip("no Redis on 127.0.0.1:6379 (.ci/run starts one)")
    outcomes = []
    for turns_before_cancel in range(6):
        # given: a connection whose write needs one more turn of the loop (as with a full socket buffer)
        connection = CancelSafeConnection(host="127.0.0.1", port=6379, db=0, socket_timeout=30)
        await connection.connect()
        drain = connection._writer.drain

        async def slow_drain(drain=drain):
            await asyncio.sleep(0)
            await drain()

        connection._writer.drain = slow_drain
        # when: the task writing a command is cancelled at each point of the write
        writing = asyncio.ensure_future(connection.send_command("PING"))
        for _ in range(turns_before_cancel):
            await asyncio.sleep(0)
        accepted = writing.cancel()
        try:
            await writing
            outcomes.append("finished" if not accepted else "swallowed")
        except asyncio.CancelledError:
            outcomes.append("cancelled")
        finally:
            await connection.disconnect()
    # then: a cancellation the task accepted always ends it; some points were mid-write
    assert "swallowed" not in outcomes, outcomes
    assert "cancelled" in outcomes, outcomes
