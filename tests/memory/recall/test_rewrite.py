"""Vague queries are rewritten to what they mean, with the keys the rule stage looks up (S7)."""

from __future__ import annotations

import pytest

from memory.recall.rewrite import RULES, Rewrite, rewrite_query, rule_keys


def test_that_product_becomes_the_recently_asked_product() -> None:
    # when
    rewrite = rewrite_query("那个产品")

    # then
    assert rewrite == Rewrite(
        text="用户近期咨询过的产品名称或型号",
        intent="product_reference",
        keys=("product",),
        reason="「那个产品」→ product_reference (product)",
    )


def test_vague_span_is_replaced_inside_a_longer_query() -> None:
    assert rewrite_query("那个产品还有货吗？").text == "用户近期咨询过的产品名称或型号还有货吗？"
    assert rewrite_query("Is that product in stock?").text == (
        "Is the product name or model the user recently asked about in stock?"
    )


@pytest.mark.parametrize(
    ("query", "intent", "keys"),
    [
        ("按上次的方式来", "last_operation", ("tool_result",)),
        ("Do it the same way as last time", "last_operation", ("tool_result",)),
        ("查我的订单", "order", ("order_id",)),
        ("我的订单到哪了", "order", ("order_id",)),
        ("where is my order?", "order", ("order_id",)),
        ("进度如何", "batch_progress", ("batch_operation",)),
        ("how is the import going? how many are left", "batch_progress", ("batch_operation",)),
        ("What's the progress?", "batch_progress", ("batch_operation",)),
        ("我的快递到哪了", "tracking", ("tracking_number",)),
        ("what's my tracking number", "tracking", ("tracking_number",)),
        ("我的手机号是多少", "phone", ("phone",)),
        ("what is my phone number", "phone", ("phone",)),
        ("我的邮箱是什么", "email", ("email",)),
        ("收货地址是哪里", "address", ("address",)),
        ("what's my shipping address", "address", ("address",)),
        ("我叫什么名字", "name", ("name",)),
        ("优惠券还能用吗", "coupon", ("coupon",)),
        ("Can I still use the promo code?", "coupon", ("coupon",)),
        ("刚才说的那件事怎么样了", "topic_reference", ("current_topic",)),
        ("我现在有多少积分？", "points", ("points_balance",)),
        ("How many points do I have?", "points", ("points_balance",)),
        ("我现在是什么会员？", "membership", ("membership",)),
        ("what's my membership tier", "membership", ("membership",)),
        ("之前说专员多久给我回电话来着？", "callback", ("callback",)),
        ("When will you call me back?", "callback", ("callback",)),
    ],
)
def test_rewrite_table(query: str, intent: str, keys: tuple[str, ...]) -> None:
    rewrite = rewrite_query(query)

    assert rewrite.intent == intent
    assert rewrite.keys == keys
    assert rewrite.text != query


def test_order_progress_is_an_order_not_a_batch() -> None:
    assert rewrite_query("订单进度").keys == ("order_id",)


def test_several_references_give_several_keys() -> None:
    rewrite = rewrite_query("我的手机号和地址是什么")

    assert rewrite.keys == ("phone", "address")
    assert rewrite.text == "用户的手机号码和用户的收货地址是什么"
    assert "手机号" in rewrite.reason
    assert "地址" in rewrite.reason


@pytest.mark.parametrize(
    "query",
    ["今天天气怎么样", "What are your opening hours?", "订单创建失败了怎么办", "你们周末营业吗", "I love this app"],
)
def test_queries_without_vague_reference_come_back_unchanged(query: str) -> None:
    rewrite = rewrite_query(query)

    assert rewrite.text == query
    assert rewrite.intent is None
    assert rewrite.keys == ()


def test_language_chooses_the_rewrite_language() -> None:
    assert rewrite_query("that product", language="zh").text == "用户近期咨询过的产品名称或型号"
    assert rewrite_query("那个产品", language="en").text == "the product name or model the user recently asked about"


def test_rule_keys() -> None:
    assert rule_keys("查我的订单") == ("order_id",)
    assert rule_keys("check my order") == ("order_id",)
    assert rule_keys("你好") == ()


def test_every_rule_has_both_languages_and_keys() -> None:
    for rule in RULES:
        assert rule.zh
        assert rule.en
        assert rule.keys


@pytest.mark.parametrize(
    "query",
    ["how is it going", "What progress has Gina made with her store?", "Caroline's progress at the support group"],
)
def test_progress_outside_a_batch_is_not_a_batch_query(query: str) -> None:
    # LoCoMo questions about a person's progress misfired on the bare word; a greeting is not a batch query
    assert rule_keys(query) == ()


@pytest.mark.parametrize(
    "query", ["生日那单的双倍积分补发了没有？", "积分怎么用", "你们会员有什么权益", "我回电话给你们"]
)
def test_a_question_about_points_or_membership_that_asks_no_balance_or_tier_names_no_key(query: str) -> None:
    assert rule_keys(query) == ()
