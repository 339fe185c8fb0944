"""A client that waits for ``done`` may send its next message at once, even
while ``done`` is still on its way to the session's other tabs (a slow
channel layer, e.g. Redis across workers); the other tabs still get every
frame in order, the deltas in batches."""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import InMemoryChannelLayer, channel_layers
from channels.testing import WebsocketCommunicator

from chat.consumers import RELAY_DELTAS_EVERY_S
from config.asgi import application
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)


class SlowGroupLayer(InMemoryChannelLayer):
    """An in-memory layer whose group sends take a Redis round trip and then some."""

    async def group_send(self, group, message):
        await asyncio.sleep(0.05)
        await super().group_send(group, message)


@pytest.fixture
def slow_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": f"{__name__}.SlowGroupLayer"}}
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


async def _connect(opened):
    url = f"/ws/chat/?session_id={opened['session_id']}&token={opened['token']}"
    communicator = WebsocketCommunicator(application, url, headers=[(b"host", b"testserver")])
    assert (await communicator.connect(timeout=10))[0]
    return communicator


async def _until_done(communicator):
    frames = []
    while (frame := await communicator.receive_json_from(timeout=20))["type"] not in ("done", "error"):
        frames.append(frame)
    return [*frames, frame]


async def test_the_next_message_right_after_done_is_accepted(acme, fake_ollama, slow_layer):
    # given: two tabs of one session
    from asgiref.sync import sync_to_async

    opened = await sync_to_async(open_session)(acme, "ws-user")
    fake_ollama.script("第一条回复", "第二条回复")
    tab, other_tab = await _connect(opened), await _connect(opened)
    # when: the tab sends its second message the moment the first reply is done
    await tab.send_json_to({"type": "message", "text": "你好", "client_msg_id": "c1"})
    first = await _until_done(tab)
    await tab.send_json_to({"type": "message", "text": "还在吗", "client_msg_id": "c2"})
    second = await _until_done(tab)
    # then: no turn_in_progress, both turns answered
    assert [first[-1]["type"], second[-1]["type"]] == ["done", "done"]
    assert (first[0]["client_msg_id"], second[0]["client_msg_id"]) == ("c1", "c2")
    # and the other tab saw the first turn end before the second began
    seen = await _until_done(other_tab) + await _until_done(other_tab)
    kinds = [(f["type"], f.get("client_msg_id")) for f in seen if f["type"] in ("ack", "done")]
    assert kinds == [("ack", "c1"), ("done", None), ("ack", "c2"), ("done", None)]
    for communicator in (tab, other_tab):
        await communicator.disconnect()


@pytest.mark.parametrize(
    ("token_delay_s", "batched"),
    [(0.0, True), (RELAY_DELTAS_EVERY_S * 2, False)],
    ids=["fast-stream-batched", "slow-stream-relayed-as-it-comes"],
)
async def test_other_tabs_get_the_same_deltas_in_order(acme, fake_ollama, token_delay_s, batched):
    # given
    from asgiref.sync import sync_to_async

    from testkit.fake_ollama import Reply

    opened = await sync_to_async(open_session)(acme, "ws-user")
    pieces = ["您好，", "订单", "已发货，", "明天", "送到。"]
    fake_ollama.script(Reply(deltas=pieces, token_delay_s=token_delay_s))
    tab, other_tab = await _connect(opened), await _connect(opened)
    # when
    await tab.send_json_to({"type": "message", "text": "订单到哪了"})
    mine, theirs = await _until_done(tab), await _until_done(other_tab)
    # then: this tab got every delta; the other tab the same text, in order, before done
    assert [f["text"] for f in mine if f["type"] == "delta"] == pieces
    kinds = [f["type"] for f in theirs]
    assert (kinds[0], kinds[-1]) == ("ack", "done")
    assert set(kinds[1:-1]) == {"delta"}
    assert "".join(f["text"] for f in theirs if f["type"] == "delta") == "".join(pieces)
    assert theirs[-1] == mine[-1]
    # a fast stream goes out in fewer frames; a slow one is not held back until done
    assert kinds.count("delta") < len(pieces) if batched else kinds.count("delta") == len(pieces)
    for communicator in (tab, other_tab):
        await communicator.disconnect()


class CountingLayer(InMemoryChannelLayer):
    """An in-memory layer that counts the group messages sent through it."""

    sent = 0

    async def group_send(self, group, message):
        type(self).sent += 1
        await super().group_send(group, message)


async def test_a_tab_alone_in_its_session_relays_nothing(acme, fake_ollama, settings):
    # given: one tab, on a layer that counts group messages
    from asgiref.sync import sync_to_async

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": f"{__name__}.CountingLayer"}}
    channel_layers.backends.clear()
    CountingLayer.sent = 0
    try:
        opened = await sync_to_async(open_session)(acme, "ws-user")
        fake_ollama.script("只有一个标签页")
        tab = await _connect(opened)
        # when
        await tab.send_json_to({"type": "message", "text": "你好"})
        frames = await _until_done(tab)
        # then
        assert frames[-1]["text"] == "只有一个标签页"
        assert CountingLayer.sent == 0
        # and once a second tab is open, the next turn reaches it
        other_tab = await _connect(opened)
        fake_ollama.script("两个标签页")
        await tab.send_json_to({"type": "message", "text": "还在吗"})
        assert (await _until_done(tab))[-1] == (await _until_done(other_tab))[-1]
        assert CountingLayer.sent > 0
        for communicator in (tab, other_tab):
            await communicator.disconnect()
    finally:
        channel_layers.backends.clear()
