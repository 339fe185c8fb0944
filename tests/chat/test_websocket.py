"""The chat WebSocket: frames and close codes of API.md."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from config.asgi import application
from conversations.models import Message
from conversations.session_tokens import issue_token
from tenants.rls import tenant_scope
from testkit.fake_ollama import Reply
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)


def _url(session_id, token):
    return f"/ws/chat/?session_id={session_id}&token={token}"


async def _connect(path, headers=None):
    communicator = WebsocketCommunicator(application, path, headers=headers or [(b"host", b"testserver")])
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    return communicator


async def _close_code(path, headers=None):
    communicator = await _connect(path, headers)
    frames = []
    while True:
        output = await communicator.receive_output(timeout=10)
        if output["type"] == "websocket.close":
            return output["code"], frames
        frames.append(output)


async def _frames_until_done(communicator):
    frames = []
    while True:
        frame = await communicator.receive_json_from(timeout=20)
        frames.append(frame)
        if frame["type"] in ("done", "error"):
            return frames


@pytest.fixture
def opened(acme):
    return open_session(acme, "ws-user")


async def test_a_message_gets_ack_then_deltas_then_done(acme, opened, fake_ollama):
    fake_ollama.script("您好，张先生！")
    communicator = await _connect(_url(opened["session_id"], opened["token"]))
    await communicator.send_json_to({"type": "message", "text": "你好，我叫张伟", "client_msg_id": "c1"})
    frames = await _frames_until_done(communicator)
    kinds = [f["type"] for f in frames]
    assert kinds[0] == "ack"
    assert kinds[-1] == "done"
    assert set(kinds[1:-1]) == {"delta"}
    ack, done = frames[0], frames[-1]
    assert ack["client_msg_id"] == "c1"
    assert "".join(f["text"] for f in frames if f["type"] == "delta") == "您好，张先生！"
    assert done["text"] == "您好，张先生！"
    assert set(done) == {"type", "reply_id", "text", "recalled", "needs_confirmation", "usage", "citations"}
    assert done["citations"] == []  # the tenant has no articles
    assert all(f["reply_id"] == done["reply_id"] for f in frames if f["type"] == "delta")
    stored = await sync_to_async(_messages)(acme, opened["session_id"])
    assert [str(m.pk) for m in stored] == [ack["message_id"], done["reply_id"]]
    await communicator.disconnect()


def _messages(ctx, sid):
    with tenant_scope(ctx.tenant):
        return list(Message.objects.for_tenant(ctx.tenant).filter(session_id=sid).order_by("seq"))


async def test_malformed_frames_get_bad_frame_and_the_socket_stays_usable(opened, fake_ollama):
    communicator = await _connect(_url(opened["session_id"], opened["token"]))
    for bad in ("not json", '["a list"]', '{"type": "dance"}', '{"type": "message", "text": ""}'):
        await communicator.send_to(text_data=bad)
        frame = await communicator.receive_json_from(timeout=10)
        assert frame["type"] == "error"
        assert frame["code"] == "bad_frame"
        assert frame["retryable"] is False
    await communicator.send_json_to({"type": "ping"})
    assert await communicator.receive_json_from(timeout=10) == {"type": "pong"}
    await communicator.disconnect()


async def test_bad_session_id_closes_4400(opened):
    code, _ = await _close_code(_url("not-a-uuid", opened["token"]))
    assert code == 4400


async def test_bad_token_closes_4401(opened):
    code, _ = await _close_code(_url(opened["session_id"], "forged.token"))
    assert code == 4401


async def test_token_of_another_session_closes_4401(acme, opened):
    other = await sync_to_async(open_session)(acme, "someone-else")
    code, _ = await _close_code(_url(opened["session_id"], other["token"]))
    assert code == 4401


async def test_unknown_session_closes_4404(acme):
    ghost = uuid.uuid4()
    code, _ = await _close_code(_url(ghost, issue_token(acme.tenant.pk, ghost)))
    assert code == 4404


async def test_closed_session_closes_4410(acme, opened):
    await sync_to_async(acme.client.post)(f"/api/v1/sessions/{opened['session_id']}/close")
    code, _ = await _close_code(_url(opened["session_id"], opened["token"]))
    assert code == 4410


async def test_foreign_origin_is_refused_and_allowed_origin_accepted(acme, opened, fake_ollama):
    url = _url(opened["session_id"], opened["token"])
    evil = [(b"host", b"testserver"), (b"origin", b"https://evil.example")]
    code, _ = await _close_code(url, evil)
    assert code == 4403
    acme.tenant.allowed_origins = ["https://shop.example.com"]
    await sync_to_async(acme.tenant.save)()
    shop = await _connect(url, [(b"host", b"testserver"), (b"origin", b"https://shop.example.com")])
    await shop.send_json_to({"type": "ping"})
    assert await shop.receive_json_from(timeout=10) == {"type": "pong"}
    await shop.disconnect()


async def test_rate_limit_closes_4429(acme, opened, fake_ollama):
    acme.tenant.settings = {"rate_limits": {"per_session_per_minute": 1}}
    await sync_to_async(acme.tenant.save)()
    communicator = await _connect(_url(opened["session_id"], opened["token"]))
    await communicator.send_json_to({"type": "message", "text": "一"})
    await _frames_until_done(communicator)
    await communicator.send_json_to({"type": "message", "text": "二"})
    frame = await communicator.receive_json_from(timeout=10)
    assert frame["code"] == "rate_limited"
    output = await communicator.receive_output(timeout=10)
    assert output == {"type": "websocket.close", "code": 4429, "reason": ""} or output.get("code") == 4429


async def test_llm_down_sends_a_retryable_error_after_the_ack(acme, opened, settings):
    from chat.llm import clear_context_cache

    settings.OLLAMA_HOST = "http://127.0.0.1:9"
    clear_context_cache()
    communicator = await _connect(_url(opened["session_id"], opened["token"]))
    await communicator.send_json_to({"type": "message", "text": "在吗", "client_msg_id": "x"})
    frames = await _frames_until_done(communicator)
    assert [f["type"] for f in frames] == ["ack", "error"]
    assert frames[1]["code"] == "llm_unavailable"
    assert frames[1]["retryable"] is True
    await communicator.disconnect()
    assert [m.text for m in await sync_to_async(_messages)(acme, opened["session_id"])] == ["在吗"]


async def test_disconnect_cancels_generation_and_keeps_the_partial_reply(acme, opened, fake_ollama):
    fake_ollama.script(Reply(deltas=["第一段", "第二段"] + ["……"] * 200, token_delay_s=0.05))
    communicator = await _connect(_url(opened["session_id"], opened["token"]))
    await communicator.send_json_to({"type": "message", "text": "讲个长故事"})
    seen = []
    while len(seen) < 3:
        frame = await communicator.receive_json_from(timeout=10)
        if frame["type"] == "delta":
            seen.append(frame)
    await communicator.disconnect()
    assert await asyncio.to_thread(fake_ollama.wait_for_disconnect, 5)
    for _ in range(50):
        stored = await sync_to_async(_messages)(acme, opened["session_id"])
        if len(stored) == 2:
            break
        await asyncio.sleep(0.1)
    assert stored[1].role == "assistant"
    assert stored[1].status == "partial"
    assert stored[1].text.startswith("第一段第二段")
    assert fake_ollama.completed == 0


async def test_two_tabs_of_one_session_both_see_the_reply(acme, opened, fake_ollama):
    fake_ollama.script("同步回复")
    url = _url(opened["session_id"], opened["token"])
    tab1, tab2 = await _connect(url), await _connect(url)
    await tab1.send_json_to({"type": "message", "text": "你好"})
    done1 = (await _frames_until_done(tab1))[-1]
    done2 = (await _frames_until_done(tab2))[-1]
    assert done1 == done2
    assert done1["text"] == "同步回复"
    await tab1.disconnect()
    await tab2.disconnect()


async def test_done_does_not_wait_for_the_tenants_health_check(acme, opened, fake_ollama, monkeypatch):
    # given: the tenant's periodic health check is due and slow (a busy tenant's day of replies to read)
    import threading
    import time

    from chat.turn import run as turn
    from memory.store import health

    started, finished = threading.Event(), threading.Event()

    def slow_health_check(tenant):
        started.set()
        time.sleep(1.0)
        finished.set()

    monkeypatch.setattr(turn, "check_after_turn", slow_health_check)
    monkeypatch.setattr(health, "_last_check", {})
    fake_ollama.script("您好！")
    communicator = await _connect(_url(opened["session_id"], opened["token"]))
    # when: a message is answered
    await communicator.send_json_to({"type": "message", "text": "你好", "client_msg_id": "h1"})
    frames = await _frames_until_done(communicator)
    # then: done comes before the check ends; the check still runs to its end, even when the socket closes
    assert frames[-1]["type"] == "done"
    assert not finished.is_set()
    # (the communicator cancels the application after its timeout: leave time for the turn's memory write
    # and the one-second check that follow the reply)
    await communicator.disconnect(timeout=10)
    assert started.is_set()
    assert finished.is_set()


async def test_a_channel_layer_failure_before_the_ack_ends_the_turn_with_a_retryable_error(
    acme, opened, fake_ollama, monkeypatch
):
    # given: the look at the session's other tabs fails (Redis unreachable, say)
    from chat import consumers

    async def unreachable(layer, group):
        raise ConnectionError("redis is down")

    monkeypatch.setattr(consumers, "group_size", unreachable)
    communicator = await _connect(_url(opened["session_id"], opened["token"]))
    # when: a message is sent
    await communicator.send_json_to({"type": "message", "text": "你好", "client_msg_id": "r1"})
    frames = await _frames_until_done(communicator)
    # then: the client hears of it (retryable) instead of waiting forever, and the message is stored for the retry
    assert frames[-1]["type"] == "error"
    assert frames[-1]["code"] == "internal_error"
    assert frames[-1]["retryable"] is True

    def stored() -> int:
        with tenant_scope(acme.tenant):
            messages = Message.objects.for_tenant(acme.tenant)
            return messages.filter(session_id=opened["session_id"], client_msg_id="r1").count()

    assert await sync_to_async(stored)() == 1
    await communicator.disconnect()
