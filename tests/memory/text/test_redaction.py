"""Secrets never survive redaction; the facts a customer gives (phone, order, e-mail) always do."""

from __future__ import annotations

import copy
import json
import logging

import pytest

from memory.text.masking import mask_text
from memory.text.redaction import RedactingFilter, contains_secret, redact, redact_obj


@pytest.mark.parametrize(
    ("text", "secret", "kind"),
    [
        ("我的API密钥是sk-proj-AbC123dEf456GhI789jKl012，别告诉别人", "sk-proj-AbC123dEf456GhI789jKl012", "api_key"),
        ("Use mdk_live_8fK2mQ9xZ7pL3 for the widget", "mdk_live_8fK2mQ9xZ7pL3", "api_key"),
        ("aws key AKIAIOSFODNN7EXAMPLE leaked", "AKIAIOSFODNN7EXAMPLE", "api_key"),
        ("pat ghp_abcdefghijklmnopqrstuvwxyz0123456789 in git", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "api_key"),
        ("访问令牌：9f8Kq2Lm4Np6Rs8Tu0Vw，请保存", "9f8Kq2Lm4Np6Rs8Tu0Vw", "token"),
        ("client_secret=Zx81kLmQ0pW9rT7vB3nC", "Zx81kLmQ0pW9rT7vB3nC", "secret"),
    ],
)
def test_api_keys_and_labelled_tokens_are_replaced(text: str, secret: str, kind: str) -> None:
    # when
    result = redact(text)

    # then
    assert secret not in result
    assert f"[REDACTED:{kind}]" in result


def test_bearer_token_and_jwt_in_a_header() -> None:
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

    assert redact(f"Authorization: Bearer {jwt}") == "Authorization: Bearer [REDACTED:jwt]"
    assert redact('curl -H "Authorization: Bearer abc123def456ghi"') == (
        'curl -H "Authorization: Bearer [REDACTED:bearer_token]"'
    )


def test_prose_about_tokens_is_not_redacted() -> None:
    for text in ("Bearer authentication is used here", "the token is abcdefghijklmnopqrs", "the key is in the drawer"):
        assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password: hunter2", "password: [REDACTED:password]"),
        ("my password is S3cret!x", "my password is [REDACTED:password]"),
        ("我的密码是abc123，帮我登录一下", "我的密码是[REDACTED:password]，帮我登录一下"),
        ("密码：Passw0rd", "密码：[REDACTED:password]"),
        ("PIN码是 1234", "PIN码是 [REDACTED:password]"),
        ('{"password": "hunter2", "user": "bob"}', '{"password": "[REDACTED:password]", "user": "bob"}'),
    ],
)
def test_passwords_in_chinese_english_and_json(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_talking_about_a_password_keeps_the_sentence() -> None:
    for text in ("my password is wrong", "我的密码是多少？", "密码错误，请重试", "I forgot my password"):
        assert redact(text) == text


def test_card_numbers_are_luhn_checked() -> None:
    # given a valid Visa test number written three ways, and a 16-digit number that fails Luhn
    valid = ["4111 1111 1111 1111", "4111-1111-1111-1111", "4111111111111111"]
    invalid = "4111 1111 1111 1112"

    # then
    for number in valid:
        assert redact(f"卡号 {number} 请扣款") == "卡号 [REDACTED:card_number] 请扣款"
    assert redact(f"card {invalid}") == f"card {invalid}"


def test_a_long_order_number_is_not_mistaken_for_a_card() -> None:
    # given Luhn-valid 16-digit numbers right after an order or transaction word
    for text in ("订单号 4111111111111111 已发货", "支付流水号 4111111111111111", "transaction 4111111111111111"):
        assert redact(text) == text


def test_cvv_after_its_label_and_chinese_id_number() -> None:
    assert redact("安全码 123，有效期 12/28") == "安全码 [REDACTED:cvv]，有效期 12/28"
    assert redact("CVV: 987") == "CVV: [REDACTED:cvv]"
    assert redact("身份证号110101199003071234，请核实") == "身份证号[REDACTED:id_number]，请核实"


@pytest.mark.parametrize(
    "text",
    [
        "我的身份证 11010519491231002X 丢了",  # a valid check digit, no label needed
        "number 11010519491231002x please",  # lower-case x
        "身份证号：110101199003071234",  # a mistyped one, but labelled: still an identity number
        "ID card no. 110101199003071234",
    ],
)
def test_an_identity_number_is_redacted_when_its_check_digit_holds_or_a_label_says_so(text) -> None:
    assert "[REDACTED:id_number]" in redact(text)
    assert "[REDACTED:id_number]" not in text


@pytest.mark.parametrize(
    "number",
    [
        "44030420240318009X",  # region, a date and a sequence, but the check digit fails: a work order number
        "110105199003071234",
        "320311197001012345",
    ],
)
def test_an_order_number_with_a_date_inside_is_kept_and_not_masked(number) -> None:
    # given an 18-character number shaped like a resident ID whose MOD 11-2 check digit does not hold
    text = f"工单号 {number} 已完成"
    # then it is neither redacted nor masked: it is the customer's order, a fact memory keeps
    assert redact(text) == text
    assert mask_text(text) == text


def test_phone_order_and_email_are_memories_not_secrets() -> None:
    text = "手机号13912345678，+86 139 1234 5678，订单号ABC123，邮箱zhang@example.com，order #A-1029"

    assert redact(text) == text
    assert not contains_secret(text)


def test_redact_is_idempotent() -> None:
    text = "key AKIAIOSFODNN7EXAMPLE, 密码是abc123, password='x1y2z3', https://bob:s3cret@db.example.com/x"

    once = redact(text)

    assert redact(once) == once
    assert "s3cret" not in once
    assert "abc123" not in once


def test_contains_secret() -> None:
    assert contains_secret("我的密码是abc123")
    assert contains_secret("sk-abcdefghijklmnopqrstuvwx")
    assert not contains_secret("我的订单号是 ABC123")


def test_redact_obj_replaces_sensitive_fields_wholesale_and_recurses() -> None:
    # given a tool result with secrets at several depths
    tool_result = {
        "status": "ok",
        "password": "hunter2",
        "headers": {"Authorization": "Bearer abc", "X-Api-Key": 12345},
        "items": [{"card_number": "4111", "note": "用 sk-abcdefghijklmnopqrstuvwx 调用"}],
        "db_password": None,
        "usage": {"prompt_tokens": 12, "total_tokens": 40},
        "phone": "13912345678",
    }
    original = copy.deepcopy(tool_result)

    # when
    result = redact_obj(tool_result)

    # then
    assert result["password"] == "[REDACTED:password]"
    assert result["headers"] == {"Authorization": "[REDACTED:token]", "X-Api-Key": "[REDACTED:api_key]"}
    assert result["items"][0] == {"card_number": "[REDACTED:card_number]", "note": "用 [REDACTED:api_key] 调用"}
    assert result["db_password"] is None
    assert result["usage"] == {"prompt_tokens": 12, "total_tokens": 40}
    assert result["phone"] == "13912345678"
    assert tool_result == original  # the input is not modified
    assert "hunter2" not in json.dumps(result)


def test_logging_filter_redacts_message_args_and_exceptions() -> None:
    # given a logger whose handler carries the filter
    records: list[str] = []

    class ListHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = ListHandler()
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("tests.intelligence.redaction")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        # when
        logger.warning("login for %s with password: %s", "bob", "hunter2")
        logger.warning("用户说：我的密码是abc123")
        try:
            raise ValueError("bad key sk-abcdefghijklmnopqrstuvwx")
        except ValueError:
            logger.exception("tool failed")
    finally:
        logger.removeHandler(handler)

    # then
    joined = "\n".join(records)
    for secret in ("hunter2", "abc123", "sk-abcdefghijklmnopqrstuvwx"):
        assert secret not in joined
    assert "login for bob with password: [REDACTED:password]" in joined
    assert "ValueError: bad key [REDACTED:api_key]" in joined


@pytest.mark.parametrize(
    "iban",
    [
        "DE89 3704 0044 0532 0130 00",
        "DE89370400440532013000",
        "GB82 WEST 1234 5698 7654 32",
        "fr76 3000 6000 0112 3456 7890 189",
    ],
)
def test_a_real_iban_is_redacted_printed_or_compact(iban: str) -> None:
    # when
    result = redact(f"请退款到我的账户 IBAN {iban}，谢谢")

    # then
    assert result == "请退款到我的账户 IBAN [REDACTED:iban]，谢谢"


def test_an_iban_look_alike_failing_mod_97_is_kept() -> None:
    # given the same shape as a German IBAN with one check digit changed, and codes that only start like one
    for text in (
        "IBAN DE88 3704 0044 0532 0130 00",
        "运单号 SF1234567890123 已签收",
        "ref DE89370400440532013000X7",
    ):
        # then
        assert redact(text) == text


def test_a_failing_look_alike_does_not_hide_a_real_iban_after_it() -> None:
    assert redact("AB12 DE89 3704 0044 0532 0130 00") == "AB12 [REDACTED:iban]"


def test_swift_bic_is_redacted_only_after_its_label() -> None:
    assert redact("SWIFT/BIC: DEUTDEFFXXX") == "SWIFT/BIC: [REDACTED:swift_bic]"
    assert redact("我的SWIFT代码是BKCHCNBJ") == "我的SWIFT代码是[REDACTED:swift_bic]"
    for text in ("DEUTDEFF is our partner", "the swift transfer is done", "BIC is unknown"):
        assert redact(text) == text


def test_a_chinese_bank_card_after_its_label_is_redacted_whatever_its_first_digit() -> None:
    # given a 19-digit Luhn-valid debit card starting with 9 (not a payment-network prefix)
    assert redact("借记卡 9558800200135073266 请查询") == "借记卡 [REDACTED:card_number] 请查询"
    assert redact("银行卡号：6222 0212 3456 7890 128") == "银行卡号：[REDACTED:card_number]"
    # and unlabelled, a 9… number stays (order and tracking numbers look like that)
    assert redact("编号 9558800200135073266") == "编号 9558800200135073266"


def test_bank_identifiers_never_reach_a_memory_unit() -> None:
    from memory.conversation.units import split_units

    # when a customer's message becomes memory units
    units = split_units("退款请打到 DE89 3704 0044 0532 0130 00，SWIFT: DEUTDEFF，手机13912345678")

    # then
    joined = " ".join(units)
    assert "3704" not in joined
    assert "DEUTDEFF" not in joined
    assert "13912345678" in joined
    assert redact_obj({"iban": "DE89370400440532013000", "swift_code": "DEUTDEFF"}) == {
        "iban": "[REDACTED:iban]",
        "swift_code": "[REDACTED:swift_bic]",
    }
