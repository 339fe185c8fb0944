"""A follow-up never resets the context; a new matter does, once (S10).

A false reset tells the model to drop exactly what the customer is asking about, so these go through the chat turn
(``POST /api/v1/sessions/<id>/messages`` with the fake Ollama replying as the agent) and read what the model was
given: the reset marker, and the anchor's current topic. Chinese (``acme``) and English (``globex``).
"""

from __future__ import annotations

import pytest

from memory.models import MemoryType, MemoryUnit
from tenants.rls import tenant_scope
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

RESET = "<|context_reset|>"


def _send(ctx, sid, text, fake_ollama, reply="好的。"):
    fake_ollama.script(reply)
    response = ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": text}, format="json")
    assert response.status_code == 200, response.content
    prompt = fake_ollama.chat_requests[-1]["messages"]
    reset = any(line.startswith(RESET) for m in prompt for line in m["content"].split("\n"))
    anchor = prompt[0]["content"].split("\n", 1)[0]
    return reset, anchor


def _conversation(ctx, user, fake_ollama, turns):
    """Send ``(text, reply)`` turns in a new session; the resets and anchors of each turn's prompt."""
    sid = open_session(ctx, user)["session_id"]
    results = [_send(ctx, sid, text, fake_ollama, reply) for text, reply in turns]
    return sid, [r for r, _ in results], [a for _, a in results]


def _frozen(ctx, sid) -> list[MemoryUnit]:
    with tenant_scope(ctx.tenant):
        return list(
            MemoryUnit.objects.for_tenant(ctx.tenant).filter(
                session_id=sid, type=MemoryType.SESSION_STATE, data__has_key="frozen_topic"
            )
        )


def test_the_bill_follow_up_keeps_the_topic_and_the_real_switch_resets(acme, fake_ollama):
    """The issue's own example: 「10 月份的话费是多少？」 is the same bill; the switch one message later is real."""
    # given a customer asking about the bill
    sid, resets, anchors = _conversation(
        acme, "bill-zh", fake_ollama,
        [("我想查一下我的账单。", "好的，请问您想查询哪个月的账单？"),
         ("10 月份的话费是多少？", "您10月份的话费是128元。")],
    )  # fmt: skip

    # then the follow-up did not reset, and its anchor still holds the current topic
    assert resets == [False, False]
    assert "账单" in anchors[1] or "话费" in anchors[1], anchors[1]
    assert "（暂无）" not in anchors[1].split("current_topic", 1)[-1][:20]
    assert _frozen(acme, sid) == []

    # when the customer really switches
    reset, _ = _send(acme, sid, "账单的事先不说了，我要投诉你们的客服", fake_ollama)

    # then that prompt resets and the bill topic's working memory is frozen, not lost
    assert reset
    assert _frozen(acme, sid)


@pytest.mark.parametrize(
    ("turns", "kind"),
    [
        (
            [
                ("我想查一下这个月的账单", "好的，本月账单共计158元。"),
                ("月租怎么又涨了，还多扣了我一笔费用", "我帮您看一下。"),
            ],
            "words of the same domain",
        ),
        ([("帮我查一下9月的话费", "您9月的话费是96元。"), ("那10月的呢？", "10月是128元。")], "elliptical"),
        (
            [
                ("我的快递到哪了，单号SF1234567", "您的快递已到达杭州转运中心，运费12元。"),
                ("12元的运费是谁出的？我记得说好包邮的", "我帮您核实。"),
            ],
            "a value just discussed",
        ),
        (
            [
                ("我要退掉上周买的那件外套", "好的，请问是哪个订单？退货原因是什么？"),
                ("订单号是A20231005，尺码买大了，穿着不合身", "收到。"),
            ],
            "an answer to the agent's question",
        ),
    ],
    ids=["same-domain", "elliptical", "value", "answer"],
)
def test_chinese_follow_ups_never_reset(acme, fake_ollama, turns, kind):
    # given a topic, when the customer follows it up
    _, resets, _ = _conversation(acme, f"zh-{kind}", fake_ollama, turns)

    # then no prompt carries the reset
    assert resets == [False] * len(turns), kind


def test_the_anchor_keeps_the_current_topic_through_an_elliptical_follow_up(acme, fake_ollama):
    """The topic's working memory (「当前咨询」, a ``session_state`` memory) is what a false reset would freeze."""
    # given a topic the anchor shows, when the customer follows it up elliptically
    _, resets, anchors = _conversation(
        acme,
        "anchor-zh",
        fake_ollama,
        [("帮我查一下9月的话费", "您9月的话费是96元。"), ("那10月的呢？", "10月是128元。")],
    )

    # then the follow-up's anchor still shows the topic
    assert resets == [False, False]
    assert "当前咨询：9月的话费" in anchors[0]
    assert "当前咨询：9月的话费" in anchors[1]


@pytest.mark.parametrize(
    ("turns", "kind"),
    [
        (
            [
                ("Where is my order? I placed it last week.", "Your order shipped on Monday."),
                ("Has the shipping been delayed? The tracking page has not updated since Tuesday.", "Let me check."),
            ],
            "words of the same domain",
        ),
        (
            [
                ("Can you check the status of my two parcels?", "The first one was delivered yesterday."),
                ("and the other one?", "It is out for delivery."),
            ],
            "elliptical",
        ),
        (
            [
                (
                    "Why is my phone bill so high this month?",
                    "Your bill is 84 dollars, including a 20 dollar roaming fee.",
                ),
                ("What exactly is the 20 dollar roaming fee for? I never left the country.", "I will look into it."),
            ],
            "a value just discussed",
        ),
        (
            [
                ("I want to return a jacket I bought.", "Sure. Which order was it, and why are you returning it?"),
                ("Order A20231005, the size was too large and the colour looked different online.", "Thanks."),
            ],
            "an answer to the agent's question",
        ),
    ],
    ids=["same-domain", "elliptical", "value", "answer"],
)
def test_english_follow_ups_never_reset(globex, fake_ollama, turns, kind):
    # given a topic, when the customer follows it up
    _, resets, _ = _conversation(globex, f"en-{kind}", fake_ollama, turns)

    # then no prompt carries the reset
    assert resets == [False] * len(turns), kind


@pytest.mark.parametrize(
    ("ctx_name", "turns"),
    [
        (
            "acme",
            [
                ("我想查一下这个月的账单", "本月账单158元。"),
                ("对了，最近晚上上网总是断，视频都看不了", "请问是宽带还是手机流量？"),
                ("家里的宽带，路由器的灯一直在闪", "我帮您报修。"),
                ("师傅什么时候能上门？", "明天上午。"),
            ],
        ),
        (
            "globex",
            [
                ("Can you check my bill for this month?", "Your bill is 84 dollars."),
                ("By the way, the internet at home keeps dropping every evening.", "Is it broadband or mobile?"),
                ("The broadband, the router light keeps blinking red.", "I will book a technician."),
                ("When can the technician come?", "Tomorrow morning."),
            ],
        ),
    ],
    ids=["zh", "en"],
)
def test_a_drift_to_a_new_domain_resets_once(request, fake_ollama, ctx_name, turns):
    """Uncertain evidence waits for a second message on the new matter: the drift resets once, never twice, and
    the follow-up after it stays."""
    ctx = request.getfixturevalue(ctx_name)
    # given a topic, when the customer drifts to another matter over two messages and follows it up
    _, resets, _ = _conversation(ctx, f"drift-{ctx_name}", fake_ollama, turns)

    # then exactly one of the two drifting messages reset, and neither the first nor the last turn did
    assert resets[0] is False
    assert resets[3] is False
    assert resets[1:3].count(True) == 1, resets


def test_an_explicit_english_switch_resets_and_freezes(globex, fake_ollama):
    # given a topic with working memory
    sid, resets, _ = _conversation(
        globex, "switch-en", fake_ollama,
        [("Can you check my bill for this month?", "Your bill is 84 dollars."),
         ("Why is it so much higher than last month?", "It includes a roaming fee.")],
    )  # fmt: skip
    assert resets == [False, False]

    # when the customer dismisses it and asks for something else
    reset, _ = _send(globex, sid, "Forget the bill, I want to complain about your support agent", fake_ollama)

    # then the prompt resets
    assert reset
