"""Explicit topic switches reset the session's working memory; goodbyes and questions never do (S10)."""

from __future__ import annotations

import pytest

from memory.topics.detect import TopicSwitch, detect_topic_switch


@pytest.mark.parametrize(
    ("text", "new_topic"),
    [
        ("账单的事先不说了，我要投诉客服", "投诉客服"),
        ("先不管订单了，我想问一下你们店铺的营业时间", "你们店铺的营业时间"),
        ("我不查账单了，我要投诉", "投诉"),
        ("先不说水费了，我还有一个问题，燃气卡怎么在网上充值？", "燃气卡怎么在网上充值"),
        ("Forget the bill, I want to complain about the agent.", "complain about the agent"),
        ("Enough about shipping. How do I get a refund?", "How do I get a refund"),
        ("never mind the refund, can you check my points balance?", "check my points balance"),
    ],
)
def test_dismissal_followed_by_a_new_request_is_a_switch(text: str, new_topic: str) -> None:
    switch = detect_topic_switch(text)

    assert isinstance(switch, TopicSwitch)
    assert switch.new_topic == new_topic
    assert switch.reason


@pytest.mark.parametrize(
    ("text", "new_topic"),
    [
        ("换个话题", ""),
        ("换个话题，你们招兼职吗？", "你们招兼职吗"),
        ("另外一个问题：会员怎么续费", "会员怎么续费"),
        ("Let's talk about something else.", ""),
        ("Another question: do you ship to Canada?", "do you ship to Canada"),
        ("On a different note, I want to update my address", "update my address"),
    ],
)
def test_announced_new_topic_is_a_switch(text: str, new_topic: str) -> None:
    switch = detect_topic_switch(text)

    assert switch is not None
    assert switch.new_topic == new_topic


@pytest.mark.parametrize(
    "text",
    [
        "不说了，谢谢",
        "好的不说了",
        "好的不说了，谢谢。",
        "算了，不用了，谢谢",
        "Never mind, thanks",
        "never mind",
        "Forget it, bye!",
        "我不管了，你们看着办",
        "Don't forget the coupon, can you apply it?",
        "我的订单到哪了？",
        "Can you check my bill?",
        "说不定明天就到了",
        "",
    ],
)
def test_goodbyes_and_plain_questions_are_not_switches(text: str) -> None:
    assert detect_topic_switch(text) is None


def test_same_topic_as_before_is_not_a_switch() -> None:
    assert detect_topic_switch("账单先不说了，我想问一下账单明细", previous_topic="账单") is None
    assert detect_topic_switch("账单的事先不说了，我要投诉客服", previous_topic="账单") is not None


def test_reason_names_the_dropped_topic() -> None:
    switch = detect_topic_switch("账单的事先不说了，我要投诉客服", previous_topic="查 10 月账单")

    assert switch is not None
    assert "账单" in switch.reason
    assert "投诉客服" in switch.reason


def test_new_topic_is_short() -> None:
    switch = detect_topic_switch("先不管订单了，我想问一下" + "你们的会员积分规则和兑换流程到底是怎么样的，" * 6)

    assert switch is not None
    assert 0 < len(switch.new_topic) <= 60
