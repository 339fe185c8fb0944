"""Whose a value is, read from its context: what the words around a phone, an e-mail, an address or a name say
about it, beyond a possessive right before it.

Each case is a message a customer or an agent could send; the assertion is what lands on the customer's keys, the
ones that open every later prompt. Pure: no database.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.extraction.rules import Fact, extract_facts

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def facts(text: str, role: str = "user") -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    fact: Fact
    for fact in extract_facts(text, role=role, now=NOW):
        found.setdefault(fact.key, []).append(fact.value)
    return found


# --------------------------------------------------------------------------------------------------------------
# Values that are not the customer's, whatever else the message says
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "role"),
    [
        # the value is removed from the account, before or after it
        ("已按您的要求删除备用号码 150 0000 7321，以后不会再用它联系您。", "assistant"),
        ("您家政阿姨的电话15000007321已从配送备注里移除。", "assistant"),
        ("Done: I've removed the spare number (415) 555-0162 from your profile.", "assistant"),
        # the agent reads back a number the customer said is not theirs
        ("明白，您说15000007321不是您的号码，我们不会再往这个号发通知。", "assistant"),
        # said to be someone else's, old, or out of use, in the customer's own words
        ("That mobile, 07700 900514, is not mine - no idea whose it is.", "user"),
        ("15000007321是我以前的号 早就停机了", "user"),
        # the caller's, the sender's, a stand-in
        ("有人用 150 0000 7321 加我微信说要退我运费", "user"),
        ("an unknown number 020 7946 0452 keeps calling me about a parcel", "user"),
        ("Your engineer said he'd call me back from 020 7946 0452 tomorrow", "user"),
        ("can I type (415) 555-0100 as a placeholder for now?", "user"),
        # a shop's or a restaurant's line, or the company's own
        ("昨天去的那家店电话 0571-8600 0032 一直占线", "user"),
        ("那家火锅店的订位电话 0571-8600 0032，我订了周五", "user"),
        ("I rang the number on your website, (415) 555-0163, and nobody picked up", "user"),
        ("I'm booked at the Harbour Inn, 12 Quay Street, Galway, (415) 555-0164, till Monday", "user"),
        # the agent's side of a denial, a forwarded text, a format to follow
        ("Thanks, so (303) 555-0144 is not your number.", "assistant"),
        ("The message you forwarded lists 020 7946 0771 at the bottom; that line isn't one of ours.", "assistant"),
        ("Could you send your mobile in the format 0491 570 000, with no spaces?", "assistant"),
    ],
)
def test_a_value_the_message_says_is_not_the_customers_lands_on_no_key(text: str, role: str) -> None:
    found = facts(text, role)

    assert "phone" not in found
    assert "contact_phone" not in found


def test_an_email_the_customer_got_and_does_not_recognise_is_not_theirs() -> None:
    found = facts("The receipt went to tomk@example.org, which isn't my account at all - never seen it.")

    assert "email" not in found


def test_the_company_support_address_named_through_your_is_not_the_customers_but_their_own_is() -> None:
    found = facts("你们客服邮箱 help@example.cn 一直不回 我的邮箱是 lin.yue@example.cn")

    assert found["email"] == ["lin.yue@example.cn"]


def test_a_full_width_mobile_is_read_as_the_mobile_it_is() -> None:
    found = facts("手机号是１５０００００７３２１，有事打这个")

    assert found["phone"] == ["15000007321"]


def test_an_example_in_quotes_stays_an_example_but_the_real_value_after_it_is_the_customers() -> None:
    found = facts("表单上的示例“北京市朝阳区XX路1号”我没删，真实地址是北京市海淀区知春路12号3栋201")

    assert found["address"] == ["北京市海淀区知春路12号3栋201"]


def test_a_value_the_agent_shows_like_a_pattern_is_an_example_but_one_the_customer_would_like_is_theirs() -> None:
    assert "email" not in facts("Type your address like sam.lee@example.com into the first field.", "assistant")
    assert facts("I'd like it sent to 4 Mill Lane, Bath BA1 2AB please")["address"] == ["4 Mill Lane, Bath BA1 2AB"]


def test_the_agent_ringing_the_customer_on_a_number_or_calling_it_theirs_after_a_comma_keys_it() -> None:
    assert facts("Booked. The fitter will ring you on 0491 570 318 first.", "assistant")["phone"] == ["+61491570318"]
    found = facts("I see 0491 570 415, which you said is yours, and 0491 570 426, which is your son's.", "assistant")
    assert found["phone"] == ["+61491570415"]


def test_an_example_after_e_g_is_not_the_customers_email() -> None:
    found = facts("the box says 'e.g. jane.doe@example.com' - mine is kofi.m@example.com")

    assert found["email"] == ["kofi.m@example.com"]


# --------------------------------------------------------------------------------------------------------------
# Corrections and replacements inside one message
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "kept"),
    [
        ("邮箱 zhou@example.cn 哦不是 是 zhou.min_88@example.cn", "email", "zhou.min_88@example.cn"),
        (
            "deliver to 4 Elm Row, Leeds LS6 1AA... no wait, that's my old place. 9 Birch Hill, Leeds LS6 2BB",
            "address",
            "9 Birch Hill, Leeds LS6 2BB",
        ),
        ("订单号 SO20261201337 打错了，正确的是 SO20261201373", "order_id", "SO20261201373"),
        ("order 55102291 oh sorry I meant 55102219", "order_id", "55102219"),
    ],
)
def test_the_value_a_message_takes_back_gives_way_to_the_one_after_it(text: str, key: str, kept: str) -> None:
    assert facts(text)[key] == [kept]


def test_a_number_said_to_be_old_leaves_the_new_one_the_customers() -> None:
    found = facts("15000007321是我以前的号 已经停机了 现在用的是 15000007345")

    assert found["phone"] == ["15000007345"]


def test_the_agent_confirming_the_new_number_after_the_old_one_stopped_keys_the_new_one() -> None:
    found = facts("收到，您之前的号码 15000007321 已停用，现更新为 15000007345。", role="assistant")

    assert found["phone"] == ["15000007345"]


def test_a_new_value_after_an_old_line_said_in_another_clause_is_the_customers() -> None:
    found = facts("phone (415) 555-0170, no wait that's my old work line, it's (415) 555-0171")

    assert found["phone"] == ["+14155550171"]


# --------------------------------------------------------------------------------------------------------------
# The agent reading the customer's details back
# --------------------------------------------------------------------------------------------------------------


def test_a_read_back_list_after_a_second_person_opener_is_the_customers() -> None:
    found = facts(
        "跟您核对一下：收件手机 150 0000 7321，地址杭州市拱墅区莫干山路100号5幢302，邮箱 he.lan@example.cn，对吗？",
        role="assistant",
    )

    assert found["phone"] == ["15000007321"]
    assert found["address"] == ["杭州市拱墅区莫干山路100号5幢302"]
    assert found["email"] == ["he.lan@example.cn"]


def test_an_english_read_back_after_updating_the_account_is_the_customers() -> None:
    found = facts("I've updated your account: phone (415) 555-0173, email r.osei@example.com.", role="assistant")

    assert found["phone"] == ["+14155550173"]
    assert found["email"] == ["r.osei@example.com"]


def test_the_agent_introducing_itself_keeps_its_own_numbers_off_the_customers_keys() -> None:
    found = facts("我是您的售后专员李倩，座机 0571-8600 1234，手机 15000009876，有问题随时找我。", role="assistant")

    assert "phone" not in found


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Hi Rosa Delgado-Marin, your replacement is on its way.", "Rosa Delgado-Marin"),
        ("Thanks, Liam O'Connell, I can see both parcels now.", "Liam O'Connell"),
        ("I've changed the name on your booking from 'A. Mensah' to Ama Mensah.", "Ama Mensah"),
        ("I've corrected the spelling of your name to Niamh Brennan.", "Niamh Brennan"),
    ],
)
def test_a_full_name_the_agent_greets_or_sets_is_the_customers(text: str, name: str) -> None:
    assert facts(text, role="assistant")["name"] == [name]


def test_a_first_name_alone_in_a_greeting_is_no_full_name() -> None:
    assert "name" not in facts("Hi Rosa, your replacement is on its way.", role="assistant")


def test_a_chinese_full_name_greeted_by_the_agent_is_the_customers() -> None:
    assert facts("陈思远您好，您的退款已原路退回。", role="assistant")["name"] == ["陈思远"]


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Hello, this is Aoife O'Brien, my blender arrived cracked", "Aoife O'Brien"),
        ("table for two tonight under the name Omar Haddad please", "Omar Haddad"),
        ("still no parcel. thanks — Priya", "Priya"),
        ("fyi im Tomas Novak, order 55102291", "Tomas Novak"),
    ],
)
def test_the_customer_naming_themself_is_read(text: str, name: str) -> None:
    assert facts(text)["name"] == [name]


def test_im_inside_a_word_introduces_no_one() -> None:
    assert facts("Name: Karim Ibrahim / Phone: 0491 570 118")["name"] == ["Karim Ibrahim"]


# --------------------------------------------------------------------------------------------------------------
# Addresses
# --------------------------------------------------------------------------------------------------------------


def test_a_flat_number_after_the_house_number_stays_in_the_address() -> None:
    found = facts("收货地址是上海市普陀区武宁路88弄6号1203")

    assert found["address"] == ["上海市普陀区武宁路88弄6号1203"]


def test_words_with_address_markers_but_no_number_or_division_are_no_address() -> None:
    found = facts("收货地址是杭州市西湖区天目山路88号2幢1单元502，上次在别的店买东西就因为少写了单元号被退回")

    assert found["address"] == ["杭州市西湖区天目山路88号2幢1单元502"]


def test_a_refused_delivery_address_is_nobodys_and_the_home_one_stays() -> None:
    found = facts("好的，不寄您爱人单位（杭州市上城区解放路18号），仍寄到您家杭州市拱墅区大关路6号。", role="assistant")

    assert "contact_address" not in found
    assert "work_address" not in found


def test_a_work_address_after_asking_for_the_office_is_the_workplace() -> None:
    found = facts("Could you send it to my office instead? Unit 3, 40 Mill Road, Bristol BS2 0JX.")

    assert found["work_address"] == ["Unit 3, 40 Mill Road, Bristol BS2 0JX"]
    assert "address" not in found


# --------------------------------------------------------------------------------------------------------------
# One person, one value: the customer's own said in so many words beside a bare one
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "kept"),
    [
        (
            "the driver texted from 07700 900618 asking for the gate code?? my number is 07700 900627",
            "phone",
            "+447700900627",
        ),
        (
            "收到一封 kefu.notice@example.cn 发来的退款邮件 我的邮箱是 wu.ting@example.cn 你们看下是不是你们发的",
            "email",
            "wu.ting@example.cn",
        ),
        (
            "Is the pickup at 14 Canal Street, Leeds LS1 4AB? I live at 7 Holly Row, Leeds LS6 3QT",
            "address",
            "7 Holly Row, Leeds LS6 3QT",
        ),
    ],
)
def test_a_bare_value_beside_the_customers_own_of_its_kind_is_not_theirs(text: str, key: str, kept: str) -> None:
    assert facts(text)[key] == [kept]


def test_two_numbers_each_given_as_the_customers_are_both_kept() -> None:
    found = facts("我手机 15000007321，家里座机 0571-8600 0032，白天打手机")

    assert found["phone"] == ["15000007321", "057186000032"]


def test_a_form_of_address_is_no_name_but_the_surname_is() -> None:
    found = facts("免贵姓钱，叫我钱先生就好")

    assert found["name"] == ["钱"]


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("您预留的地址是成都市锦江区东大街99号2栋11-3，今天会送到", "成都市锦江区东大街99号2栋11-3"),
        ("已经帮您把地址改成 南京市鼓楼区中山北路30号 2幢 605 了", "南京市鼓楼区中山北路30号 2幢 605"),
        (
            "The delivery address on your account is 21 Ashfield Road, Dublin 6W, D6W K2P4.",
            "21 Ashfield Road, Dublin 6W, D6W K2P4",
        ),
        (
            "Just to confirm: address 410 W Elm Ave, Apt 2B, Denver, CO 80204?",
            "410 W Elm Ave, Apt 2B, Denver, CO 80204",
        ),
    ],
)
def test_an_address_read_back_by_the_agent_is_taken_whole(text: str, address: str) -> None:
    assert facts(text, role="assistant")["address"] == [address]


def test_where_the_customer_says_they_work_is_the_workplace() -> None:
    found = facts("I work at 2nd Floor, 8 Harbour Street, Leeds LS1 5AB - could it come there?")

    assert found["work_address"] == ["2nd Floor, 8 Harbour Street, Leeds LS1 5AB"]


def test_the_booker_found_for_the_customer_is_the_customer() -> None:
    found = facts("已为您查询到预订单号 HB20461（酒店3晚），预订人手机15000008842。", role="assistant")

    assert found["phone"] == ["15000008842"]


def test_a_number_on_file_for_the_customer_is_read_even_from_a_range_valid_nowhere() -> None:
    found = facts("Thanks! We have 07700 900377 on file for you - still the best number?", role="assistant")

    assert found["phone"] == ["+447700900377"]


def test_a_signature_someone_else_gave_the_customer_is_not_theirs() -> None:
    found = facts("下面是装修公司给我的签名，帮我看看是不是你们的人：\n周工 13900006611\nzhou.gong@example.cn")

    assert "phone" not in found
    assert "email" not in found


def test_someone_posing_as_the_company_is_a_caller() -> None:
    found = facts("有人冒充你们客服打给我，号码021-6000 0888，还说得出我的手机15000003344")

    assert found["phone"] == ["15000003344"]


def test_a_surname_greeted_with_its_honorific_is_no_full_name() -> None:
    assert "name" not in facts("刘先生您好，我帮您查一下。", role="assistant")


def test_the_agent_changing_a_field_of_the_account_without_naming_the_customer_keys_it() -> None:
    found = facts("不好意思，已把联系电话改成150 0000 7345。", role="assistant")

    assert found["phone"] == ["15000007345"]


def test_someone_the_customer_mentions_who_lives_somewhere_keeps_that_address() -> None:
    found = facts("a lady who lives at 4 Kiln Lane, Leeds LS6 2AA, told me about you. I'm at 9 Rye Row, Leeds LS6 3BB")

    assert found["address"] == ["9 Rye Row, Leeds LS6 3BB"]


def test_an_edinburgh_flat_by_floor_and_door_is_part_of_the_address() -> None:
    assert facts("I live at 2F1, 33 Leith Walk, Edinburgh EH6 8LS")["address"] == [
        "2F1, 33 Leith Walk, Edinburgh EH6 8LS"
    ]


def test_an_address_changed_from_a_quoted_one_is_the_new_one() -> None:
    found = facts("已为您把地址从“文一路8号”更正为 杭州市西湖区文一西路88号3幢201，已同步给快递。", role="assistant")

    assert found["address"] == ["杭州市西湖区文一西路88号3幢201"]


def test_the_office_address_read_back_on_file_is_the_workplace() -> None:
    found = facts("Your office address on file is Level 4, 20 Bond Street, Sydney NSW 2000.", role="assistant")

    assert found["work_address"] == ["Level 4, 20 Bond Street, Sydney NSW 2000"]
    assert "address" not in found


def test_a_month_at_a_sentences_end_does_not_take_the_next_sentences_number_as_its_day() -> None:
    found = facts("old address is gone, I moved in July. 14 Alder Road, Leeds LS6 4EE is home now")

    assert found["address"] == ["14 Alder Road, Leeds LS6 4EE"]
    assert "date" not in found


def test_my_work_before_an_address_is_the_customers_workplace_beside_their_home() -> None:
    found = facts(
        "home's 2 Ash Close, York YO10 3DD but weekdays send it to my work: "
        "Unit 4, Clifton Trading Estate, York YO30 4XE"
    )

    assert found["address"] == ["2 Ash Close, York YO10 3DD"]
    assert found["work_address"] == ["Unit 4, Clifton Trading Estate, York YO30 4XE"]


@pytest.mark.parametrize(
    ("text", "role", "name"),
    [
        ("For the refund:\n- Name: Grace Otieno\n- Phone: 0161 496 0577", "user", "Grace Otieno"),
        ("Could the receipt go by email please?\nCheers, Ravi Menon", "user", "Ravi Menon"),
    ],
)
def test_the_customers_name_in_a_bulleted_field_or_a_closing_line_is_keyed(text: str, role: str, name: str) -> None:
    assert facts(text, role)["name"] == [name]


@pytest.mark.parametrize(
    ("text", "role", "order_id"),
    [
        ("my case number is CAS-2027-0031, still waiting", "user", "CAS-2027-0031"),
        ("booking ref QX-40213, I'm the lead guest", "user", "QX-40213"),
        ("Ticket #SR-55102 is now with the billing team.", "assistant", "SR-55102"),
        ("the tracking is 1Z999AA10123456700 but the order itself is 2027-0112-0450", "user", "2027-0112-0450"),
        ("已为您登记，工单编号GD-20391。", "assistant", "GD-20391"),
        ("您的投诉单号是TS2027010900041，请留意短信。", "assistant", "TS2027010900041"),
    ],
)
def test_the_ids_a_customers_requests_go_by_are_order_ids(text: str, role: str, order_id: str) -> None:
    assert facts(text, role)["order_id"] == [order_id]


@pytest.mark.parametrize(
    "text",
    ["in case 2026 is a busy year for you", "the courier ref is DPD-55120340 if that helps"],
)
def test_a_year_after_in_case_or_a_couriers_reference_is_no_order_id(text: str) -> None:
    assert "order_id" not in facts(text)


def test_the_customer_naming_themselves_as_recipient_keeps_the_address_their_own() -> None:
    found = facts("寄到南京市鼓楼区中山北路30号2栋501室 收件人写我自己 电话13900004418")

    assert found["address"] == ["南京市鼓楼区中山北路30号2栋501室"]
    assert "contact_address" not in found


@pytest.mark.parametrize(
    ("text", "role", "name"),
    [
        # the agent reads the account holder's name back, or sets the recipient to the customer
        ("已核对持卡人姓名为何思琪，与预留信息一致。", "assistant", "何思琪"),
        ("已将收货人姓名改为您本人邓子轩。", "assistant", "邓子轩"),
        # the customer says a name is theirs
        ("单子上写的收件人是 邹明哲 ，就是我本人", "user", "邹明哲"),
        ('the label says "Attn: R. Osei" - that is me, Rebecca Osei, so it is mine', "user", "Rebecca Osei"),
    ],
)
def test_a_name_read_back_from_a_field_or_said_to_be_the_customers_is_keyed(text: str, role: str, name: str) -> None:
    assert facts(text, role)["name"] == [name]


def test_a_name_field_the_agent_reads_for_someone_named_otherwise_is_not_the_customers() -> None:
    assert "name" not in facts("收件人姓名为王建国，是您父亲，对吗？", "assistant")


def test_a_template_quoted_with_its_own_my_name_is_is_not_the_customers_name() -> None:
    found = facts('your form shows "Hello, my name is Jane Doe, my phone is (212) 555-0100" - what do I put there?')

    assert "name" not in found
    assert "phone" not in found
