"""Whose fact is it: only the end user's own phone, e-mail, address, name and birthday land on their keys.

And the Chinese customer-service facts: dated events, Chinese numerals, international numbers in E.164, account
ids, membership tiers, points, callbacks, coupon validity and batch progress. Pure: no database.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.extraction.rules import LIFETIMES, Fact, disowned_keys, extract_facts
from memory.text.numerals import parse_number

NOW = datetime(2026, 11, 10, 9, 0, tzinfo=UTC)  # a Tuesday
# chat.turn.prepare.ANCHOR_KEYS, written out: importing the chat runtime would need Django.
ANCHOR_KEYS = {"name", "phone", "email", "order_id", "address", "current_topic"}
PROFILE_KEYS = {"name", "phone", "email", "address", "birthday"}


def facts(text: str, role: str = "user") -> dict[str, list[Fact]]:
    found: dict[str, list[Fact]] = {}
    for fact in extract_facts(text, role=role, now=NOW):
        found.setdefault(fact.key, []).append(fact)
    return found


def values(text: str, key: str, role: str = "user") -> list[str]:
    return [fact.value for fact in facts(text, role).get(key, [])]


# --------------------------------------------------------------------------------------------------------------
# Someone else's number, address or name
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "您可以打010-89617093这个号码咨询景区",
        "我们的客服热线 400-820-8820，全天有人接听",
        "快递员电话 138 0013 8000，他下午会联系您",
        "酒店电话是 0871-6512 3456，您可以直接问前台",
        "骑手电话 17788889999，餐已经在路上了",
        "您的订单已发货，如有问题请拨打 0755-8899 7766 联系商家",
        "短信模板写的是“请拨打 13800000000 联系我们”",
        "You can call the hotel at +1 (415) 555-2671",
        "Our support line is 415-555-0199, open 9 to 5",
        "Call 1-888-555-0123, our toll-free line",
        "The driver's number is 202-555-0119 if you need it",
        "You can call 312-555-0175 for store hours",
    ],
)
def test_a_number_the_agent_gives_for_a_place_a_company_or_a_courier_is_not_the_users(text: str) -> None:
    found = facts(text, role="assistant")

    assert "phone" not in found
    assert "contact_phone" not in found


@pytest.mark.parametrize(
    "text",
    [
        "门店地址在深圳市南山区科技园南路 18 号，营业到晚上 9 点",
        "我们仓库地址是东莞市长安镇振安路 168 号，退货请寄到这里",
        "Our store is located at 200 Park Avenue, New York, NY 10166",
        "The office for returns is at 45 Commerce Drive, Dallas, TX 75201",
    ],
)
def test_an_address_the_agent_gives_for_a_store_or_warehouse_is_nobodys_profile(text: str) -> None:
    assert not {"address", "work_address", "contact_address"} & set(facts(text, role="assistant"))


@pytest.mark.parametrize(
    "text",
    [
        "你们客服电话 400-800-1234 一直占线",
        "快递员电话 13698765432 打不通",
        "酒店前台电话是 0871-6512 3456，能帮我确认一下吗",
        "帮我查一下 010-6552 9988 是哪家店的电话",
        "比如我填 13900000000 这种格式可以吗",
        "Your customer service line 1-800-555-0100 never answers",
        "The hotel's number is +1 (702) 555-0188",
        "For example, a number like 555-123-4567 would be rejected?",
    ],
)
def test_a_hotline_a_venue_or_an_example_the_user_mentions_is_not_their_phone(text: str) -> None:
    assert "phone" not in facts(text)


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("我老婆的电话是13800001111，她白天在家", "contact_phone", "13800001111"),
        ("我妈的手机 15900002222，帮忙通知她一下", "contact_phone", "15900002222"),
        ("收件人是我爸，电话 13312345678", "contact_phone", "13312345678"),
        ("寄到南京市鼓楼区湖南路 15 号 3 栋 201，收件人周桂芳，电话 138 5190 3327", "contact_phone", "13851903327"),
        (
            "寄到南京市鼓楼区湖南路 15 号 3 栋 201，收件人周桂芳，电话 138 5190 3327",
            "contact_address",
            "南京市鼓楼区湖南路 15 号 3 栋 201",
        ),
        (
            "王子豪，寄到武汉市洪山区珞喻路 1037 号，他电话 186 2714 0593",
            "contact_address",
            "武汉市洪山区珞喻路 1037 号",
        ),
        ("My wife's number is 917-555-0123, she'll sign for it", "contact_phone", "+19175550123"),
        ("Please call my husband at 312-555-0144 instead", "contact_phone", "+13125550144"),
        ("寄到我妈家，地址是武汉市江汉区解放大道 690 号", "contact_address", "武汉市江汉区解放大道 690 号"),
        (
            "Send it to my brother, he lives at 12 Elm Street, Boston, MA 02108",
            "contact_address",
            "12 Elm Street, Boston, MA 02108",
        ),
        ("寄到我公司吧，地址是上海市徐汇区漕溪北路 88 号 15 楼", "work_address", "上海市徐汇区漕溪北路 88 号 15 楼"),
        (
            "Send it to my office address: 500 Market Street, San Francisco, CA 94105",
            "work_address",
            "500 Market Street, San Francisco, CA 94105",
        ),
    ],
)
def test_a_third_party_the_user_names_gets_its_own_key_never_the_users(text: str, key: str, value: str) -> None:
    # when
    found = facts(text)

    # then the value is kept under a key that is no anchor key and is no profile
    assert [fact.value for fact in found[key]] == [value]
    assert not {"phone", "address", "name"} & set(found)
    assert key not in ANCHOR_KEYS
    assert found[key][0].type == "fact_reference"


def test_the_user_as_the_recipient_keeps_their_own_address() -> None:
    found = facts("寄到上海市徐汇区宜山路 700 号 B 座 1603，收件人是我，电话 13917024486")

    assert [f.value for f in found["address"]] == ["上海市徐汇区宜山路 700 号 B 座 1603"]
    assert [f.value for f in found["phone"]] == ["13917024486"]


def test_a_contacts_fact_says_who_the_contact_is() -> None:
    (zh,) = facts("我老婆的电话是13800001111，快递到了打给她")["contact_phone"]
    (en,) = facts("my wife's number is +1 415 555 0100, she'll collect it")["contact_phone"]

    assert zh.data == {"phone": "13800001111", "contact": "我老婆"}
    assert zh.content == "联系人电话：我老婆 13800001111"
    assert en.data["contact"] == "wife"


@pytest.mark.parametrize(
    "text",
    [
        "我同事的邮箱是 liu.yang@company.cn，抄送给他",
        "我老婆的名字是王芳",
        "我妈生日是5月20号，想给她挑个礼物",
        "My mom's email is linda.s@aol.com",
        "My son's birthday is on June 3, can I add a card?",
        "我朋友的订单号 TB77889900 也帮忙查一下",
    ],
)
def test_a_third_partys_email_name_birthday_or_order_is_not_kept_as_the_users(text: str) -> None:
    assert not (PROFILE_KEYS | {"order_id"}) & set(facts(text))


def test_a_work_phone_is_still_the_users_phone() -> None:
    assert values("公司电话 0755-2688 1234 找我也行", "phone") == ["075526881234"]
    assert values("my work phone is 650-555-0133", "phone") == ["+16505550133"]


def test_a_number_the_user_bought_near_a_shop_is_still_theirs() -> None:
    # a shop mentioned in passing is no possessor of the number that follows
    assert values("我在门店买的，手机号 13912345678", "phone") == ["13912345678"]
    assert values("I'm at the airport, my cell is 415-555-0109", "phone") == ["+14155550109"]


# --------------------------------------------------------------------------------------------------------------
# The user's own, from either side
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("我的手机号是13912345678", "phone", "13912345678"),
        ("13912345678", "phone", "13912345678"),
        ("zhangsan_88@outlook.com", "email", "zhangsan_88@outlook.com"),
        (
            "寄到我家：广州市天河区天河路 385 号太古汇 2 座 1201 室",
            "address",
            "广州市天河区天河路 385 号太古汇 2 座 1201 室",
        ),
        ("我叫王芳，我老公的电话是 13900001111", "name", "王芳"),
        ("call me on 020 7946 0321", "phone", "+442079460321"),
        ("I live at 742 Evergreen Terrace, Springfield", "address", "742 Evergreen Terrace, Springfield"),
        ("my email is tom@example.org, not my wife's", "email", "tom@example.org"),
    ],
)
def test_the_user_speaking_of_themselves(text: str, key: str, value: str) -> None:
    assert values(text, key) == [value]


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("您的手机号是 13912345678，对吗？", "phone", "13912345678"),
        ("您留的地址是杭州市西湖区文三路 259 号，需要修改吗", "address", "杭州市西湖区文三路 259 号"),
        ("已向您预留的电话 18688887777 发送验证码", "phone", "18688887777"),
        ("您在门店登记的手机号是 13912345678", "phone", "13912345678"),
        ("Your phone number is +44 20 7946 0958, is that right?", "phone", "+442079460958"),
        (
            "The address on your account is 9 Harbor Road, Seattle, WA 98101",
            "address",
            "9 Harbor Road, Seattle, WA 98101",
        ),
        ("We have your number on file as (415) 555-0181", "phone", "+14155550181"),
    ],
)
def test_the_agent_confirming_the_users_own(text: str, key: str, value: str) -> None:
    (fact,) = facts(text, role="assistant")[key]

    assert fact.value == value
    assert fact.type == "user_profile"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("不对，我的号码是13588889999", "13588889999"),
        ("这不是我的电话，我的是 13655556666", "13655556666"),
        ("No, my number is 646-555-0199", "+16465550199"),
    ],
)
def test_a_correction_gives_the_users_new_value_as_a_change(text: str, value: str) -> None:
    (fact,) = facts(text)["phone"]

    assert fact.value == value
    assert fact.change is True


def test_a_number_the_user_disowns_is_not_stored() -> None:
    assert "phone" not in facts("这不是我的电话 13800001111")
    assert "phone" not in facts("13800001111 is not mine")


# --------------------------------------------------------------------------------------------------------------
# Couriers, rejected values, relatives' and venues' addresses, whole addresses, the agent reading back
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "role"),
    [
        ("骑手留的号码是 17788889999，一直打不通", "user"),
        ("快递员给我的号码是 15011112222，打过去是空号", "user"),
        ("配送员刚才打来的号码是 13511112222", "user"),
        ("师傅留了个电话 18622223333，说明天上门", "user"),
        ("快递小哥发来的号码 13344445555，帮我看看是不是真的", "user"),
        ("您的快递员留的电话是 13600001111", "assistant"),
        ("The delivery guy left his number, 415-555-0133, on the door", "user"),
        ("The technician gave me a number to call, 312-555-0187", "user"),
        ("The driver said his number is 206-555-0164", "user"),
        ("Your courier left his number, 718-555-0101, in the notes", "assistant"),
    ],
)
def test_a_number_a_courier_driver_or_technician_gave_is_not_the_users(text: str, role: str) -> None:
    # when
    found = facts(text, role=role)

    # then it is the courier's: neither the user's phone nor a contact's
    assert "phone" not in found
    assert "contact_phone" not in found


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("我给骑手留的号码是 13912345678", "13912345678"),
        ("I gave the driver my number, 415-555-0100", "+14155550100"),
    ],
)
def test_a_number_the_user_gave_a_courier_is_still_theirs(text: str, value: str) -> None:
    assert values(text, "phone") == [value]


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("不是 13812345670，尾号是 1，应该是 13812345671", "phone", "13812345671"),
        ("My number isn't 917-555-0140, my number is 917-555-0141", "phone", "+19175550141"),
        ("Not +44 7700 900111 — it's +44 7700 900112", "phone", "+447700900112"),
        ("邮箱不是 wang_li@163.com，是 wangli@163.com", "email", "wangli@163.com"),
        ("不是北京市朝阳区建国路 88 号，是北京市朝阳区建国路 98 号", "address", "北京市朝阳区建国路 98 号"),
    ],
)
def test_a_correction_keeps_only_the_value_it_gives_not_the_one_it_rejects(text: str, key: str, value: str) -> None:
    # when
    (fact,) = facts(text)[key]

    # then
    assert fact.value == value
    assert fact.change is True


@pytest.mark.parametrize(
    ("text", "value", "contact"),
    [
        (
            "帮我寄到我哥家：成都市锦江区春熙路 66 号 2 栋 1 单元 502",
            "成都市锦江区春熙路 66 号 2 栋 1 单元 502",
            "我哥",
        ),
        ("我闺蜜住在长沙市岳麓区麓山南路 932 号，生日礼物寄给她", "长沙市岳麓区麓山南路 932 号", "我闺蜜"),
        (
            "Could you ship it to my cousin's place: 21 Maple Drive, Columbus, OH 43215",
            "21 Maple Drive, Columbus, OH 43215",
            "cousin",
        ),
    ],
)
def test_a_relatives_or_friends_address_is_a_contact_address(text: str, value: str, contact: str) -> None:
    # when
    found = facts(text)

    # then the value has no possessor in it and names who lives there
    (fact,) = found["contact_address"]
    assert fact.value == value
    assert fact.data["contact"] == contact
    assert "address" not in found


@pytest.mark.parametrize(
    ("text", "role", "key", "value"),
    [
        (
            "我的地址是成都市高新区天府大道 1000 号 3 栋 1 单元 1802",
            "user",
            "address",
            "成都市高新区天府大道 1000 号 3 栋 1 单元 1802",
        ),
        (
            "您的收货地址是：杭州市滨江区江南大道 588 号 6 幢 1103，对吗",
            "assistant",
            "address",
            "杭州市滨江区江南大道 588 号 6 幢 1103",
        ),
        (
            "I live at 9 Harbor Road, Apt 3B, Seattle, WA 98101",
            "user",
            "address",
            "9 Harbor Road, Apt 3B, Seattle, WA 98101",
        ),
        (
            "Send it to 1 Ferry Plaza, Suite 210, San Francisco, CA 94111",
            "user",
            "address",
            "1 Ferry Plaza, Suite 210, San Francisco, CA 94111",
        ),
        (
            "Deliver to my office at 77 Pearl Street, 5th Floor, New York, NY 10004",
            "user",
            "work_address",
            "77 Pearl Street, 5th Floor, New York, NY 10004",
        ),
    ],
)
def test_an_address_keeps_its_room_floor_city_state_and_zip(text: str, role: str, key: str, value: str) -> None:
    assert values(text, key, role) == [value]


@pytest.mark.parametrize(
    ("text", "role"),
    [
        ("Your order is waiting at the 120 Oak Street location until Friday.", "assistant"),
        ("Your return can be dropped off at the 9 Harbor Road, Seattle warehouse", "assistant"),
        ("I'll pick it up from the 45 Elm Avenue, Somerville branch", "user"),
        ("I'll collect it at the Boston store, 45 Elm Avenue", "user"),
        ("您的包裹在广州市天河区体育东路 88 号门店，请凭取件码领取", "assistant"),
        ("我的快递放在杭州市西湖区文三路 259 号店里了", "user"),
        ("地址是上海市黄浦区南京东路 300 号旗舰店", "user"),
    ],
)
def test_a_stores_or_venues_address_is_nobodys_profile(text: str, role: str) -> None:
    assert not {"address", "work_address", "contact_address"} & set(facts(text, role=role))


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        ("We have (646) 555-0127 on file for you, is that right?", "phone", "+16465550127"),
        ("I've saved +33 6 12 34 56 78 as your contact number.", "phone", "+33612345678"),
        ("I've noted m.rossi@libero.it as your email for invoices.", "email", "m.rossi@libero.it"),
        ("Just checking, the name on the account is Priya Nair?", "name", "Priya Nair"),
        ("您预留的姓名是张伟，手机 13912345678，请核对", "name", "张伟"),
        ("您预留的姓名是张伟，手机 13912345678，请核对", "phone", "13912345678"),
    ],
)
def test_the_agent_reading_back_the_users_own_details(text: str, key: str, value: str) -> None:
    assert values(text, key, role="assistant") == [value]


@pytest.mark.parametrize(
    "text",
    [
        "Hi, this is Anna from support.",
        "您预留的手机号已验证，邮箱 service@shop.com 可以联系我们",
        "We have (646) 555-0127 on file as the store's number.",
    ],
)
def test_the_agents_own_name_or_a_companys_contact_is_not_read_back_as_the_users(text: str) -> None:
    assert not {"name", "email", "phone"} & set(facts(text, role="assistant"))


# --------------------------------------------------------------------------------------------------------------
# "That is not mine"
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ("这不是我的电话", ["phone"]),
        ("那个地址不是我的", ["address"]),
        ("这个号码不是我的", ["phone"]),
        ("邮箱不对，那不是我的", ["email"]),
        ("这不是我的名字", ["name"]),
        ("that's not my number", ["phone"]),
        ("this is not my address", ["address"]),
        ("that email isn't mine", ["email"]),
        ("The phone number you have doesn't belong to me", ["phone"]),
    ],
)
def test_disowned_keys(text: str, keys: list[str]) -> None:
    assert disowned_keys(text) == keys


@pytest.mark.parametrize(
    "text",
    [
        "不对，我的号码是13912345678",
        "这不是我的号码，我的是13912345678",
        "that's not my fault",
        "that's not my order number",
        "我的手机号是13912345678",
        "",
    ],
)
def test_no_disowned_keys_for_a_replacement_or_an_unrelated_denial(text: str) -> None:
    assert disowned_keys(text) == []


# --------------------------------------------------------------------------------------------------------------
# Chinese customer-service facts
# --------------------------------------------------------------------------------------------------------------


def test_new_keys_have_lifetimes_and_none_is_an_anchor_key() -> None:
    new_keys = {
        "contact_phone",
        "contact_address",
        "work_address",
        "ship_date",
        "delivery_date",
        "pickup_time",
        "appointment",
        "renewal_date",
        "expiry_date",
        "callback",
        "points_balance",
        "batch_progress",
    }

    assert {LIFETIMES[key][0] for key in new_keys} == {"fact_reference"}
    assert LIFETIMES["birthday"] == ("user_profile", 365 * 86400)
    assert LIFETIMES["account_id"][0] == LIFETIMES["membership"][0] == "user_profile"
    assert not (new_keys | {"birthday", "account_id", "membership"}) & ANCHOR_KEYS


def test_the_users_birthday_without_a_year() -> None:
    (zh,) = facts("我生日是3月12号，有生日券吗")["birthday"]
    (en,) = facts("My birthday is March 12")["birthday"]

    assert zh.value == en.value == "--03-12"
    assert (zh.type, zh.expires_in) == LIFETIMES["birthday"]
    assert zh.content == "用户生日：03-12"
    assert en.content == "User's birthday: 03-12"


@pytest.mark.parametrize(
    ("text", "role", "key", "day", "event"),
    [
        ("您的订单预计12月5日发货", "assistant", "ship_date", "2026-12-05", "发货"),
        ("包裹预计后天送达", "assistant", "delivery_date", "2026-11-12", "送达"),
        ("明天下午3点到5点上门取件可以吗", "user", "pickup_time", "2026-11-11", "上门取件"),
        ("会员下个月15号到期", "assistant", "expiry_date", "2026-12-15", "到期"),
        ("已为您预约周四上午 10 点的上门安装", "assistant", "appointment", "2026-11-12", "预约"),
        ("您的视频会员将于 2027 年 1 月 31 日自动续费", "assistant", "renewal_date", "2027-01-31", "续费"),
        ("Your order shipped on Nov 8", "assistant", "ship_date", "2026-11-08", "shipped"),
        ("Your appointment is booked for Nov 14 at 3 pm", "assistant", "appointment", "2026-11-14", "booked"),
    ],
)
def test_a_date_takes_the_meaning_of_its_event(text: str, role: str, key: str, day: str, event: str) -> None:
    # when
    found = facts(text, role=role)

    # then the event fact is there, and the session's plain date too
    (fact,) = found[key]
    assert fact.data["local_date"] == day
    assert fact.data["event"] == event
    assert fact.type == "fact_reference"
    assert "date" in found


def test_a_pickup_window_keeps_its_end() -> None:
    (fact,) = facts("明天下午3点到5点取件")["pickup_time"]

    assert fact.value == "2026-11-11T15:00:00+00:00"
    assert fact.data["until"] == "2026-11-11T17:00:00+00:00"
    assert fact.content == "取件时间：2026-11-11 15:00 UTC（明天下午3点到5点）"


def test_a_deadline_without_a_date() -> None:
    (ship,) = facts("预计 48 小时内发货，请耐心等待", role="assistant")["ship_date"]
    (delivery,) = facts("预计 3 个工作日内送达", role="assistant")["delivery_date"]

    assert ship.value == "2026-11-12T09:00:00+00:00"
    assert ship.data["by"] is True
    assert delivery.data["local_date"] == "2026-11-13"  # Tuesday + 3 working days


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("退款三百五十元什么时候到账", "350"),
        ("一共付了一千二百八十元", "1280"),
        ("上个月扣了两百块，这个月又扣", "200"),
    ],
)
def test_chinese_numeral_amounts(text: str, amount: str) -> None:
    (fact,) = facts(text)["amount"]

    assert fact.data == {"amount": amount, "currency": "CNY"}


@pytest.mark.parametrize("text", ["十分感谢，一下子就解决了", "元旦前能到吗", "我们一块去门店看看", "要几千块吧"])
def test_numeral_characters_in_ordinary_words_are_no_amount(text: str) -> None:
    assert "amount" not in facts(text)


def test_numerals_are_read_one_span_at_a_time() -> None:
    assert parse_number("一千九百八十八") == 1988
    assert parse_number("两千三") == 2300
    assert parse_number("1,280") == 1280
    assert parse_number("十分感谢") is None  # a sentence is never handed to cn2an


@pytest.mark.parametrize(
    ("text", "role", "points"),
    [
        ("积分还剩两千三百分，能换什么", "user", 2300),
        ("我的积分是两千三，为什么不能兑换", "user", 2300),
        ("您的积分还有 1,280 分，可抵扣 12.8 元", "assistant", 1280),
        ("I have 4,500 points, why can't I redeem them?", "user", 4500),
        ("您好，您目前积分两千三百八十分，其中有四百分将于12月31日到期", "assistant", 2380),
        ("已为您兑换保温杯一个，扣除2,000积分，剩余积分九百六十分。", "assistant", 960),
        ("扣除1,000积分，当前剩余积分1,380分。", "assistant", 1380),
    ],
)
def test_points_balance(text: str, role: str, points: int) -> None:
    (fact,) = facts(text, role=role)["points_balance"]

    assert fact.data["points"] == points
    assert fact.data["text"] in text  # the number as written, how a conversation unit shows it
    assert fact.value == str(points)


def test_points_doubling_is_not_a_balance() -> None:
    assert "points_balance" not in facts("生日当月购物积分2倍，积分翻倍", role="assistant")


@pytest.mark.parametrize(
    ("text", "e164"),
    [
        ("我的香港号码 +852 9123 4567", "+85291234567"),
        ("My number is +44 20 7946 0958", "+442079460958"),
        ("call me on +1 (415) 555-2671", "+14155552671"),
    ],
)
def test_international_numbers_in_e164(text: str, e164: str) -> None:
    (fact,) = facts(text)["phone"]

    assert fact.value == e164
    assert fact.data == {"phone": e164}


def test_an_international_toll_free_number_is_a_hotline() -> None:
    assert "phone" not in facts("call +1 800 555 0199 for help")


@pytest.mark.parametrize(
    ("text", "role", "account"),
    [
        ("企业账号 ENT-77821，开票抬头要改", "user", "ENT-77821"),
        ("ENT-77821 登不上去", "user", "ENT-77821"),
        ("您的会员号 VIP20231108 已升级", "assistant", "VIP20231108"),
        ("My account ID is ACC-448812", "user", "ACC-448812"),
    ],
)
def test_account_ids(text: str, role: str, account: str) -> None:
    (fact,) = facts(text, role=role)["account_id"]

    assert fact.data == {"account_id": account}


@pytest.mark.parametrize(
    ("text", "role", "tier"),
    [
        ("我是 PLUS 会员，为什么还收运费", "user", "PLUS"),
        ("您目前是黄金会员，可享受 9.5 折", "assistant", "黄金"),
        ("I'm a Gold member and still paid shipping", "user", "Gold"),
    ],
)
def test_membership_the_user_holds(text: str, role: str, tier: str) -> None:
    assert values(text, "membership", role) == [tier]


@pytest.mark.parametrize(
    ("text", "role"),
    [
        ("升级黄金会员可享受免运费", "assistant"),
        ("请问您是 PLUS 会员吗？", "assistant"),
        ("我不是PLUS会员", "user"),
        ("Gold members get free shipping on all orders", "assistant"),
        ("Would you like to upgrade to Premium membership?", "assistant"),
    ],
)
def test_an_offer_or_a_question_is_no_membership(text: str, role: str) -> None:
    assert "membership" not in facts(text, role)


@pytest.mark.parametrize(
    ("text", "due"),
    [
        ("我们会在24小时内给您回电", "2026-11-11T09:00:00+00:00"),
        ("专员会在明天上午10点前回电话给您", "2026-11-11T10:00:00+00:00"),
        ("We'll call you back tomorrow", "2026-11-11T00:00:00+00:00"),
        ("稍后会有专员致电您，请留意来电", None),
    ],
)
def test_a_promised_callback(text: str, due: str | None) -> None:
    (fact,) = facts(text, role="assistant")["callback"]

    assert fact.data["due"] == due
    assert fact.value == (due or "pending")


def test_a_user_asking_for_a_callback_is_no_promise() -> None:
    assert "callback" not in facts("请给我回个电话")
    assert "callback" not in facts("Can you call me back?")


def test_a_refused_callback_is_no_promise_but_a_conditional_one_is() -> None:
    assert "callback" not in facts("我们不会给您打电话", role="assistant")
    assert "callback" not in facts("We will not call you back", role="assistant")
    assert values("如果不方便接听，我们会稍后给您回电", "callback", role="assistant") == ["pending"]


def test_a_coupon_valid_for_seven_days_expires_then() -> None:
    # when the agent says the coupon is valid for 7 days
    (zh,) = facts("已为您发放优惠券 FULL50，这张券7天内有效", role="assistant")["coupon"]
    (en,) = facts("Here is your coupon code THANKS15, valid for 7 days", role="assistant")["coupon"]

    # then it expires at the end of the seventh day
    end = datetime(2026, 11, 17, 23, 59, 59, tzinfo=UTC)
    for fact in (zh, en):
        assert fact.data["valid_until"] == "2026-11-17"
        assert fact.expires_in == int((end - NOW).total_seconds())


def test_a_coupon_valid_until_the_end_of_the_month() -> None:
    (fact,) = facts("优惠码 WINTER88 有效期到本月底", role="assistant")["coupon"]

    assert fact.data["valid_until"] == "2026-11-30"


@pytest.mark.parametrize(
    ("text", "value", "data"),
    [
        (
            "批量任务 BATCH-2031 已完成 40/100",
            "BATCH-2031 40/100",
            {"task_id": "BATCH-2031", "completed": 40, "total": 100},
        ),
        ("job JOB-88 is 60% done", "JOB-88 60%", {"task_id": "JOB-88", "percent": 60}),
        (
            "批次 IMP-5520 导入完成了一千九百八十八条，共两千条",
            "IMP-5520 1988/2000",
            {"task_id": "IMP-5520", "completed": 1988, "total": 2000},
        ),
    ],
)
def test_batch_progress(text: str, value: str, data: dict[str, object]) -> None:
    (fact,) = facts(text, role="tool")["batch_progress"]

    assert fact.value == value
    assert fact.data == data


def test_every_new_fact_fits_150_chars_in_its_language() -> None:
    text = (
        "您的 PLUS 会员下个月15号到期，积分还有 1,280 分，企业账号 ENT-77821，批量任务 BATCH-2031 已完成 40/100，"
        "我们会在24小时内给您回电"
    )

    found = extract_facts(text, role="assistant", now=NOW)

    assert {"membership", "expiry_date", "points_balance", "account_id", "batch_progress", "callback"} <= {
        fact.key for fact in found
    }
    for fact in found:
        assert 0 < len(fact.content) <= 150
        # a callback, a coupon and an expiry last as long as the date they state says (or their key's lifetime)
        assert (fact.type, fact.expires_in) == LIFETIMES[fact.key] or fact.key in ("callback", "coupon", "expiry_date")


@pytest.mark.parametrize(
    "text",
    [
        "我老公的电话是 13900001111",
        "孩子班主任刘老师的电话是13900007788，学校让家长登记校服订单",
        "我同事小张的电话13100002233你们别再打了，他跟这个账户没关系",
        "本来想寄给我姐，她电话 138 0000 9797，想想还是算了，照常寄我这吧",
        "My son's teacher's number is (312) 555-0176, she asked me to check the school trip payment",
        "That's my dad's address, not mine: 5 Birch Lane, Reno, NV 89501",
        "I was going to send it to my sister at 19 Oak Court, Leeds LS6 2AB, but forget that",
    ],
)
def test_someone_elses_details_with_no_part_in_the_service_are_not_kept(text: str) -> None:
    # a person the customer names but gives no part (receiving, collecting, being called instead), or whose part
    # the customer takes back, leaves nothing keyed: not the customer's, and no contact to act on
    found = facts(text)

    assert not {"phone", "address", "contact_phone", "contact_address"} & set(found), found


@pytest.mark.parametrize(
    ("text", "role", "key", "value"),
    [
        ("手机号是 139 0000 1357，不对不对，是 139 0000 1375", "user", "phone", "13900001375"),
        ("Phone is 07700 900345 - sorry, typo, it's 07700 900354", "user", "phone", "+447700900354"),
        ("好的，已将您的联系电话由 18700002233 更正为 18700002323。", "assistant", "phone", "18700002323"),
        ("email: anna.k@exmaple.com oops, it's anna.k@example.com", "user", "email", "anna.k@example.com"),
    ],
)
def test_a_value_mistyped_and_fixed_in_one_message_keeps_only_the_fix(text: str, role: str, key: str, value: str):
    assert [fact.value for fact in extract_facts(text, role=role) if fact.key == key] == [value]


def test_nearly_equal_values_of_two_people_are_both_kept() -> None:
    found = facts("My number is (646) 555-0120; my wife's is (646) 555-0121, she'll sign for it")

    assert [fact.value for fact in found["phone"]] == ["+16465550120"]
    assert [fact.value for fact in found["contact_phone"]] == ["+16465550121"]


@pytest.mark.parametrize(
    ("text", "role"),
    [
        ("骗子用 135-0000-6677 打过来，说要给我双倍赔偿", "user"),
        ("昨晚一个自称快递公司的 186 0000 0404 打来让我报验证码", "user"),
        ("配送员会用虚拟号 170 0000 5566 联系您，来电会转接过来", "assistant"),
        ("转发一下供应商的邮件：\n-----\n王经理\n手机：137 0000 2200\n-----\n货一直没到", "user"),
        ("Forwarding the email I got:\n> From: Accounts Payable\n> T: 020 7946 0770\nWhy are they billing me?", "user"),
    ],
)
def test_a_callers_or_a_pasted_texts_number_is_not_the_customers(text: str, role: str) -> None:
    assert [fact.value for fact in extract_facts(text, role=role) if fact.key.endswith("phone")] == []


@pytest.mark.parametrize(
    ("text", "role", "value"),
    [
        ("我用 138 0000 1111 给你们打过电话，一直没人接", "user", "13800001111"),  # towards the company: theirs
        (
            "Pasting my own signature so you have everything:\n\nHannah Cole\nM: +1 (206) 555-0162",
            "user",
            "+12065550162",
        ),
        ("I've noted your mobile, 07700 900311, for the delivery updates.", "assistant", "+447700900311"),
        ("核实到您本人手机为13500006620，稍后短信通知您", "assistant", "13500006620"),
    ],
)
def test_the_customers_own_number_in_those_shapes_is_still_theirs(text: str, role: str, value: str) -> None:
    assert [fact.value for fact in extract_facts(text, role=role) if fact.key == "phone"] == [value]


@pytest.mark.parametrize(
    ("text", "role", "expected"),
    [
        (
            "我在深圳市福田区深南大道6008号上班，发票寄单位就行",
            "user",
            {"work_address": ["深圳市福田区深南大道6008号"]},
        ),
        ("我老公公司在苏州工业园区星湖街328号，寄他那边", "user", {}),
        (
            "您的办公地址 天津市和平区南京路189号津汇广场2座1501 和家庭地址 天津市河西区友谊路35号 都已保存",
            "assistant",
            {"work_address": ["天津市和平区南京路189号津汇广场2座1501"], "address": ["天津市河西区友谊路35号"]},
        ),
        (
            "I've saved 1 Innovation Way, Cambridge CB4 0WS as your work address and 3 Mill Road, Ely CB7 4DA as home.",
            "assistant",
            {"work_address": ["1 Innovation Way, Cambridge CB4 0WS"], "address": ["3 Mill Road, Ely CB7 4DA"]},
        ),
    ],
)
def test_home_and_workplace_are_told_apart(text: str, role: str, expected: dict[str, list[str]]) -> None:
    found = {}
    for fact in extract_facts(text, role=role):
        if fact.key in ("address", "work_address", "contact_address"):
            found.setdefault(fact.key, []).append(fact.value)
    assert found == expected


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("要是我电话没接 就打我女儿的 她叫李静 138 1122 0487", "13811220487"),  # to be called instead
        ("好，她叫许丽，电话 186 2155 7340，寄出了让她给你们打电话", "18621557340"),  # she sends it
        ("哦对了，昨天我弟的电话说错了，是 186 0010 4792，最后两位反了", "18600104792"),  # corrects a part given before
    ],
)
def test_a_contact_with_a_part_in_the_service_is_kept(text: str, value: str) -> None:
    assert [fact.value for fact in facts(text).get("contact_phone", [])] == [value]


def test_a_part_the_agent_cannot_give_keeps_no_contact() -> None:
    text = "您提供的号码 13300008899 是您孩子老师的，我们不能代为联系，回访电话还是需要账户本人接听哦。"
    assert "contact_phone" not in facts(text, role="assistant")
