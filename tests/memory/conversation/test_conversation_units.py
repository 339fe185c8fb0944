"""How one message becomes conversation units (``memory.conversation.units``): pure, no database."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.conversation.units import is_question, message_units, split_units, unit_key

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def test_a_short_message_is_one_unit_with_its_words():
    assert split_units("I live in Shenzhen and I prefer e-mail over phone calls.") == [
        "I live in Shenzhen and I prefer e-mail over phone calls."
    ]


@pytest.mark.parametrize("text", ["好的，谢谢", "OK.", "好的，已记下。", "Noted, thanks!", "收到", "  "])
def test_acknowledgements_and_fillers_have_no_unit(text):
    assert split_units(text) == []


def test_a_long_message_splits_at_sentences_and_keeps_every_code():
    text = "".join(f"第{i}件事：包裹编号是 PKG-{i:04d}，请在周{i % 7 + 1}送到前台。" for i in range(1, 15))
    units = split_units(text)
    assert len(units) > 1
    assert all(len(u) <= 150 for u in units)
    for i in range(1, 15):
        assert sum(f"PKG-{i:04d}" in u for u in units) == 1  # each code in exactly one unit, never cut


def test_a_sentence_longer_than_150_characters_splits_at_clauses_without_cutting_words():
    clauses = [f"the parcel for order ORD-{i:03d} goes to warehouse {i}" for i in range(12)]
    text = "Please note that " + ", ".join(clauses) + "."
    units = split_units(text)
    assert all(len(u) <= 150 for u in units)
    joined = " ".join(units)
    for i in range(12):
        assert f"ORD-{i:03d}" in joined


def test_secrets_never_reach_a_unit():
    units = split_units("我的密码是 hunter2abc，银行卡 4111 1111 1111 1111，请帮我查订单")
    assert units
    assert not any("hunter2abc" in u or "4111 1111" in u for u in units)


def test_the_same_sentence_has_the_same_key_whatever_its_spacing_or_case():
    assert unit_key("My order ships Friday.") == unit_key("my order  ships friday.")
    assert unit_key("My order ships Friday.") != unit_key("My order ships Monday.")


@pytest.mark.parametrize(
    ("text", "question"),
    [
        ("在吗，我想问下我的积分有多少了", True),
        ("我寄给我弟的那箱书到哪了", True),
        ("积分能换啥", True),
        ("What did you paint?", True),
        ("Caroline: how are you doing?", True),
        ("您目前积分两千三百八十分。", False),
        ("I painted a sunset over the lake.", False),
        ("我没有", False),
    ],
)
def test_questions_are_told_from_statements(text, question):
    assert is_question(text) is question


def test_a_unit_records_the_current_state_facts_it_states():
    [unit] = message_units("您的手机号 13912345678 已登记，积分余额 1,280 分。", "assistant", NOW)
    assert unit.facts.get("phone") == "13912345678"
    assert not unit.question
    [other] = message_units("我想问问怎么换货？", "user", NOW)
    assert other.facts == {}
    assert other.question


@pytest.mark.parametrize(
    ("text", "question"),
    [
        # an indefinite thing sought, in a clause that asks nothing: a request put as a question
        ("我想找个票价免费的景点游玩，你能给我推荐一个吗？", False),
        ("我晚上想找一家有印度咖喱锅底的店吃饭，有合适的么？", False),
        # a definite thing, or a clause with an interrogative pronoun: it asks
        ("这个酒店提供收费停车位吗？", True),
        ("这家酒店的地址是在哪？", True),
        ("知道哪个酒店适合我吗？", True),
        ("我的快递到了吗？", True),
    ],
)
def test_a_chinese_request_put_as_a_question_is_not_a_question(text, question):
    [unit] = message_units(text, "user", NOW)
    assert unit.question is question
