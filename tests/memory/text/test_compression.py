"""Compression keeps the facts and the limit, drops the noise, and never slices (S3)."""

from __future__ import annotations

import json
import re

import pytest

from memory.text.compression import clean, compress, compress_tool_result, entities
from memory.text.language import detect_language

SEED = "因为服务器故障（错误码 503），导致订单创建失败，请稍后重试"

LONG_ZH = (
    "你好，嗯，那个，我想跟你们反映一个问题啊，就是我上个月 15 号在你们官方旗舰店买了一台型号 X200 的扫地机器人，"
    "订单号是 TB20241015A88，花了 ¥2,499，结果用了不到两个星期就坏了，其实我一开始也没在意，以为是电量的问题，"
    "但是充满电以后还是开不了机，屏幕上一直显示错误码 E07，我打了你们的客服电话 400-888-1234 好几次都没人接，"
    "真的很让人生气，请问到底怎么处理？"
)
LONG_EN = (
    "Hi, um, so basically I ordered a Kindle Paperwhite from you guys on March 3rd, order #A-1029, and I paid $139.99 "
    "for it, and honestly I was really looking forward to it, but it never arrived, and the tracking number "
    "1Z999AA10123456784 has not been updated for like a week now, and I think that is really not acceptable, "
    "so please can you tell me what is going on, because I have been waiting since March and nobody has called me back."
)


def test_seed_example_becomes_effect_then_cause() -> None:
    # when
    result = compress(SEED)

    # then the fact and the code survive, the politeness is gone
    assert result == "订单创建失败，原因：服务器 503 错误"
    assert "请稍后重试" not in result


def test_english_cause_effect_keeps_the_failure_and_the_code() -> None:
    result = compress("Because the server failed (error code 503), order creation failed. Please try again later.")

    assert result.startswith("Order creation failed") or result.startswith("order creation failed")
    assert "503" in result
    assert "try again" not in result


def test_short_text_is_cleaned_but_keeps_every_fact() -> None:
    # given fillers around a name, an order number and a negation
    zh = "嗯，那个，我叫张伟，其实我就是想问一下，我的订单号是 ABC123，怎么还没到呢？"
    en = "Um, actually, I think my order #A-1029 has not arrived yet, please check it."

    # when
    zh_result, en_result = compress(zh), compress(en)

    # then
    for kept in ("张伟", "ABC123", "没到"):
        assert kept in zh_result
    for dropped in ("嗯", "其实", "一下"):
        assert dropped not in zh_result
    assert "#A-1029" in en_result
    assert "not arrived" in en_result
    for dropped in ("Um", "actually", "I think", "please"):
        assert dropped not in en_result


@pytest.mark.parametrize("limit", [150, 120, 100, 80, 60, 40, 25, 10, 3, 1])
@pytest.mark.parametrize("text", [LONG_ZH, LONG_EN, SEED])
def test_result_never_exceeds_the_limit(text: str, limit: int) -> None:
    assert len(compress(text, limit=limit)) <= limit


@pytest.mark.parametrize("text", [LONG_ZH, LONG_EN])
def test_entities_survive_when_they_fit(text: str) -> None:
    # given a text well over the limit
    assert len(text) > 150

    # when
    result = compress(text, limit=150)

    # then every promised entity is still there, verbatim
    found = entities(text)
    assert found
    assert [entity for entity in found if entity not in result] == []


def test_compression_is_not_slicing() -> None:
    # when
    result = compress(LONG_ZH, limit=80)

    # then it is not a prefix of the original, the last clause's question survives instead of the greeting
    assert not LONG_ZH.startswith(result.rstrip("…"))
    assert not result.startswith("你好")


def test_codes_are_never_cut_in_the_middle() -> None:
    codes = ["TB20241015A88", "400-888-1234", "E07", "1Z999AA10123456784", "#A-1029"]
    for text in (LONG_ZH, LONG_EN):
        for limit in (30, 50, 70, 90):
            result = compress(text, limit=limit)
            for code in codes:
                for size in range(3, len(code)):
                    # a fragment of a code may only appear as part of the whole code
                    if code[:size] in result and code not in result:
                        assert not re.search(re.escape(code[:size]) + r"(?![0-9A-Za-z-])", result), (code, result)


def test_negation_and_condition_survive_word_dropping() -> None:
    text = (
        "如果明天之前还是没有送到的话，我就一定要取消这个订单 DD88213 并且申请全额退款 ¥1,299，"
        "你们的服务实在是太让人失望了，我以后再也不会在你们这里买任何东西了"
    )

    result = compress(text, limit=45)

    assert len(result) <= 45
    assert "如果" in result
    assert "没有" in result or "没" in result
    assert "DD88213" in result


def test_last_resort_ends_at_a_token_boundary_with_an_ellipsis() -> None:
    # given one clause made of entities only, far over a tiny limit
    text = "SF1234567890 YT9876543210 ZTO7788990011 JD88776655"

    # when
    result = compress(text, limit=30)

    # then
    assert len(result) <= 30
    assert result.endswith("…")
    assert result[:-1].strip() in text
    assert all(part in text.split() for part in result[:-1].split())


def test_secrets_are_redacted_before_compressing() -> None:
    result = compress("我的API密钥是sk-proj-AbC123dEf456GhI789jKl012，手机号13912345678，password: hunter2")

    assert "sk-proj" not in result
    assert "hunter2" not in result
    assert "13912345678" in result


def test_deterministic() -> None:
    assert {compress(LONG_ZH, limit=70) for _ in range(3)} == {compress(LONG_ZH, limit=70)}
    assert {compress(LONG_EN, limit=70) for _ in range(3)} == {compress(LONG_EN, limit=70)}


def test_pure_filler_is_returned_rather_than_emptied() -> None:
    assert compress("好的，谢谢") == "好的，谢谢"
    assert clean("Thanks, bye!") == "Thanks, bye!"


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="limit"):
        compress("你好", limit=0)


def test_entities_in_both_languages() -> None:
    zh = entities("我叫张伟，手机 138-0000-0000，订单 ABC123 花了 ¥199，12 月 31 日前送到北京市朝阳区")
    en = entities("Thanks, Mel! I met Caroline in New York on May 20, 2023 and paid $25.50 for order A-1029.")

    for expected in ("张伟", "138-0000-0000", "ABC123", "¥199", "12 月 31 日", "北京市"):
        assert expected in zh
    for expected in ("Mel", "Caroline", "New York", "May 20, 2023", "$25.50", "A-1029"):
        assert expected in en
    assert "Thanks" not in en  # a sentence-initial word is not a name


def test_secrets_are_not_entities() -> None:
    found = entities("key sk-abcdefghijklmnopqrstuvwx and order ABC123")

    assert "ABC123" in found
    assert not any("sk-" in entity or "REDACTED" in entity for entity in found)


def test_detect_language() -> None:
    assert detect_language("我的订单到哪了") == "zh"
    assert detect_language("iPhone 15 Pro 多少钱") == "zh"
    assert detect_language("Where is my order?") == "en"
    assert detect_language("13912345678") == "zh"


def test_tool_result_keeps_meaningful_fields_only() -> None:
    # given a tool result with noise, a secret and nested items
    result = {
        "status": "shipped",
        "order_id": "ABC123",
        "eta": "2026-12-02",
        "courier": None,
        "notes": "",
        "tags": [],
        "tracking_url": "https://track.example.com/very/long/path/to/the/page?id=SF1234567890&utm_source=mail",
        "debug": {"trace": "Traceback (most recent call last): ..."},
        "request_id": "req-9f8a7b",
        "api_key": "sk-abcdefghijklmnopqrstuvwx",
    }

    # when
    rendered = compress_tool_result(result)

    # then
    assert rendered == "status=shipped; order_id=ABC123; eta=2026-12-02"


def test_tool_result_from_json_string_with_chinese_error_and_secret() -> None:
    payload = json.dumps(
        {
            "success": False,
            "error": {"code": "PAY_4021", "message": "银行卡余额不足，请更换支付方式", "stack": "at pay.py:12"},
            "amount": 199.0,
            "card_number": "4111 1111 1111 1111",
            "headers": {"Authorization": "Bearer abc123def456ghi"},
        },
        ensure_ascii=False,
    )

    rendered = compress_tool_result(payload)

    assert "code=PAY_4021" in rendered
    assert "余额不足" in rendered
    assert "amount=199.0" in rendered
    assert "success=false" in rendered
    for leaked in ("4111", "abc123def456ghi", "pay.py"):
        assert leaked not in rendered


def test_tool_result_limit_prefers_facts_over_line_items() -> None:
    # given a large result
    result = {
        "status": "partial",
        "order_id": "PO-2024-0317",
        "items": [{"sku": f"SKU{i:04d}", "qty": i, "price": i * 9.9, "color": "blue"} for i in range(40)],
        "total": 12800,
    }

    # when
    rendered = compress_tool_result(result, limit=80)

    # then
    assert len(rendered) <= 80
    assert rendered.startswith("status=partial; order_id=PO-2024-0317")
    assert "total=12800" in rendered


def test_tool_result_plain_text_is_compressed_text() -> None:
    rendered = compress_tool_result("查询失败，因为服务器故障（错误码 503），导致订单创建失败，请稍后重试", limit=40)

    assert len(rendered) <= 40
    assert "503" in rendered
