"""The seed's §2.2 dialogue: facts from turns 1 and 5 are still there at turn 50."""

from __future__ import annotations

import pytest

from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

FILLER = ["好的", "嗯嗯，明白", "还有一个问题", "请稍等一下", "谢谢你", "这个我知道了", "那运费怎么算", "可以开发票吗"]

SCRIPT = {
    1: "你好，我叫张伟",
    5: "我的订单号是 ABC123",
    10: "帮我取消这个订单吧",
    20: "我换号了，新号是 13912345678",
    30: "订单的事先不说了，我要投诉快递员，他态度很差",
    50: "你还记得我叫什么、订单号是多少吗？",
}


def test_name_and_order_survive_fifty_turns_and_a_topic_switch(acme, fake_ollama):
    sid = open_session(acme, "zhangwei")["session_id"]
    recalled_at_50 = None
    for turn in range(1, 51):
        text = SCRIPT.get(turn, FILLER[turn % len(FILLER)] + f"（第{turn}轮）")
        response = acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": text}, format="json")
        assert response.status_code == 200, (turn, response.content)
        if turn == 50:
            recalled_at_50 = response.json()["recalled"]

    # the memories recalled for the last question hold the name and the order number
    memapi = acme.client
    memapi.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}", HTTP_X_SESSION_ID=sid)
    contents = [memapi.get(f"/api/v1/memories/{mid}").json()["content"] for mid in recalled_at_50]
    joined = " ".join(contents)
    assert "张伟" in joined
    assert "ABC123" in joined

    # and the last prompt's anchor carries them (the model sees them first)
    system = fake_ollama.chat_requests[-1]["messages"][0]["content"]
    anchor = system.split("\n", 1)[0]
    assert "张伟" in anchor
    assert "ABC123" in anchor
    assert "139****5678" in anchor  # masked (seed §4.2: 「手机号 138****1234」)
    # the prompt stayed small: last 5 turns, not 50
    user_turns = [m for m in fake_ollama.chat_requests[-1]["messages"] if m["role"] == "user"]
    assert len(user_turns) <= 6
