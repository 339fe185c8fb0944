"""Rule extraction: the right facts, typed and timed, in Chinese and English; never a secret, never a guess."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memory.extraction.rules import LIFETIMES, Fact, extract_facts, is_confirmation
from memory.text.language import detect_language

NOW = datetime(2026, 11, 10, 9, 0, tzinfo=UTC)
SHANGHAI = timezone(timedelta(hours=8))


def facts_by_key(text: str, **kwargs: object) -> dict[str, list[Fact]]:
    result: dict[str, list[Fact]] = {}
    for fact in extract_facts(text, now=NOW, **kwargs):  # type: ignore[arg-type]
        result.setdefault(fact.key, []).append(fact)
    return result


def values(text: str, key: str, **kwargs: object) -> list[str]:
    return [fact.value for fact in facts_by_key(text, **kwargs).get(key, [])]


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("我叫张伟，手机号是 139 1234 5678", "张伟"),
        ("你好，我是王芳，会员号 VIP20230815", "王芳"),
        ("我的名字是陈静", "陈静"),
        ("My name is John Smith and I need help", "John Smith"),
        ("Hi, I'm Sarah. My order is late.", "Sarah"),
    ],
)
def test_introduced_names(text: str, name: str) -> None:
    assert values(text, "name") == [name]


def test_surname_only() -> None:
    (fact,) = facts_by_key("本人姓李，在北京上班")["name"]

    assert fact.value == "李"
    assert fact.data == {"surname": "李"}
    assert fact.content == "用户姓李"


@pytest.mark.parametrize(
    "text",
    [
        "I'm fine, thanks",
        "I'm Chinese and I live in Shanghai",
        "我是新用户，不太会操作",
        "谢谢你，张经理说会回电",
        "I am calling about my bill",
    ],
)
def test_no_name_without_an_introduction(text: str) -> None:
    assert values(text, "name") == []


@pytest.mark.parametrize(
    ("text", "phone"),
    [
        ("我的手机号是13912345678", "13912345678"),
        ("电话 139-1234-5678，白天都在", "13912345678"),
        ("号码 +86 139 1234 5678", "13912345678"),
        ("call me on +1 415 555 0100", "+14155550100"),
        ("my phone number is (415) 555-0100", "+14155550100"),
        ("公司电话 0755-8888 6666", "075588886666"),
    ],
)
def test_phone_numbers(text: str, phone: str) -> None:
    (fact,) = facts_by_key(text)["phone"]

    assert fact.value == phone
    assert fact.data == {"phone": phone}
    assert fact.type == "user_profile"
    assert fact.expires_in == 30 * 86400


def test_international_phone_content_keeps_its_written_form() -> None:
    (fact,) = facts_by_key("My phone is +1 415 555 0100")["phone"]

    assert fact.content == "User's phone: +1 415 555 0100"


@pytest.mark.parametrize(
    "text",
    [
        "请帮我查一下12345678",
        "订单号 20240513889 还没到",
        "一共 10 个，已经加了 3 个",
        "流水号 2024110612345678",
        "你们客服电话 400-820-8820 根本打不通",
    ],
)
def test_a_plain_number_is_not_a_phone(text: str) -> None:
    assert values(text, "phone") == []


def test_a_courier_phone_stated_by_the_agent_is_not_the_users() -> None:
    text = "工程师刘师傅（电话 186 2000 3344）将于明天上门"

    assert values(text, "phone", role="assistant") == []
    assert values("请您保持手机 13912345678 畅通", "phone", role="assistant") == ["13912345678"]


def test_email_and_its_content_in_each_language() -> None:
    (zh,) = facts_by_key("发票请发到 liming@Example.com，谢谢")["email"]
    (en,) = facts_by_key("my e-mail is John@Example.COM")["email"]

    assert zh.value == "liming@example.com"
    assert zh.content == "用户邮箱：liming@example.com"
    assert en.content == "User's e-mail: John@example.com"


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("我的订单号是 ABC123，怎么还没到", "order_id", "ABC123"),
        ("单号 TB1188776655，衣服尺码不对", "order_id", "TB1188776655"),
        ("Where is order #A-1029?", "order_id", "A-1029"),
        ("快递单号 YT9876543210 显示已签收", "tracking_number", "YT9876543210"),
        ("顺丰 SF1234567890 到哪了", "tracking_number", "SF1234567890"),
        ("tracking number 1Z999AA10123456784 is stuck", "tracking_number", "1Z999AA10123456784"),
    ],
)
def test_order_and_tracking_numbers(text: str, key: str, value: str) -> None:
    (fact,) = facts_by_key(text)[key]

    assert fact.value == value
    assert (fact.type, fact.expires_in) == LIFETIMES[key]


def test_an_order_or_a_complaint_named_without_its_id_gives_no_order_id() -> None:
    # a complaint's id is the customer's case (test_whose_in_context); its word alone names none
    assert values("您的投诉单已提交，请耐心等待", "order_id", role="assistant") == []
    assert values("订单创建失败", "order_id") == []


def test_agent_issued_coupon_lives_until_its_expiry() -> None:
    # when the agent issues a coupon valid until 31 December
    text = "已为您发放优惠券 SAVE20，有效期至 12 月 31 日，下单时自动抵扣。"
    (fact,) = facts_by_key(text, role="assistant")["coupon"]

    # then it expires at the end of that day, not after the default 30 days
    end_of_day = datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert fact.value == "SAVE20"
    assert fact.type == "fact_reference"
    assert fact.expires_in == int((end_of_day - NOW).total_seconds())
    assert fact.data["expires_at"] == "2026-12-31T23:59:59+00:00"
    assert fact.content == "已发放优惠券 SAVE20，有效期至 2026-12-31"
    assert values("已为您发放优惠券 SAVE20，有效期至 12 月 31 日", "date", role="assistant") == []


def test_english_coupon_with_days_of_validity() -> None:
    (fact,) = facts_by_key("Here is your coupon code WELCOME30, valid for 7 days.", role="assistant")["coupon"]

    assert fact.data["valid_until"] == "2026-11-17"
    assert fact.content == "Coupon issued: WELCOME30, valid until 2026-11-17"


def test_an_already_expired_coupon_is_not_remembered() -> None:
    assert values("优惠码 NEWUSER50 有效期至 2024-10-31", "coupon", role="assistant") == []


@pytest.mark.parametrize(
    ("text", "amount", "currency"),
    [
        ("为什么扣了 ¥299.00？", "299", "CNY"),
        ("退款 199 元什么时候到账", "199", "CNY"),
        ("It cost $25.50 last week", "25.50", "USD"),
        ("I paid 25 dollars for shipping", "25", "USD"),
        ("预算大概 30 万元", "300000", "CNY"),
        ("总价 ¥1,299", "1299", "CNY"),
    ],
)
def test_amounts_with_currency(text: str, amount: str, currency: str) -> None:
    (fact,) = facts_by_key(text)["amount"]

    assert fact.data == {"amount": amount, "currency": currency}
    assert fact.type == "session_state"


def test_relative_and_absolute_dates_are_resolved_to_utc() -> None:
    # given a user in Shanghai (UTC+8) on 10 November 2026, 17:00 local
    now = datetime(2026, 11, 10, 17, 0, tzinfo=SHANGHAI)

    # when
    (tomorrow,) = [f for f in extract_facts("明天下午3点送到", now=now) if f.key == "date"]
    (absolute,) = [f for f in extract_facts("2026-12-02 之前必须到", now=now) if f.key == "date"]
    (english,) = [f for f in extract_facts("Please deliver it next Monday", now=NOW) if f.key == "date"]

    # then
    assert tomorrow.value == "2026-11-11T07:00:00+00:00"
    assert tomorrow.data["granularity"] == "minute"
    assert tomorrow.data["text"] == "明天下午3点"
    assert absolute.value == "2026-12-01T16:00:00+00:00"
    assert absolute.data["local_date"] == "2026-12-02"
    assert english.data["local_date"] == "2026-11-16"


def test_a_month_and_day_without_year_take_the_nearest_year() -> None:
    (past,) = [f for f in extract_facts("我 11 月 3 日就申请了退款", now=NOW) if f.key == "date"]
    (january,) = [f for f in extract_facts("1 月 9 日到期", now=NOW) if f.key == "date"]

    assert past.data["local_date"] == "2026-11-03"
    assert january.data["local_date"] == "2027-01-09"


def test_naive_now_is_taken_as_utc() -> None:
    (fact,) = [f for f in extract_facts("today", now=datetime(2026, 1, 5, 12, 0)) if f.key == "date"]  # noqa: DTZ001

    assert fact.value == "2026-01-05T00:00:00+00:00"


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("收货地址改成上海市浦东新区世纪大道 100 号 2 栋 301 室，谢谢", "上海市浦东新区世纪大道 100 号 2 栋 301 室"),
        ("我在天津市和平区南京路 189 号等了一上午", "天津市和平区南京路 189 号"),
        ("Please ship it to 123 Main Street, Springfield, IL 62704", "123 Main Street, Springfield, IL 62704"),
    ],
)
def test_addresses(text: str, address: str) -> None:
    (fact,) = facts_by_key(text)["address"]

    assert fact.value == address
    assert fact.type == "user_profile"


def test_a_store_address_stated_by_the_agent_is_not_the_users() -> None:
    assert values("门店地址为深圳市南山区科技园南路 18 号", "address", role="assistant") == []


def test_products() -> None:
    assert values("我上周买的 iPhone 15 Pro 怎么还没到", "product") == ["iPhone 15 Pro"]
    assert values("那个型号 X200 的扫地机器人有货吗", "product") == ["X200"]
    assert values("Is the MacBook Air M2 in stock?", "product") == ["MacBook Air M2"]


def test_session_topic() -> None:
    (zh,) = facts_by_key("我在查 10 月账单，为什么这么多")["current_topic"]
    (en,) = facts_by_key("I'm checking my October bill")["current_topic"]

    assert zh.value == "10 月账单"
    assert (zh.type, zh.expires_in) == ("session_state", 86400)
    assert zh.content == "当前咨询：10 月账单"
    assert en.value == "October bill"
    assert values("我在查 10 月账单", "current_topic", role="assistant") == []


def test_pos_fallback_place_and_organization() -> None:
    found = facts_by_key("我在上海工作，发票抬头是北京星辰科技有限公司")

    assert [f.value for f in found["place"]] == ["上海"]
    assert [f.value for f in found["organization"]] == ["北京星辰科技有限公司"]


def test_places_the_agent_names_are_not_facts_about_the_user() -> None:
    text = "包裹已到达上海，明天送达"

    assert values(text, "place", role="user") == ["上海"]
    assert values(text, "place", role="assistant") == []


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("我换号了，新号是 13800138000", "phone", "13800138000"),
        ("收货地址改成杭州市西湖区文三路 259 号", "address", "杭州市西湖区文三路 259 号"),
        ("不是这个地址，是杭州市西湖区文三路 259 号", "address", "杭州市西湖区文三路 259 号"),
        ("My new number is +44 20 7946 0958", "phone", "+442079460958"),
        ("I changed my e-mail to jane@new.org", "email", "jane@new.org"),
    ],
)
def test_explicit_changes_are_flagged(text: str, key: str, value: str) -> None:
    (fact,) = facts_by_key(text)[key]

    assert fact.value == value
    assert fact.change is True


def test_change_content_says_updated() -> None:
    (zh,) = facts_by_key("我换号了，新号是 13800138000")["phone"]
    (en,) = facts_by_key("I changed my e-mail to jane@new.org")["email"]

    assert zh.content == "用户手机号已更新为：13800138000"
    assert en.content == "User's e-mail updated to: jane@new.org"


def test_plain_statement_is_not_a_change() -> None:
    (fact,) = facts_by_key("我的手机号是 13912345678")["phone"]

    assert fact.change is False


def test_a_change_marker_after_the_value_does_not_flag_it() -> None:
    found = facts_by_key("预约从 11 月 12 日下午 2 点改到 11 月 14 日上午 10 点")["date"]

    assert [f.change for f in found] == [False, True]


def test_secrets_never_become_facts() -> None:
    # given a password that looks like a phone number and a card number that looks like an amount
    found = facts_by_key("我的密码是13912345678，卡号 4111 1111 1111 1111，API key sk-abcdefghijklmnopqrstuvwx")

    assert "phone" not in found
    for facts in found.values():
        for fact in facts:
            assert "13912345678" not in fact.content
            assert "4111" not in fact.content


def test_every_fact_follows_the_lifetime_table_and_fits_150_chars() -> None:
    text = (
        "我叫张伟，手机 13912345678，邮箱 zw@example.com，住在北京市朝阳区建国路 88 号，订单号 ABC123，"
        "快递单号 SF1234567890，买的 iPhone 15 Pro 花了 ¥8,999，明天下午3点送到，我在查 10 月账单"
    )

    facts = extract_facts(text, now=NOW)

    keys = {fact.key for fact in facts}
    assert {
        "name",
        "phone",
        "email",
        "address",
        "order_id",
        "tracking_number",
        "product",
        "amount",
        "date",
        "current_topic",
    } <= keys
    for fact in facts:
        assert (fact.type, fact.expires_in) == LIFETIMES[fact.key]
        assert 0 < len(fact.content) <= 150


def test_facts_are_deterministic_and_in_text_order() -> None:
    text = "订单号 ABC123，手机 13912345678，金额 ¥199"

    first = extract_facts(text, now=NOW)

    assert first == extract_facts(text, now=NOW)
    assert [f.key for f in first] == ["order_id", "phone", "amount"]


def test_lifetime_table() -> None:
    assert LIFETIMES["name"] == ("user_profile", 2592000)
    assert LIFETIMES["phone"] == ("user_profile", 2592000)
    assert LIFETIMES["order_id"] == ("fact_reference", 2592000)
    assert LIFETIMES["current_topic"] == ("session_state", 86400)
    assert {memory_type for memory_type, _ in LIFETIMES.values()} <= {"user_profile", "session_state", "fact_reference"}


CONFIRMATIONS = [
    "对，就是这个号",
    "没错",
    "是的",
    "对的，13912345678",
    "确认无误",
    "yes that's right",
    "Correct!",
    "Yep, that's it.",
]


@pytest.mark.parametrize("text", CONFIRMATIONS)
def test_confirmations(text: str) -> None:
    assert is_confirmation(text) is True


@pytest.mark.parametrize(
    "text",
    [
        "不对",
        "不是这个",
        "对了，我想问一下退款",
        "是的，不过我换号了",
        "yes, but my new number is 555 0100",
        "no",
        "好的",
        "我是张伟",
        "that's not right",
        "",
    ],
)
def test_not_confirmations(text: str) -> None:
    assert is_confirmation(text) is False


def test_detect_language_is_exported() -> None:
    assert detect_language("我要退款") == "zh"
    assert detect_language("I want a refund") == "en"


def test_empty_text_gives_no_facts() -> None:
    assert extract_facts("   ", now=NOW) == []


@pytest.mark.parametrize("text", ["买的东西什么时候到", "公司福利怎么领", "上门安装要多久"])
def test_everyday_words_tagged_as_places_are_not_places(text: str) -> None:
    assert "place" not in facts_by_key(text)


@pytest.mark.parametrize(
    ("text", "local_date", "utc"),
    [
        ("下个月15号再说", "2026-12-15", "2026-12-15T00:00:00+00:00"),
        ("本月底之前", "2026-11-30", "2026-11-30T00:00:00+00:00"),
        ("12月底给我答复", "2026-12-31", "2026-12-31T00:00:00+00:00"),
        ("三月十二号那天", "2027-03-12", "2027-03-12T00:00:00+00:00"),
        ("明天下午三点", "2026-11-11", "2026-11-11T15:00:00+00:00"),
        ("by the end of next month", "2026-12-31", "2026-12-31T00:00:00+00:00"),
    ],
)
def test_chinese_month_relative_dates_and_numeral_dates(text: str, local_date: str, utc: str) -> None:
    (fact,) = facts_by_key(text)["date"]

    assert fact.data["local_date"] == local_date
    assert fact.value == utc


def test_a_correction_that_starts_with_budui_is_a_change() -> None:
    (fact,) = facts_by_key("不对，我的号码是13912345678")["phone"]

    assert fact.change is True
    assert fact.content == "用户手机号已更新为：13912345678"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("My flat is 14 Elm Grove, Leeds LS6 2AB and the parcel never came", "14 Elm Grove, Leeds LS6 2AB"),
        ("to Flat 4B, 27 Carlisle Road, Brighton BN3 4FR please", "Flat 4B, 27 Carlisle Road, Brighton BN3 4FR"),
        ("I've got unit 7/42 Bondi Rd, Bondi NSW 2026 as my address", "unit 7/42 Bondi Rd, Bondi NSW 2026"),
        ("I'm at 77 West 85th Street, Apt 2R, New York, NY 10024", "77 West 85th Street, Apt 2R, New York, NY 10024"),
        # floors, towers and blocks before the number; a suburb and its city after the street
        (
            "my flat is Flat C, 9/F, Block 2, 18 Tai Hang Road, Causeway Bay, Hong Kong.",
            "Flat C, 9/F, Block 2, 18 Tai Hang Road, Causeway Bay, Hong Kong",
        ),
        (
            "I live at 5 Marine Parade, Mount Maunganui, Tauranga 3116 now",
            "5 Marine Parade, Mount Maunganui, Tauranga 3116",
        ),
        ("send it to 3 Park Lane, Bath, Anna will sign for it", "3 Park Lane, Bath"),
        ("收货地址填的浙江省杭州市西湖区文三路478号华星小区6幢", "浙江省杭州市西湖区文三路478号华星小区6幢"),
        (
            "我那个地址就是江苏南京鼓楼区中央路201号金轮新天地11栋1104 你们上次送到隔壁单元了",
            "江苏南京鼓楼区中央路201号金轮新天地11栋1104",
        ),
    ],
)
def test_an_address_is_taken_whole_and_nothing_more(text: str, value: str) -> None:
    # the unit before the street, the town and the country's postcode belong to it; the words of the sentence
    # around it do not
    assert [fact.value for fact in extract_facts(text) if fact.key == "address"] == [value]


def test_a_street_name_without_a_number_is_no_address() -> None:
    assert [fact for fact in extract_facts("Hi, Main Street is closed today") if "address" in fact.key] == []


@pytest.mark.parametrize(
    ("text", "role", "value"),
    [
        ("Never mind, I'll check the app myself. Thanks anyway\n— Aisha", "user", "Aisha"),
        ("Priya Nair speaking. I'd like to dispute a charge on my card.", "user", "Priya Nair"),
        ("Hi, it's Tom Becker, my number's 303-555-0185", "user", "Tom Becker"),
        ("I've confirmed the account holder as Kenji Tanaka and unlocked it.", "assistant", "Kenji Tanaka"),
        ("Thanks, Ms. Kowalski — I've found the booking under Marta Kowalski.", "assistant", "Marta Kowalski"),
        ("周明轩先生您好，已为您重新安排燃气表检修。", "assistant", "周明轩"),
        ("Pasting my own signature so you have everything:\n\nHannah Cole\nSenior Analyst", "user", "Hannah Cole"),
        ("我把我的邮件签名贴给你：\n李婉清\n市场部经理", "user", "李婉清"),
        ("已将实名信息中的姓名由“张小雯”更正为“张晓雯”，请您再核对一下。", "assistant", "张晓雯"),
    ],
)
def test_the_customers_name_said_as_people_say_it(text: str, role: str, value: str) -> None:
    assert [fact.value for fact in extract_facts(text, role=role) if fact.key == "name"] == [value]


@pytest.mark.parametrize(
    ("text", "role"),
    [
        ("It's Monday and nothing came", "user"),
        ("Someone here broke the box", "user"),
        ("Hello! My name is Rachel, I'll be looking after you today.", "assistant"),  # the agent's own
    ],
)
def test_words_that_only_look_like_a_name_give_none(text: str, role: str) -> None:
    assert [fact for fact in extract_facts(text, role=role) if fact.key == "name"] == []


@pytest.mark.parametrize(
    ("text", "role", "values"),
    [
        (
            "Both of your orders, #US-55012 and #US-55019, have been merged into one shipment.",
            "assistant",
            ["US-55012", "US-55019"],
        ),
        (
            "您名下一共有两笔待处理订单：20261101009871 和 20261102004456，请问要退的是哪一笔呢？",
            "assistant",
            ["20261101009871", "20261102004456"],
        ),
        ("I've now pulled up the order, 2026-1101-737.", "assistant", ["2026-1101-737"]),
    ],
)
def test_every_order_named_is_kept_even_when_numbered_one_after_the_other(text: str, role: str, values: list[str]):
    # two orders a digit apart are two orders, not a slip and its fix
    assert [fact.value for fact in extract_facts(text, role=role) if fact.key == "order_id"] == values
