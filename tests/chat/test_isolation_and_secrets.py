"""Facts never cross sessions or tenants under concurrency; secrets never
reach the summary channel."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from config.asgi import application
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)


async def _turn(opened, text):
    communicator = WebsocketCommunicator(
        application, f"/ws/chat/?session_id={opened['session_id']}&token={opened['token']}",
        headers=[(b"host", b"testserver")],
    )  # fmt: skip
    assert (await communicator.connect(timeout=10))[0]
    await communicator.send_json_to({"type": "message", "text": text})
    while (frame := await communicator.receive_json_from(timeout=30))["type"] not in ("done", "error"):
        pass
    await communicator.disconnect()
    assert frame["type"] == "done", frame
    return frame


async def test_concurrent_sessions_and_tenants_never_see_each_others_facts(acme, globex, fake_ollama):
    # given four sessions: two end users of acme, and the same end-user id in both tenants
    cast = [
        (acme, "alice", "我叫王小明，订单号 AAA111"),
        (acme, "bob", "我叫李四，订单号 BBB222"),
        (globex, "alice", "My name is Gina Rossi, order number GGG333"),
        (acme, "alice", None),  # a second session of acme's alice
    ]
    sessions = [await sync_to_async(open_session)(ctx, user) for ctx, user, _ in cast]
    # when each tells its facts at the same time
    await asyncio.gather(*[_turn(s, text) for s, (_, _, text) in zip(sessions, cast, strict=True) if text])
    # and each then asks at the same time
    fake_ollama.requests.clear()
    await asyncio.gather(*[_turn(s, "我的订单号和名字是什么？ what is my order number?") for s in sessions])
    # then every prompt holds only its own end user's facts
    prompts = [" ".join(m["content"] for m in r["messages"]) for r in fake_ollama.chat_requests]
    assert len(prompts) == 4
    for prompt in prompts:
        owners = {code for code in ("AAA111", "BBB222", "GGG333") if code in prompt}
        assert len(owners) <= 1, prompt
    by_code = {code: sum(code in p for p in prompts) for code in ("AAA111", "BBB222", "GGG333")}
    # acme's alice has two sessions: both see her order (user_profile/fact_reference belong to the end user)
    assert by_code == {"AAA111": 2, "BBB222": 1, "GGG333": 1}


def test_secrets_never_reach_the_summary_channel(acme, fake_ollama):
    sid = open_session(acme, "leaky")["session_id"]
    secrets = ["sk-live-4f9a8b7c6d5e4f3a2b1c0d9e", "Hunter2-Pass!", "4111 1111 1111 1111"]
    acme.client.post(
        f"/api/v1/sessions/{sid}/messages",
        {"text": f"我的API key是 {secrets[0]}，密码是 {secrets[1]}，卡号 {secrets[2]}，订单号 ABC123"},
        format="json",
    )
    acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "帮我查一下订单"}, format="json")
    system = fake_ollama.chat_requests[-1]["messages"][0]["content"]
    assert "【对话摘要】" in system
    whole_prompt = " ".join(m["content"] for m in fake_ollama.chat_requests[-1]["messages"])
    for secret in secrets:
        assert secret not in system
        assert secret not in whole_prompt
    assert "ABC123" in whole_prompt
