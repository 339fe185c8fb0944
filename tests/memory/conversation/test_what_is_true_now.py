"""Memory knows what is true now: a later statement about the same thing with another value supersedes the earlier
one, whoever says it and however it is phrased; a validity stated in words ends a statement then (docs/memory.md,
"What is true now").

Every turn goes through ``POST /api/v1/sessions/<id>/messages`` (``chat.turn.run.run_turn``) with the fake Ollama
answering as the agent; questions go through ``POST /api/v1/memories/recall`` from a new session of the same
customer, now and ``as_of`` a moment between the two statements; the next prompt is read from the fake Ollama.
Chinese (``acme``) and English (``globex``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from memory.models import MemoryUnit
from tenants.rls import tenant_scope
from testkit.fake_ollama import Reply
from tests.factories import TenantCtx, open_session

pytestmark = pytest.mark.django_db(transaction=True)


def _session(ctx: TenantCtx, fake: Any, end_user: str, turns: list[tuple[str, str]]) -> str:
    """One chat session of ``end_user``: each (customer, agent) pair is a turn."""
    sid = open_session(ctx, end_user)["session_id"]
    for user, agent in turns:
        fake.script(Reply(text=agent))
        response = ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": user}, format="json")
        assert response.status_code == 200, response.content
    return sid


def _recall(ctx: TenantCtx, end_user: str, query: str, as_of: Any = None, k: int = 5) -> list[dict[str, Any]]:
    """The results recalled for ``query`` from a new session of ``end_user``, best first."""
    sid = open_session(ctx, end_user)["session_id"]
    body: dict[str, Any] = {"query": query, "k": k}
    if as_of is not None:
        body["as_of"] = as_of.isoformat()
    response = ctx.client.post("/api/v1/memories/recall", body, format="json", HTTP_X_SESSION_ID=sid)
    assert response.status_code == 200, response.content
    return response.json()["results"]


def _contents(results: list[dict[str, Any]]) -> list[str]:
    return [r["memory"]["content"] for r in results]


def _current(results: list[dict[str, Any]]) -> list[str]:
    """The contents recall says are current."""
    return [r["memory"]["content"] for r in results if r.get("current", True)]


def _assert_replaced(ctx: TenantCtx, end_user: str, question: str, now: str, before: str) -> None:
    """Recall for ``question`` serves a current result saying ``now``, and none saying ``before``."""
    results = _recall(ctx, end_user, question)
    current = _current(results)
    assert any(now in c for c in current), results
    assert not any(before in c for c in current), results


def _said_at(ctx: TenantCtx, needle: str) -> Any:
    """When the customer's unit naming ``needle`` was stored (a moment it was true)."""
    with tenant_scope(ctx.tenant):
        unit = (
            MemoryUnit.objects.for_tenant(ctx.tenant)
            .filter(key__startswith="conversation:", content__contains=needle)
            .order_by("created_at")
            .first()
        )
    assert unit is not None, needle
    return unit.created_at


def _next_prompt(ctx: TenantCtx, fake: Any, end_user: str, text: str) -> str:
    """The system part of the prompt the model gets for ``text`` in a new session of ``end_user``."""
    sid = open_session(ctx, end_user)["session_id"]
    fake.script(Reply(text="好的。"))
    response = ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": text}, format="json")
    assert response.status_code == 200, response.content
    messages = fake.chat_requests[-1]["messages"]
    return "\n".join(m["content"] for m in messages if m["role"] == "system")


def _as_current(prompt: str) -> str:
    """The prompt's lines that present something as current (a memory the model is told is no longer current
    is history, not a fact)."""
    return "\n".join(line for line in prompt.split("\n") if "no longer current" not in line)


def _assert_current_first(results: list[dict[str, Any]], new: str, old: str) -> None:
    """``new`` is the top result and ``old`` is not served as current."""
    contents = _contents(results)
    assert contents, results
    assert new in contents[0], contents
    assert not any(old in c for c in _current(results)), results


# --- the agent's confirmed correction ------------------------------------------------------------------


def test_the_agents_confirmed_address_replaces_what_the_customer_typed(acme, fake_ollama):
    # given a customer who types an address and an agent who confirms it corrected
    _session(
        acme, fake_ollama, "addr-zh",
        [("以后默认送我家：北京市朝阳区望京花园4栋2单元301",
          "默认收货地址已更新为北京市朝阳区望京花园4栋1单元301，请您确认。")],
    )  # fmt: skip
    before = _said_at(acme, "4栋2单元301")
    # when the customer asks where things are sent now
    results = _recall(acme, "addr-zh", "我的默认收货地址是哪里？")
    # then the confirmed address comes first, the typed one is not current
    _assert_current_first(results, "4栋1单元301", "4栋2单元301")
    # and as of the moment before the confirmation, the typed one was what the customer had said
    assert any("4栋2单元301" in c for c in _contents(_recall(acme, "addr-zh", "我的默认收货地址是哪里？", before)))
    # and the next prompt's anchor keys the confirmed address
    prompt = _next_prompt(acme, fake_ollama, "addr-zh", "帮我看看快递送到哪")
    anchor = prompt.split("\n", 1)[0]
    assert "4栋1单元301" in anchor, anchor
    assert "4栋2单元301" not in anchor, anchor


def test_the_agents_confirmed_address_replaces_what_the_customer_typed_in_english(globex, fake_ollama):
    _session(
        globex, fake_ollama, "addr-en",
        [("Please ship everything to my home from now on: 12 Mill Road, Cambridge",
          "I've updated your address to 14 Mill Road, Cambridge. Please check it.")],
    )  # fmt: skip
    before = _said_at(globex, "12 Mill Road")
    results = _recall(globex, "addr-en", "What is my delivery address?")
    _assert_current_first(results, "14 Mill Road", "12 Mill Road")
    then = _contents(_recall(globex, "addr-en", "What is my address?", before))
    assert any("12 Mill Road" in c for c in then)
    anchor = _next_prompt(globex, fake_ollama, "addr-en", "Where will my parcel go?").split("\n", 1)[0]
    assert "14 Mill Road" in anchor, anchor
    assert "12 Mill Road" not in anchor, anchor


# --- "I said the 20th — sorry, the 21st" -----------------------------------------------------------


def test_the_customers_own_correction_of_a_date_wins(acme, fake_ollama):
    _session(
        acme, fake_ollama, "date-zh",
        [("帮我订一张去上海的往返机票", "好的，请问回程是哪天？"),
         ("要的，回程是8月20号", "好的，回程8月20号。"),
         ("不对，我说错了，是8月21号", "已为您改为8月21号。")],
    )  # fmt: skip
    between = _said_at(acme, "回程是8月20号")
    results = _recall(acme, "date-zh", "我的回程是哪天？")
    contents = _contents(results)
    assert "21" in contents[0], contents
    assert not any("8月20号" in c for c in _current(results)), results
    # as of before the correction, the 20th was the return date
    assert any("8月20号" in c for c in _contents(_recall(acme, "date-zh", "我的回程是哪天？", between)))
    prompt = _next_prompt(acme, fake_ollama, "date-zh", "我的回程航班是几号？")
    assert "8月21号" in prompt, prompt


def test_the_customers_own_correction_of_a_date_wins_in_english(globex, fake_ollama):
    _session(
        globex, fake_ollama, "date-en",
        [("I need a return flight to Edinburgh", "Sure, which day do you come back?"),
         ("Coming back on the 20th", "Noted, returning on the 20th."),
         ("I said the 20th - sorry, I meant the 21st", "No problem, returning on the 21st.")],
    )  # fmt: skip
    between = _said_at(globex, "Coming back on the 20th")
    results = _recall(globex, "date-en", "Which day do I come back?")
    assert "21st" in _contents(results)[0], _contents(results)
    assert not any("20th" in c and "21st" not in c for c in _current(results)), results
    assert any("on the 20th" in c for c in _contents(_recall(globex, "date-en", "Which day do I come back?", between)))
    prompt = _next_prompt(globex, fake_ollama, "date-en", "When is my return flight?")
    assert "21st" in prompt, prompt


# --- two coupons, one expired -----------------------------------------------------------------------------


def _day(offset: int) -> Any:
    return timezone.localtime() + timedelta(days=offset)


def test_an_expired_coupon_is_not_offered_after_its_date(acme, fake_ollama):
    first, second = _day(3), _day(30)
    _session(
        acme, fake_ollama, "coupon-zh",
        [("我的优惠券还能用吗？", f"这张券DX80有效期到{first.month}月{first.day}日，满100减20。"),
         ("还有别的券吗？", f"补发了一张会员日券JUL50，满200减50，有效期到{second.month}月{second.day}日。")],
    )  # fmt: skip
    # asked after the first one ended
    later = _day(5)
    results = _recall(acme, "coupon-zh", "哪张优惠券现在还能用？", later)
    assert "JUL50" in _contents(results)[0], _contents(results)
    assert not any("DX80" in c for c in _current(results)), results
    # today, both are valid
    assert any("DX80" in c for c in _current(_recall(acme, "coupon-zh", "DX80这张券还能用吗？")))


def test_an_expired_coupon_is_not_offered_after_its_date_in_english(globex, fake_ollama):
    first, second = _day(3), _day(30)
    _session(
        globex, fake_ollama, "coupon-en",
        [("Do I have any coupons?", f"Your coupon SAVE20 is valid until {first:%B} {first.day}, 20% off."),
         ("Anything else?", f"We also sent you coupon VIP50, valid until {second:%B} {second.day}, 50 off over 200.")],
    )  # fmt: skip
    results = _recall(globex, "coupon-en", "Which coupon can I still use?", _day(5))
    assert "VIP50" in _contents(results)[0], _contents(results)
    assert not any("SAVE20" in c for c in _current(results)), results
    assert any("SAVE20" in c for c in _current(_recall(globex, "coupon-en", "Is coupon SAVE20 still valid?")))


# --- a ticket's status ---------------------------------------------------------------------------------------


def test_a_tickets_later_status_supersedes_the_earlier(acme, fake_ollama):
    _session(
        acme, fake_ollama, "ticket-zh",
        [("我家宽带断了好几天了", "已为您提交报修，工单TS20240318009，目前施工排期中。")],
    )  # fmt: skip
    between = _said_at(acme, "施工排期中")
    _session(
        acme, fake_ollama, "ticket-zh",
        [("我的报修有进展了吗？", "工单TS20240318009已完成，宽带已恢复。")],
    )  # fmt: skip
    results = _recall(acme, "ticket-zh", "工单TS20240318009现在什么状态？")
    assert "已完成" in _contents(results)[0], _contents(results)
    assert not any("施工排期中" in c for c in _current(results)), results
    then = _contents(_recall(acme, "ticket-zh", "工单TS20240318009什么状态？", between))
    assert any("施工排期中" in c for c in then)
    prompt = _next_prompt(acme, fake_ollama, "ticket-zh", "TS20240318009这个工单修好了吗？")
    assert "已完成" in prompt, prompt
    assert "施工排期中" not in _as_current(prompt), prompt


def test_a_tickets_later_status_supersedes_the_earlier_in_english(globex, fake_ollama):
    _session(
        globex, fake_ollama, "ticket-en",
        [("My internet has been down for days",
          "I've opened repair ticket TK55012: an engineer visit is being scheduled.")],
    )  # fmt: skip
    between = _said_at(globex, "being scheduled")
    _session(
        globex, fake_ollama, "ticket-en",
        [("Any news on my repair?", "Ticket TK55012 is resolved: the line was repaired this morning.")],
    )  # fmt: skip
    results = _recall(globex, "ticket-en", "What is the status of ticket TK55012?")
    assert "resolved" in _contents(results)[0], _contents(results)
    assert not any("being scheduled" in c for c in _current(results)), results
    then = _contents(_recall(globex, "ticket-en", "TK55012 status?", between))
    assert any("being scheduled" in c for c in then)
    prompt = _next_prompt(globex, fake_ollama, "ticket-en", "Is TK55012 fixed?")
    assert "resolved" in prompt, prompt
    assert "being scheduled" not in _as_current(prompt), prompt


def test_a_later_state_of_a_hyphenated_reference_supersedes_the_earlier_whatever_else_it_says(globex, fake_ollama):
    # Both statements give values of their own (3 hours, £30), and the reference is written with a hyphen: the
    # later state of CMP-10233 is still the one that holds
    _session(
        globex, fake_ollama, "complaint-en",
        [("The power was off all evening, I want to complain",
          'I\'ve logged a complaint, reference CMP-10233, status "Received". Outages over 3 hours may qualify for '
          "compensation.")],
    )  # fmt: skip
    between = _said_at(globex, "Received")
    _session(
        globex, fake_ollama, "complaint-en",
        [("Any news on my complaint?",
          'Complaint CMP-10233 has been upheld and a £30 credit is on your account. Status: "Closed".')],
    )  # fmt: skip
    results = _recall(globex, "complaint-en", "What is the status of complaint CMP-10233?")
    assert "Closed" in _contents(results)[0], _contents(results)
    assert not any("Received" in c for c in _current(results)), results
    assert any("Received" in c for c in _contents(_recall(globex, "complaint-en", "CMP-10233 status?", between)))
    prompt = _next_prompt(globex, fake_ollama, "complaint-en", "Where is complaint CMP-10233 at?")
    assert "Closed" in prompt, prompt
    assert "Received" not in _as_current(prompt), prompt


def test_a_tickets_quoted_state_is_superseded_by_the_next_though_both_say_more(acme, fake_ollama):
    _session(
        acme, fake_ollama, "repair-zh",
        [("卫生间天花板漏水，麻烦派人来看看",
          "已为您创建报修工单GD2024061188，安排明天上午上门，当前状态「待上门」。")],
    )  # fmt: skip
    _session(
        acme, fake_ollama, "repair-zh",
        [("漏水修好了", "太好了！工单GD2024061188已标记为「已完工」，如有复发可在30天内申请免费返修。")],
    )  # fmt: skip
    results = _recall(acme, "repair-zh", "工单GD2024061188现在什么状态？")
    assert "已完工" in _contents(results)[0], _contents(results)
    assert not any("待上门" in c for c in _current(results)), results


def test_an_agents_done_act_naming_an_order_supersedes_nothing(acme, fake_ollama):
    # 「已为您…」 is what agents say of everything they do: a later note on the same order is no later state of it,
    # and the address given earlier stays current
    _session(
        acme, fake_ollama, "order-zh",
        [("帮我把订单DD20231128457的收货地址改到南京市鼓楼区湖南路51号",
          "已为您把订单DD20231128457的收货地址改为南京市鼓楼区湖南路51号。")],
    )  # fmt: skip
    _session(
        acme, fake_ollama, "order-zh",
        [("订单DD20231128457能开发票吗", "可以的，已为订单DD20231128457开具电子发票，发到您的邮箱了。")],
    )  # fmt: skip
    results = _recall(acme, "order-zh", "订单DD20231128457寄到哪里？")
    assert any("湖南路51号" in c for c in _current(results)), results


# --- a booking for 4 people changed to 6 --------------------------------------------------------------------


def test_a_booking_changed_from_four_to_six_people(globex, fake_ollama):
    _session(
        globex, fake_ollama, "party-en",
        [("I need a table for 4 people on Friday at 18:30", "Done: a table for 4 people on Friday at 18:30."),
         ("Can you change it to 6 people instead?", "Of course, the table is now for 6 people.")],
    )  # fmt: skip
    between = _said_at(globex, "table for 4 people")
    results = _recall(globex, "party-en", "How many people is my table for?")
    assert "6 people" in _contents(results)[0], _contents(results)
    assert not any("4 people" in c for c in _current(results)), results
    assert any(
        "4 people" in c for c in _contents(_recall(globex, "party-en", "How many people is my table for?", between))
    )
    # what the change did not touch is still true: the day and time
    assert any("18:30" in c for c in _current(_recall(globex, "party-en", "What day is my table?")))
    prompt = _next_prompt(globex, fake_ollama, "party-en", "How many people did I book for?")
    assert "6 people" in prompt, prompt


def test_a_booking_changed_from_four_to_six_people_in_chinese(acme, fake_ollama):
    _session(
        acme, fake_ollama, "party-zh",
        [("帮我订周五晚上6点半的位子，我们4个人", "好的，已为您预订周五18:30，4个人。"),
         ("能改成6个人吗？", "可以，已为您改为6个人。")],
    )  # fmt: skip
    between = _said_at(acme, "我们4个人")
    results = _recall(acme, "party-zh", "我订的位子是几个人？")
    assert "6个人" in _contents(results)[0], _contents(results)
    assert not any("4个人" in c for c in _current(results)), results
    assert any("4个人" in c for c in _contents(_recall(acme, "party-zh", "我订的位子是几个人？", between)))
    prompt = _next_prompt(acme, fake_ollama, "party-zh", "我订了几个人的位子？")
    assert "6个人" in prompt, prompt


# --- whose a value is: the keyed profile ------------------------------------------------------------------------


def _keyed(ctx: TenantCtx, end_user: str) -> dict[str, str]:
    """The customer's current keyed facts, as ``GET /api/v1/memories`` lists them for a session of theirs."""
    sid = open_session(ctx, end_user)["session_id"]
    response = ctx.client.get("/api/v1/memories", HTTP_X_SESSION_ID=sid)
    assert response.status_code == 200, response.content
    rows = response.json()["memories"]
    return {m["key"]: m["content"] for m in rows if m.get("key") and not m["key"].startswith("conversation:")}


def test_a_number_the_agent_read_off_the_account_and_the_customer_disowns_is_not_theirs(acme, fake_ollama):
    _session(
        acme, fake_ollama, "disown-zh",
        [("帮我查一下我账户上的手机号", "系统显示您预留的手机号是 13800005555。"),
         ("这个号码不是我的", "好的，已为您记录。")],
    )  # fmt: skip
    assert "13800005555" not in " ".join(_keyed(acme, "disown-zh").values())


def test_a_number_the_agent_read_off_the_account_and_the_customer_disowns_is_not_theirs_in_english(globex, fake_ollama):
    _session(
        globex, fake_ollama, "disown-en",
        [("Which phone number do you have for me?", "We have 646-555-0155 on file for you."),
         ("That number is not mine.", "Thanks, noted.")],
    )  # fmt: skip
    assert "5550155" not in " ".join(_keyed(globex, "disown-en").values()).replace("-", "")


def test_a_callers_number_and_a_forwarded_signature_are_not_the_customers(acme, globex, fake_ollama):
    _session(
        acme, fake_ollama, "caller-zh",
        [("我的手机是 13900006666", "好的。"),
         ("有个 13100009999 打电话说是你们客服，要我转账", "我们不会要求转账，请勿理会。"),
         ("我转发一下邮件：\n张经理\n电话 13700002222", "收到。")],
    )  # fmt: skip
    keyed = _keyed(acme, "caller-zh")
    assert "13900006666" in keyed.get("phone", ""), keyed
    assert "13100009999" not in " ".join(keyed.values()), keyed
    assert "13700002222" not in " ".join(keyed.values()), keyed
    _session(
        globex, fake_ollama, "caller-en",
        [("My mobile is 646-555-0177", "Thanks."),
         ("Our technician said he would call me from 212-555-0123", "Yes, that is our engineer's line.")],
    )  # fmt: skip
    keyed = _keyed(globex, "caller-en")
    assert "5550177" in keyed.get("phone", "").replace("-", ""), keyed
    assert "5550123" not in " ".join(keyed.values()).replace("-", ""), keyed


def test_the_customers_own_name_and_order_id_are_keyed(acme, fake_ollama):
    _session(acme, fake_ollama, "name-zh", [("这边是刘洋，订单 DD20261110001 还没发货", "刘先生您好，我帮您查一下。")])
    keyed = _keyed(acme, "name-zh")
    assert "刘洋" in keyed.get("name", ""), keyed
    assert "DD20261110001" in keyed.get("order_id", ""), keyed


# --- a choice with no form of its own (a cuisine) ----------------------------------------------------------


def test_a_cuisine_the_customer_replaces_is_no_longer_what_they_want(globex, fake_ollama):
    _session(
        globex, fake_ollama, "food-en",
        [("I need a cheap restaurant in the south, preferably a Panasian place.",
          "I'm not seeing any cheap Panasian restaurants in the south. Would you like something else?"),
         ("How about a Chinese place?", "The Lucky Star is a cheap Chinese restaurant in the south.")],
    )  # fmt: skip
    between = _said_at(globex, "Panasian place")
    results = _recall(globex, "food-en", "What kind of food did I want at the restaurant?")
    current = _current(results)
    assert current, _contents(results)
    assert "Chinese" in current[0], _contents(results)
    assert not any("Panasian" in c for c in current), results
    assert all("Chinese" not in c for c in _contents(results)[: len(current)] if "Panasian" in c), (
        "a Panasian statement is served as current"
    )
    # before the customer changed it, Panasian was what they wanted
    earlier = _recall(globex, "food-en", "What kind of food did I want at the restaurant?", between)
    assert any("Panasian" in c for c in _current(earlier)), earlier
    # the next prompt says the Panasian request is no longer current, and what replaced it
    prompt = _next_prompt(globex, fake_ollama, "food-en", "Which cuisine did I settle on for the restaurant?")
    assert "Panasian" not in _as_current(prompt), prompt
    assert "since changed panasian → chinese" in prompt, prompt


def test_what_the_agent_had_none_of_is_replaced_by_the_next_choice(globex, fake_ollama):
    # "afghan" and "korean" are no alike word by word; the agent's "no afghan restaurants" makes them one slot
    _session(
        globex, fake_ollama, "none-en",
        [("Hi! Do you know of any afghan restaurants in the centre?",
          "Sorry, there are no afghan restaurants in the centre."),
         ("Well, if you don't have that, do you have one that serves korean?",
          "Little Seoul serves Korean at 108 Regent Street City Centre.")],
    )  # fmt: skip
    results = _recall(globex, "none-en", "What kind of food did I want at the restaurant?")
    contents, current = _contents(results), _current(results)
    assert any("serves korean" in c for c in current), contents
    assert not any("afghan" in c for c in current), results


def test_a_new_word_in_another_matter_or_far_away_changes_nothing(globex, fake_ollama):
    # a hotel's area, then a restaurant in another area: two matters, both still true
    _session(
        globex, fake_ollama, "areas-en",
        [("I want a guesthouse in the north.", "The Acorn Guest House is in the north."),
         ("I also need a restaurant in the west.", "Saint Johns Chop House is in the west.")],
    )  # fmt: skip
    results = _recall(globex, "areas-en", "Which area did I want my hotel in?")
    assert any("guesthouse in the north" in c for c in _current(results)), results


def test_asking_for_a_detail_does_not_replace_the_choice(globex, fake_ollama):
    # "What is the address?" asks about the museum found; it does not swap the museum for an address
    _session(
        globex, fake_ollama, "detail-en",
        [("Is there a museum?", "Yes, the Fitzwilliam Museum is in the centre."),
         ("What is the address?", "It is on Trumpington Street.")],
    )  # fmt: skip
    results = _recall(globex, "detail-en", "What type of attraction did I want to visit?")
    assert any("museum?" in c for c in _current(results)), results


def test_naming_what_a_choice_is_chooses_nothing(globex, fake_ollama):
    # "the area" and "food" name slots, not values: asking what the options in the area are, or whether the
    # food is good, replaces neither the gastropub chosen nor the area
    _session(
        globex, fake_ollama, "slot-en",
        [("I need a restaurant in town for tonight.", "We have lots of restaurants. Any area?"),
         ("The area doesn't matter much.", "What kind of food would you like?"),
         ("How about a gastropub?", "The Slug and Lettuce is a gastropub in the centre."),
         ("Is that restaurant's food any good? What are the options in the area?", "It is very popular, yes.")],
    )  # fmt: skip
    results = _recall(globex, "slot-en", "What kind of food did I want at the restaurant?")
    assert "How about a gastropub?" in _current(results), results


def test_booking_the_choice_or_asking_for_a_list_of_details_replaces_nothing(globex, fake_ollama):
    # "book me a table" books (a word with an object is a verb, whatever the tagger says); "their postcode, phone
    # number, and address" is one definite list asked about: neither replaces the cuisine or the area chosen
    _session(
        globex, fake_ollama, "book-en",
        [("I need a cheap Chinese place in the centre.", "Golden House is a cheap Chinese restaurant there."),
         ("Yes, book me a table for 2 on Saturday at 19:45.", "Done, your reference number is 2K1P6FTA."),
         ("Can you give me their postcode, phone number, and address?", "CB2 1EA, 01842753771, 12 Lensfield Road.")],
    )  # fmt: skip
    results = _recall(globex, "book-en", "What kind of food did I want at the restaurant?")
    assert "I need a cheap Chinese place in the centre." in _current(results), results


def test_a_request_put_as_a_question_is_what_the_customer_wanted(globex, fake_ollama):
    # "How about British food instead?" asks nothing the agent answers with a fact: it is the customer's choice
    _session(
        globex, fake_ollama, "asked-en",
        [("Hi, can you help me find an expensive Russian restaurant?",
          "I am sorry, I do not see any expensive Russian restaurants."),
         ("How about British food instead?", "I have 3 British restaurants that fit. I recommend Fitzbillies."),
         ("Could you give me the restaurant's address for now?", "The address is 51 Trumpington Street.")],
    )  # fmt: skip
    results = _recall(globex, "asked-en", "What kind of food did I want at the restaurant?")
    contents, current = _contents(results), _current(results)
    assert "How about British food instead?" in current, contents
    # the customer's choice ranks above everything said about the one it replaced, which is not current
    russian = [i for i, c in enumerate(contents) if "Russian" in c]
    assert all(contents.index("How about British food instead?") < i for i in russian), contents
    assert not any("Russian" in c for c in current), results


def test_a_chinese_request_put_as_a_question_is_what_the_customer_wanted(acme, fake_ollama):
    _session(
        acme, fake_ollama, "asked-zh",
        [("你好，可以帮我推荐一个评分4分以上的酒店吗？", "为您推荐北京工体A. Hotel酒店，评分4.3分。"),
         ("这个酒店周边有什么景点？", "周边有工人体育场。"),
         ("可以帮我推荐一个最低价格700-800元的经济型酒店吗？", "为您推荐飘HOME连锁酒店，价格775元。")],
    )  # fmt: skip
    results = _recall(acme, "asked-zh", "我后来要找的酒店价格是多少？")
    # the agent's reply that states the price ranks with the request (it answers it); the request itself is next
    top = _contents(results)[:2]
    assert any("700-800元" in c and c.endswith("吗？") for c in top), _contents(results)


def test_a_dish_the_customer_replaces_is_no_longer_what_they_want(acme, fake_ollama):
    # 「想吃黄桥烧饼」, later 「想吃雪碧」: one frame (想吃), another dish; no word vectors involved
    _session(
        acme, fake_ollama, "dish-zh",
        [("你好，我想吃黄桥烧饼，有没有4.5分以上的餐馆？", "为您推荐砂锅居，评分4.6分。"),
         ("好的，我想吃雪碧，砂锅居周围哪家餐馆提供这道菜？", "推荐您去北京全聚德。")],
    )  # fmt: skip
    between = _said_at(acme, "黄桥烧饼")
    results = _recall(acme, "dish-zh", "我后来想吃的是哪道菜？")
    current = _current(results)
    assert any("雪碧" in c for c in current), _contents(results)
    assert not any("黄桥烧饼" in c for c in current), results
    earlier = _recall(acme, "dish-zh", "我想吃的是哪道菜？", between)
    assert any("黄桥烧饼" in c for c in _current(earlier)), earlier
    prompt = _next_prompt(acme, fake_ollama, "dish-zh", "我后来想吃的是哪道菜？")
    assert "since changed 黄桥烧饼 → 雪碧" in prompt, prompt


def test_asking_about_the_chosen_place_replaces_no_choice(acme, fake_ollama):
    # 「这家酒店的地址是在哪？」 names 地址 to ask for it, in the frame of the request's 「酒店住宿」: a clause with an
    # interrogative pronoun asks for a value, it does not choose anything
    _session(
        acme, fake_ollama, "asks-zh",
        [("你好，我想找一家评分4.5分以上、提供wifi服务的酒店住宿，给推荐一家吧。", "为您推荐北京首都宾馆，评分4.6分。"),
         ("这家酒店的地址是在哪？", "地址是在北京东城区前门东大街3号。")],
    )  # fmt: skip
    results = _recall(acme, "asks-zh", "我要求酒店提供什么设施？")
    assert any("wifi" in c for c in _current(results)), results


def test_very_grateful_is_not_ten_points(acme, fake_ollama):
    # 「十分感谢」 is the adverb "very": it gives the rating asked for no new value
    _session(
        acme, fake_ollama, "shifen-zh",
        [("帮我推荐一个门票免费、评分5分的景点。", "为您推荐景山公园，评分5分。"),
         ("十分感谢你的建议。", "不客气。")],
    )  # fmt: skip
    results = _recall(acme, "shifen-zh", "我想找的景点评分是多少？")
    assert any("评分5分的景点" in c for c in _current(results)), results


def test_a_dish_eaten_with_a_complement_is_replaced_in_the_same_frame(acme, fake_ollama):
    # 「能吃到肉末烧饼」 then 「能吃三鲜包子」: 吃到 frames as 吃 (a complement of result)
    _session(
        acme, fake_ollama, "complement-zh",
        [("帮我找一个人均消费50-100元、能吃到肉末烧饼的餐馆。", "没有这样的餐馆，推荐您去满福楼。"),
         ("那能再帮我找一个能吃三鲜包子，评分4.5分以上的餐馆吗？", "推荐您去庆丰包子铺。")],
    )  # fmt: skip
    results = _recall(acme, "complement-zh", "我后来想吃的是哪道菜？")
    assert any("三鲜包子" in c for c in _current(results)), results
    assert not any("肉末烧饼" in c for c in _current(results)), results


def test_a_dish_replaced_much_later_in_the_session_is_no_longer_wanted(acme, fake_ollama):
    # the customer's first wish and its revision many turns later, with a hotel discussed in between
    _session(
        acme, fake_ollama, "far-dish-zh",
        [("我想吃枣糕牛舌饼，给我推荐一个人均消费是50-100元的餐馆好吗？", "推荐您去北京稻香村，评分4分。"),
         ("北京稻香村的地址在哪？", "在兴禾路12号。"),
         ("周边有酒店吗？", "周边有北京梧桐树酒店。"),
         ("这家酒店多少钱一晚？", "价格是250元。"),
         ("酒店有wifi吗？", "有的，公共区域提供wifi。"),
         ("好的，酒店的电话是多少？", "电话是01067055578。"),
         ("谢谢，我先记下来。", "不客气。"),
         ("那给我找一个可以吃胡同菜的餐馆吧，人均消费在50-100元的。", "推荐您去利群烤鸭店。")],
    )  # fmt: skip
    results = _recall(acme, "far-dish-zh", "我后来想吃的是哪道菜？")
    assert any("胡同菜" in c for c in _current(results)), results
    assert not any("枣糕牛舌饼" in c for c in _current(results)), results


# --- a second request on the same matter, with another value of a labelled attribute ---------------------------


def test_a_second_search_with_another_ticket_price_is_what_the_customer_wants_now(acme, fake_ollama):
    _session(
        acme, fake_ollama, "search-zh",
        [("你好，请帮我推荐一个门票价格20-50元、评分4.5分以上的景点。", "为您推荐景山公园，评分4.6分。"),
         ("景山公园附近有什么好吃的餐馆吗？", "附近有四季民福烤鸭店，人均150元。"),
         ("好的，谢谢。", "不客气。"),
         ("另外我还想去一个地方玩，要门票150-200元的，有什么推荐？", "为您推荐故宫博物院，评分4.7分。")],
    )  # fmt: skip
    between = _said_at(acme, "门票价格20-50元")
    results = _recall(acme, "search-zh", "我后来找的景点门票是什么价位？", k=10)
    current = _current(results)
    priced = [c for c in current if "门票" in c]
    assert priced, _contents(results)
    assert "150-200元" in priced[0], _contents(results)
    # the first request is still recalled (its rating is still what was asked), as no longer current
    assert any("20-50元" in c for c in _contents(results)), _contents(results)
    assert not any("20-50元" in c for c in current), results
    earlier = _recall(acme, "search-zh", "我找的景点门票是什么价位？", between)
    assert any("20-50元" in c for c in _current(earlier)), earlier


def test_two_amounts_with_different_labels_are_two_facts(acme, fake_ollama):
    # a card's limit and its bill are both amounts the customer states, about one card: neither changes the other
    _session(
        acme, fake_ollama, "card-zh",
        [("我的信用卡额度是50000元。", "好的，已记录您的额度。"),
         ("这个月的账单是3200元，什么时候还款？", "请在本月25日前还款。")],
    )  # fmt: skip
    results = _recall(acme, "card-zh", "我的信用卡额度是多少？")
    assert any("50000元" in c for c in _current(results)), results


def test_a_fee_asked_for_by_its_name_stays_current_beside_a_later_change_of_something_else(acme, fake_ollama):
    # given a course's fee, and later its training ground moved (a change that gives no amount): a question
    # naming the fee (学费, not 价格 or 费用) asks for an amount, which the later change does not touch
    _session(
        acme, fake_ollama, "fee-zh",
        [("周末班多少钱", "C1周末班学费是4680元，包含科目一到科目三的培训。"),
         ("在哪练车", "从下个月起周末班统一改到北郊训练场练车，有免费班车接送。")],
    )  # fmt: skip
    results = _recall(acme, "fee-zh", "我报的周末班学费是多少？")
    assert any("4680元" in c for c in _current(results)), results


def test_a_parcels_state_named_as_a_state_is_superseded_by_the_next_named_state(acme, fake_ollama):
    # given a parcel in transit (「状态「运输中」」) and days later the order signed for (「状态「已签收」」), no
    # reference number in either: two named states of one thing
    _session(acme, fake_ollama, "states-zh", [("沙发发了吗", "已经发货了，状态「运输中」，预计本周六送到。")])
    between = _said_at(acme, "运输中")
    _session(acme, fake_ollama, "states-zh", [("东西收到了", "好的，订单显示已于周日签收，状态「已签收」。")])
    results = _recall(acme, "states-zh", "我的沙发现在是什么状态？")
    assert "已签收" in _contents(results)[0], _contents(results)
    assert not any("运输中" in c for c in _current(results)), results
    earlier = _recall(acme, "states-zh", "我的沙发是什么状态？", between)
    assert any("运输中" in c for c in _current(earlier)), earlier


def test_what_was_not_done_yet_and_is_done_now_is_no_longer_current(acme, fake_ollama):
    # given the agent said the double points were not yet credited, and weeks later that they were — no id
    # names the thing, and the later statement gives other amounts
    _session(
        acme, fake_ollama, "progress-zh",
        [("我生日那天买了个吹风机，积分怎么才加了六百多",
          "按生日当月2倍积分应得一千三百分。系统目前只到账了六百五十分，双倍的部分还没补发，会在确认收货后7天内补发剩下的六百五十分。")],
    )  # fmt: skip
    between = _said_at(acme, "还没补发")
    _session(
        acme, fake_ollama, "progress-zh",
        [("生日那个双倍积分补了吗", "已经补发了。生日订单剩下的六百五十分已于4月2日到账，您目前积分两千九百六十分。")],
    )  # fmt: skip

    # then the "not yet" is no longer current, the done is; asked as of before the change, the "not yet" was
    results = _recall(acme, "progress-zh", "生日那单的双倍积分补发了没有？")
    assert any("已经补发" in c for c in _current(results)), results
    assert not any("还没补发" in c for c in _current(results)), results
    assert any("还没补发" in c for c in _contents(_recall(acme, "progress-zh", "双倍积分补发了没有？", between)))
    prompt = _next_prompt(acme, fake_ollama, "progress-zh", "双倍积分到账了吗？")
    assert "还没补发" not in _as_current(prompt), prompt


def _progressed(
    ctx: TenantCtx, fake: Any, end_user: str, first: tuple[str, str], later: tuple[str, str],
    said: tuple[str, str], question: str,
) -> None:  # fmt: skip
    """Two sessions, ``first`` then ``later`` (customer, agent), whose replies say an act is not done yet
    (``said[0]``) and then done (``said[1]``): asked now the "not yet" is no longer current and the done is; asked as
    of a moment between the two, the "not yet" was current."""
    _session(ctx, fake, end_user, [first])
    between = _said_at(ctx, said[0])
    _session(ctx, fake, end_user, [later])
    results = _recall(ctx, end_user, question)
    assert any(said[1] in c for c in _current(results)), results
    assert not any(said[0] in c for c in _current(results)), results
    earlier = _recall(ctx, end_user, question, between)
    assert any(said[0] in c for c in _current(earlier)), earlier


def test_a_refund_not_processed_yet_and_processed_now_is_no_longer_current(globex, fake_ollama):
    # given the agent said the refund was not processed yet, and a week later that it has been — no id
    _progressed(
        globex, fake_ollama, "progress-en",
        ("Where is my refund for the blue jacket?",
         "I can see your return arrived, but the refund for the blue jacket hasn't been processed yet."),
        ("Any news on the jacket refund?", "Good news: the refund for the blue jacket has been processed today."),
        ("hasn't been processed", "has been processed"), "Has the refund for my blue jacket been processed?",
    )  # fmt: skip
    # and the next prompt does not give the "not yet" as current
    prompt = _next_prompt(globex, fake_ollama, "progress-en", "Is my jacket refund done?")
    assert "hasn't been processed" not in _as_current(prompt), prompt


def test_a_claim_awaiting_review_and_reviewed_now_is_no_longer_current(globex, fake_ollama):
    # given the agent said the claim was awaiting review, and later that it has been reviewed — the English of 「待…」
    _progressed(
        globex, fake_ollama, "awaiting-en",
        ("What's happening with my water damage claim?", "Your water damage claim is awaiting review by our assessor."),
        ("Any news on the water damage claim?", "Your water damage claim has been reviewed and approved."),
        ("awaiting review", "has been reviewed"), "Has my water damage claim been reviewed?",
    )  # fmt: skip


def _assert_a_later_state_holds(
    ctx: TenantCtx, fake: Any, end_user: str, first: tuple[str, str], later: tuple[str, str],
    states: tuple[str, str], asked: tuple[str, str, str],
) -> None:  # fmt: skip
    """Two sessions, ``first`` then ``later`` (customer, agent), whose replies give the earlier and the later
    of ``states``: asked now (``asked[0]``) the later comes first and the earlier is not current; asked as of a
    moment between the two (``asked[1]``) the earlier is current; the next prompt (``asked[2]``) gives the later
    and does not present the earlier as current."""
    old, new = states
    _session(ctx, fake, end_user, [first])
    between = _said_at(ctx, old)
    _session(ctx, fake, end_user, [later])
    results = _recall(ctx, end_user, asked[0])
    assert new in _contents(results)[0], _contents(results)
    assert not any(old in c for c in _current(results)), results
    earlier = _recall(ctx, end_user, asked[1], between)
    assert any(old in c for c in _current(earlier)), earlier
    prompt = _next_prompt(ctx, fake, end_user, asked[2])
    assert new in prompt, prompt
    assert old not in _as_current(prompt), prompt


def test_an_application_awaiting_approval_and_later_approved_is_no_longer_pending(acme, fake_ollama):
    # given a leave application whose state awaits the manager's approval (「待…审批」), and later the same
    # application approved — the later statement names no state as a state, and the words are unlike
    _assert_a_later_state_holds(
        acme, fake_ollama, "awaiting-zh",
        ("我想申请停卡一个月", "可以停卡，最长90天。已提交停卡申请，单号TK-5821，目前状态是“待经理审批”。"),
        ("停卡批了吗", "TK-5821已经审批通过，停卡期间会员有效期自动顺延。"),
        ("待经理审批", "审批通过"),
        ("TK-5821现在批下来了吗？", "TK-5821批下来了吗？", "我的停卡申请TK-5821怎么样了？"),
    )  # fmt: skip


def test_a_state_that_is_only_awaited_in_another_word_is_not_pending(acme, fake_ollama):
    # given an agent that looks forward to a visit (期待) and later says the visit has happened, nothing was
    # awaiting an act; the first statement's other fact (the opening hours) stays current
    _session(acme, fake_ollama, "await-word-zh", [("你们几点开门", "门店早上9点开门，期待您的光临。")])
    _session(acme, fake_ollama, "await-word-zh", [("我昨天去过了", "感谢您已经光临门店。")])
    results = _recall(acme, "await-word-zh", "门店几点开门？")
    assert any("9点开门" in c for c in _current(results)), results


def test_a_refunds_requested_state_is_superseded_by_its_later_state_in_other_words(globex, fake_ollama):
    # given a refund reference with the status "requested", then the same reference said to be "now refunded"
    # (no status word, no quotes)
    _assert_a_later_state_holds(
        globex, fake_ollama, "refund-state-en",
        ("Please cancel the extra luggage I added",
         "Done, the £25 luggage add-on is cancelled. Refund RFD-8810, status: requested."),
        ("Has my luggage money come back?", "RFD-8810 is now refunded to your card."),
        ("status: requested", "now refunded"),
        ("What is the status of refund RFD-8810 now?", "What is the status of refund RFD-8810?",
         "Where is refund RFD-8810 at?"),
    )  # fmt: skip


def test_an_english_act_done_for_something_else_leaves_the_pending_one_current(globex, fake_ollama):
    # given an order not shipped yet, then an invoice sent: another act and another matter
    _session(globex, fake_ollama, "progress-other-en", [("Has my order shipped?", "Your order hasn't shipped yet.")])
    _session(globex, fake_ollama, "progress-other-en", [("And the invoice?", "Your invoice has been emailed.")])

    # then the order is still not shipped
    results = _recall(globex, "progress-other-en", "Has my order shipped yet?")
    assert any("hasn't shipped" in c for c in _current(results)), results


def test_an_act_done_for_something_else_leaves_the_pending_one_current(acme, fake_ollama):
    # given an order not yet shipped, then an invoice issued: another act and another matter
    _session(acme, fake_ollama, "progress-other-zh", [("我的订单发了吗", "您的订单还没发货，仓库正在备货。")])
    _session(acme, fake_ollama, "progress-other-zh", [("发票呢", "您的发票已经开好了，请查收邮箱。")])

    # then the order is still not shipped
    results = _recall(acme, "progress-other-zh", "我的订单发货了没有？")
    assert any("还没发货" in c for c in _current(results)), results


def test_a_chinese_duration_asked_for_again_replaces_the_first(acme, fake_ollama):
    # 「能玩0.5小时 - 1小时的地方」, later asked as a question 「有能玩3小时 - 4小时的地方吗」: hours are counted, and a
    # question giving a range is a request
    _session(
        acme, fake_ollama, "hours-zh",
        [("你好，给我找一个能玩0.5小时 - 1小时的地方。", "为您推荐北京海洋馆。"),
         ("附近有吃饭的地方吗", "附近有全聚德。"),
         ("在这些周边的景点当中，有能玩3小时 - 4小时的地方吗，评分咋样？", "颐和园可以玩3小时 - 4小时，评分4.7分。")],
    )  # fmt: skip
    results = _recall(acme, "hours-zh", "我后来想找的景点要玩多长时间？")
    assert any("3小时 - 4小时" in c for c in _current(results)[:2]), _contents(results)
    assert not any("0.5小时 - 1小时" in c for c in _current(results)), results


def test_how_long_asks_for_a_duration_changed_in_part(acme, fake_ollama):
    # the first request gives a ticket price and a duration; the second another duration only: asked "how long",
    # the first is stale; asked its ticket price, it is still what the customer wants
    _session(
        acme, fake_ollama, "how-long-zh",
        [("帮我找一个门票100-150元能玩3小时的景点。", "为您推荐北京海洋馆。"),
         ("在这些周边的景点里，有能玩2小时 - 4小时的吗？", "颐和园可以玩2小时 - 4小时。")],
    )  # fmt: skip
    results = _recall(acme, "how-long-zh", "我后来想找的景点要玩多长时间？")
    assert any("2小时 - 4小时" in c for c in _current(results)), _contents(results)
    assert not any("能玩3小时的景点" in c for c in _current(results)), results
    priced = _recall(acme, "how-long-zh", "我要的景点门票是什么价位？")
    assert any("100-150元" in c for c in _current(priced)), priced


def test_a_farewell_or_the_bookings_details_replace_no_choice(globex, fake_ollama):
    # The agent had no Russian place, the customer chose British food; what follows books the table and says
    # goodbye: "people" and "today" are no cuisine, and the refusal of "Russian" was answered by "British" already
    _session(
        globex, fake_ollama, "farewell-en",
        [("Can you find me an expensive Russian restaurant?",
          "It looks like there aren't any expensive Russian restaurants in town. Another price range?"),
         ("No, how about British food?", "There are six British places. Do you prefer a certain part of town?"),
         ("I would prefer the west.", "I would suggest Graffiti. What day, time and how many people?"),
         ("The same group of people at 16:15 on the same day.", "Booking was successful, reference UL39KIAD."),
         ("That is all for today, thank you!", "Have a nice day!")],
    )  # fmt: skip
    results = _recall(globex, "farewell-en", "What kind of food did I want at the restaurant?")
    current = _current(results)
    assert any("British food" in c for c in current), results
    assert not any("Russian" in c for c in current), results
    with tenant_scope(globex.tenant):
        british = MemoryUnit.objects.for_tenant(globex.tenant).get(content__contains="how about British food")
    assert not (british.data or {}).get("changed"), british.data


def test_asking_what_is_near_the_chosen_place_keeps_the_dish(acme, fake_ollama):
    # 「周边有酒店吗」 asks about another matter (a hotel) near the restaurant found, in the frame of 「周边的餐馆」:
    # 「餐馆」 and 「酒店」 lean to two matters in the domain examples, so the hotel replaces no restaurant
    _session(
        acme, fake_ollama, "near-zh",
        [("在这些周边的餐馆里，能吃到麻辣小龙虾吗，人均50-100元的。", "周边的餐馆里没有，可以推荐您去阿弟仔海鲜。"),
         ("想吃超级至尊，帮我找个评分4分以上的餐馆。", "推荐您去白兔餐厅(黄村店)。"),
         ("白兔餐厅(黄村店)的地址在哪，周边有酒店吗？", "地址在黄村镇丽园路，周边的酒店有北京梧桐树酒店。")],
    )  # fmt: skip
    results = _recall(acme, "near-zh", "我后来想吃的是哪道菜？")
    assert any("超级至尊" in c for c in _current(results)), results
    with tenant_scope(acme.tenant):
        wanted = MemoryUnit.objects.for_tenant(acme.tenant).get(content__contains="超级至尊")
    assert "term:餐馆" not in ((wanted.data or {}).get("changed") or {}), wanted.data


def test_the_agents_description_of_a_venue_leaves_the_customers_criterion_current(acme, fake_ollama):
    # 「能玩2小时 - 3小时」 is what 天坛 offers, said by the agent; the customer still wants 3 to 4 hours. The agent's
    # words change a criterion of the customer's only when they say they change something (「已为您改为…」).
    _session(
        acme, fake_ollama, "venue-zh",
        [("在这些周边的景点当中，有能玩3小时 - 4小时的地方吗，评分咋样？",
          "天坛、大观园、龙潭公园这些景点都可以玩3小时左右。"),
         ("天坛评分咋样，能玩多久？", "天坛的评分是4.5分，能玩2小时 - 3小时。")],
    )  # fmt: skip
    results = _recall(acme, "venue-zh", "我想找的景点要玩多长时间？")
    assert any("3小时 - 4小时" in c for c in _current(results)), results
    with tenant_scope(acme.tenant):
        wanted = MemoryUnit.objects.for_tenant(acme.tenant).get(content__contains="3小时 - 4小时")
    assert wanted.superseded_at is None, wanted.data
    assert not (wanted.data or {}).get("changed"), wanted.data


def test_a_choice_the_customer_disowns_is_replaced(globex, fake_ollama):
    # "west, not south": the newer statement names "south" only to take it back; it is no word the two share
    _session(
        globex, fake_ollama, "disown-en",
        [("I'm looking for a place to stay that has free wifi.", "There are 32 such places. Which area?"),
         ("Do you have any in the south?", "There are 4 guesthouses in the south."),
         ("I meant to say west, not south. And the place needs to be a hotel type.",
          "The Huntingdon Marriott Hotel is in the west area."),
         # "free" is framed by "hotel" only across "and": no word of its own clause, no replacement of "type"
         ("No at this time. What is the postcode for the hotel and do they have free parking?",
          "They do have free parking, the postcode is pe296fl")],
    )  # fmt: skip
    results = _recall(globex, "disown-en", "Which area did I want my hotel in?")
    current = _current(results)
    assert any("west, not south" in c for c in current), results
    assert "Do you have any in the south?" not in current, results
    with tenant_scope(globex.tenant):
        south = MemoryUnit.objects.for_tenant(globex.tenant).get(content="Do you have any in the south?")
    assert (south.data.get("changed") or {}).get("term:south", {}).get("to") == "west", south.data
    with tenant_scope(globex.tenant):
        west = MemoryUnit.objects.for_tenant(globex.tenant).get(content__contains="west, not south")
    assert not (west.data or {}).get("changed"), west.data


def test_a_shorter_stay_asked_for_replaces_the_nights_of_a_booking(globex, fake_ollama):
    # The first request names a hotel, people, nights and a day: its neighbours among the domain examples
    # disagree on its matter (a hotel's, a restaurant's, a train's booking), its words name the hotel.
    _session(
        globex, fake_ollama, "nights-en",
        [("I'm interested in the hotel called Lovell Lodge. I need a reservation for 6 people for 5 nights, "
          "starting on Thursday.",
          "I apologize, but there's no openings for that time frame. Would you like to try a shorter stay?"),
         ("Please try 1 night, thank you.", "Booking was successful, your reference number is TXF0WZ1O.")],
    )  # fmt: skip
    _assert_replaced(globex, "nights-en", "How many nights is my hotel stay?", "1 night", "5 nights")
    with tenant_scope(globex.tenant):
        first = MemoryUnit.objects.for_tenant(globex.tenant).get(content__contains="5 nights")
    assert "count:night" in (first.data.get("changed") or {}), first.data


def test_a_day_said_again_in_a_longer_request_replaces_the_first(globex, fake_ollama):
    # The second request is long and worded unlike the first; both are the customer's, on one train, in one
    # session: the day they say last is the day of the trip
    _session(
        globex, fake_ollama, "day-en",
        [("I'd like a train that is departing from Cambridge and going to London Liverpool Street.",
          "There are 70 trains. Would you like to narrow it down by day?"),
         ("I would like to leave on Thursday after 16:15.", "We have departures every two hours beginning at 7:27."),
         ("I just want to be clear. This is 7:27 friday morning correct? In that case, I'd like to book that for "
          "5 people with reference number, please.", "Booking was successful, reference VNHMJU4N.")],
    )  # fmt: skip
    _assert_replaced(globex, "day-en", "What day is my train?", "friday morning", "on Thursday")


def test_a_long_answer_to_the_agents_refusal_replaces_what_it_had_none_of(globex, fake_ollama):
    # The answer brings five new words (cuisine, food, price, range …): more than a brief revision, but it
    # answers "there are no … British food", so British is what it replaces
    _session(
        globex, fake_ollama, "long-answer-en",
        [("I would like to have an authentic British meal, but I need to do it cheaply. Can you help me with that?",
          "According to my search, there are no cheap restaurants serving British food. Another cuisine?"),
         ("Yes, one that serves Chinese food and still in the cheap price range.",
          "There are three cheap chinese restaurants in the centre.")],
    )  # fmt: skip
    _assert_replaced(
        globex, "long-answer-en", "What kind of food did I want at the restaurant?", "serves Chinese food", "British"
    )


def test_a_new_destination_replaces_the_first(globex, fake_ollama):
    # "to Cambridge", later "heading to norwich": both come after a preposition of direction, so the one
    # replaces the other though their word vectors are far apart; "norwich" is a name the tagger does not know,
    # not a verb after an infinitive's "to"
    _session(
        globex, fake_ollama, "destination-en",
        [("I'm looking for a train. I need it to bring me to Cambridge on Friday.",
          "There are 202 trains into cambridge on Friday. Where are you traveling from?"),
         ("I want to leave after 18:45 and am heading to norwich.",
          "There is a train leaving Cambridge for Norwich that departs at 19:36.")],
    )  # fmt: skip
    _assert_replaced(
        globex, "destination-en", "Where is my train going?", "heading to norwich", "bring me to Cambridge"
    )


def test_a_hotel_sought_again_after_a_meal_replaces_the_first_hotels_kind(acme, fake_ollama):
    # The second hotel request is said while the session is about a restaurant (「吃完饭…在餐馆周边」): its
    # neighbours among the domain examples lean to a hotel, short of agreeing, and that is its matter
    _session(
        acme, fake_ollama, "hotel-kind-zh",
        [("你好，可以帮我找一个价格1000元以上，提供早餐服务免费的高档型酒店吗？",
          "对不起没有查到完全符合条件的酒店，为你找到一个豪华型的北京朝阳悠唐皇冠假日酒店，其他条件都能满足，你看可以不？"),
         ("可以啊，就去这里好了，能帮我查一下这个酒店周边有什么餐馆吗？", "抱歉啊，酒店周边没有餐馆。"),
         ("好吧，那你知道这个酒店的地址吗？", "地址在北京朝阳区三丰北里3号(外交部东南侧)。"),
         ("好的，安排好住的地方，我想出去找个人均消费50-100元，能做素炒鳝丝的餐馆吃饭，知道哪里有这样的餐馆吗？",
          "人均消费这么低的餐馆是没有素炒鳝丝这个菜的，推荐你去仿膳饭庄吧，这里人均消费是211元，你看能接受不？"),
         ("那好吧，谁让我爱吃这个菜呢，它家通常几点营业呀？", "营业时间是周一至周日 11:00-14:00 17:00-20:00。"),
         ("营业时间还是挺合理的，那它家周边有酒店吗？",
          "当然了，周边酒店有北京天伦王朝酒店, 北京贵都大酒店, 北京首都宾馆。"),
         ("不错哦，吃完饭我打算在餐馆周边找一个提供无烟房的舒适型酒店住宿，知道哪个酒店适合我吗？",
          "不好意思，餐馆周边没有符合条件的酒店，北京贵都大酒店还是不错的。")],
    )  # fmt: skip
    _assert_replaced(acme, "hotel-kind-zh", "我后来想住什么类型的酒店？", "舒适型", "高档型")


def test_a_place_whose_direction_another_takes_is_replaced(globex, fake_ollama):
    # Cambridge is said in both requests: first where the train leaves from, then where it goes, with London now
    # where it leaves from
    _session(
        globex, fake_ollama, "direction-en",
        [("I also need a train from Cambridge on Tuesday.", "Where will you be going?"),
         ("I'm sorry, I actually need a train to Cambridge. I'll be coming from London Kings Cross.",
          "Ok, we have many options from London Kings Cross to Cambridge on Tuesday.")],
    )  # fmt: skip
    _assert_replaced(
        globex,
        "direction-en",
        "Where does my train leave from?",
        "coming from London Kings Cross",
        "train from Cambridge",
    )


def test_another_kind_of_attraction_replaces_the_first_with_no_frame_between_them(globex, fake_ollama):
    # "a college … in the same area as my hotel", later "how about a museum?": nothing around the two words is
    # shared and their word vectors are far apart; the labelled vocabulary knows both as kinds of attraction
    _session(
        globex, fake_ollama, "attraction-kind-en",
        [("I would like to visit a college that is in the same area as my hotel.",
          "There are several colleges in the east. Do you have one in mind?"),
         ("Hmm, how about a museum?", "The Cambridge Museum of Technology is in the east.")],
    )  # fmt: skip
    _assert_replaced(
        globex, "attraction-kind-en", "What type of attraction did I want to visit?", "a museum", "a college"
    )


def test_another_price_range_in_a_long_statement_replaces_the_first(globex, fake_ollama):
    # The revision comes with five new words (a change of mind, a venue, parking): more than a brief revision
    # brings, but "cheap" is another value of the price range "expensive" was
    _session(
        globex, fake_ollama, "price-long-en",
        [("I want a guesthouse in the expensive price range, please.",
          "Autumn House and Acorn Guest House are both lovely."),
         ("Sorry for changing my mind again, but cheap is fine. Does Autumn House offer free parking?",
          "Yes, Autumn House has free parking.")],
    )  # fmt: skip
    _assert_replaced(
        globex, "price-long-en", "What price range did I want for the hotel?", "cheap is fine", "expensive"
    )


def test_where_a_train_goes_leaves_where_it_leaves_from_current(globex, fake_ollama):
    # Cambridge is where the train leaves from and London where it goes: two ends of one route, not a revision,
    # though both are stations and the only new word of the later statement
    _session(
        globex, fake_ollama, "route-ends-en",
        [("I need a train from Cambridge on Friday.", "Where will you be travelling to?"),
         ("I am going to London.", "There are 10 trains from Cambridge to London on Friday.")],
    )  # fmt: skip
    results = _recall(globex, "route-ends-en", "Where does my train leave from?")
    assert any("from Cambridge" in c for c in _current(results)), results
    with tenant_scope(globex.tenant):
        first = MemoryUnit.objects.for_tenant(globex.tenant).get(content__contains="from Cambridge on Friday")
    assert first.superseded_at is None
    assert not first.data.get("changed"), first.data


def test_a_revision_unlike_the_request_it_revises_is_compared_with_it(globex, fake_ollama):
    # The customer's earlier searches read like "Can you search for a college?" far more than the request it
    # revises, said two messages before in the same session: that request is compared all the same
    _session(
        globex, fake_ollama, "unlike-en",
        [(f"Can you search for a {thing} for my cousin?", f"I found a {thing} near the station.")
         for thing in ("pharmacy", "bakery", "barber", "florist", "laundrette", "bookshop", "post office", "bank",
                       "dentist", "gym", "library", "tailor", "stationer", "cobbler", "greengrocer", "toy shop")],
    )  # fmt: skip
    _session(
        globex, fake_ollama, "unlike-en",
        [("Thanks again. I wonder if there are any entertainment attractions nearby. Can you suggest something?",
          "I'm sorry, I don't see any entertainment attractions in that area of town."),
         ("Can you search for a college?", "Christ's College is in the centre of town.")],
    )  # fmt: skip
    _assert_replaced(
        globex, "unlike-en", "What type of attraction did I want to visit?", "search for a college", "entertainment"
    )


def test_a_word_after_a_modal_replaces_no_choice(globex, fake_ollama):
    # "That should work" accepts a train: "work" is a verb after "should", not a place that replaces Cambridge
    # (one word gone, one come, both tagged nouns)
    _session(
        globex, fake_ollama, "modal-en",
        [("I am leaving from Cambridge.", "Where will you be travelling to?"),
         ("Sorry, it should leave Cambridge and arrive in Norwich on Friday.",
          "I have several results. What time would you like to leave?"),
         ("I just need to arrive by 18:15.", "How about TR7047? It arrives at 17:55?"),
         ("That should work. Can I please have the price on that?", "The price is 17.60 pounds.")],
    )  # fmt: skip
    with tenant_scope(globex.tenant):
        units = [
            u
            for u in MemoryUnit.objects.for_tenant(globex.tenant).filter(content__contains="Cambridge")
            if u.data.get("role") == "user"
        ]
    assert len(units) == 2
    assert all(not u.data.get("changed") for u in units), [u.data for u in units]


def test_a_dish_the_segmenter_cuts_unlike_a_noun_replaces_the_first(acme, fake_ollama):
    # 「麻辣」 is cut as a descriptive word and 「至尊」 as a verb: neither dish is a run of nouns, but each is what
    # 「吃」 takes, and that makes them one choice
    _session(
        acme, fake_ollama, "dish-object-zh",
        [("在这些周边的餐馆里，能吃到麻辣小龙虾吗，人均50-100元的。", "周边的餐馆里没有，可以推荐您去阿弟仔海鲜。"),
         ("想吃超级至尊，帮我找个评分4分以上的餐馆。", "推荐您去白兔餐厅(黄村店)。")],
    )  # fmt: skip
    _assert_replaced(acme, "dish-object-zh", "我后来想吃的是哪道菜？", "超级至尊", "麻辣小龙虾")


def _unchanged(ctx: TenantCtx, needle: str) -> None:
    """The customer's unit saying ``needle`` is current with no attribute changed."""
    with tenant_scope(ctx.tenant):
        unit = MemoryUnit.objects.for_tenant(ctx.tenant).get(content__contains=needle)
    assert unit.superseded_at is None
    assert not unit.data.get("changed"), unit.data


def test_a_venues_name_a_judgement_or_a_verb_after_a_modal_replaces_no_kind(globex, fake_ollama):
    # "Cambridge Artworks" is the museum picked, "cool" judges it, "forward" is what the agent is asked to do:
    # none of them is another kind of attraction
    _session(
        globex, fake_ollama, "venue-name-en",
        [("A museum in the east would be nice if possible.",
          "There are 4 museums in the east. I can recommend Cambridge Artworks."),
         ("I suppose Cambridge Artworks sounds cool.", "It is free to enter."),
         ("Would you forward the address for that also please?", "It is at 5 Greens Road.")],
    )  # fmt: skip
    _unchanged(globex, "A museum in the east")


def test_values_of_two_attributes_replace_neither(globex, fake_ollama):
    # "centre" is an area and "italian" a cuisine: the second request adds a choice, it replaces none
    _session(
        globex, fake_ollama, "two-attributes-en",
        [("Are there any good places to eat in the centre?", "There are many restaurants in the centre."),
         ("How about a great italian place?", "Pizza Hut City Centre serves italian food.")],
    )  # fmt: skip
    _unchanged(globex, "good places to eat in the centre")


def test_a_word_where_a_price_stood_changes_the_price(acme, fake_ollama):
    # 「免费」 is no amount, but it stands under the label the later amount has (门票): the ticket's price changed
    _session(
        acme, fake_ollama, "free-ticket-zh",
        [("你好，我想去个门票价格20-50元可以游玩时长3天的景点游玩，给我推荐一个吧。", "推荐您去北京野生动物园。"),
         ("地址在哪？", "地址在大兴区榆垡镇万亩森林。"),
         ("好的，请在绿岛乐园附近的景点里给我推荐一个评分4.5分以上门票免费，可以游玩时长2小时-3小时的景点。",
          "推荐您去大运河森林公园。")],
    )  # fmt: skip
    _assert_replaced(acme, "free-ticket-zh", "我后来找的景点门票是什么价位？", "门票免费", "20-50元")


def test_a_price_said_in_words_stays_current_when_the_rest_of_the_request_changes(acme, fake_ollama):
    # 「门票免费」 gives the ticket's price (it changed the 20-50元 before it), though no amount is written. A later
    # search near another place, rated 5 and for 1-2 hours, changes the rest of that request, not its price: asked
    # the price, the free ticket is current and first
    _session(
        acme, fake_ollama, "free-ticket-later-zh",
        [("你好，我想去个门票价格20-50元可以游玩时长3天的景点游玩，给我推荐一个吧。", "推荐您去北京野生动物园。"),
         ("好的，请在绿岛乐园附近的景点里给我推荐一个评分4.5分以上门票免费，可以游玩时长2小时-3小时的景点。",
          "推荐您去大运河森林公园。"),
         ("请在北京贵都大酒店附近的景点里给我推荐一个评分5分可以游玩时长1小时-2小时的景点。", "推荐您去天坛。")],
    )  # fmt: skip
    results = _recall(acme, "free-ticket-later-zh", "我后来找的景点门票是什么价位？")
    assert "门票免费" in _contents(results)[0], results
    assert results[0]["current"], results
    assert not any("20-50元" in c for c in _current(results)), results


def test_another_facility_of_the_vocabulary_replaces_the_first(acme, fake_ollama):
    # 「公共区域提供wifi」 and 「宽带上网」 share no frame and rjieba cuts them differently; both are hotel facilities
    # in the attribute vocabulary
    _session(
        acme, fake_ollama, "facility-zh",
        [("玩完了，想找个地方住下了，酒店最好有公共区域提供wifi。", "维也纳国际酒店(北京首体店)很符合您的要求。"),
         ("地址在哪？", "地址在北京海淀区首体南路。"),
         ("外婆家周围的酒店，有哪些酒店评分在4.5分以上，能够提供宽带上网的酒店么？", "推荐您去北京首都宾馆。")],
    )  # fmt: skip
    _assert_replaced(acme, "facility-zh", "我后来要求酒店提供什么设施？", "宽带上网", "公共区域提供wifi")


def test_a_dish_on_the_catalogues_menus_replaces_the_first_in_another_frame(acme, fake_ollama):
    # 「炒年糕」 after 「吃」, later 「糖醋里脊」 after 「做」: no frame in common; both are dishes the venue catalogue
    # offers, and the second request is the one that stands
    _session(
        acme, fake_ollama, "dish-zh",
        [("休息好了想去吃饭，我想吃炒年糕，有推荐的餐馆吗？", "推荐您去金沙峪韩式烤肉(顺义店)。"),
         ("评分是多少？", "评分是4.5分。"),
         ("我还想换一家，哪家店做糖醋里脊做得好？", "推荐您去护国寺小吃店（护国寺总店）。")],
    )  # fmt: skip
    _assert_replaced(acme, "dish-zh", "我后来想吃的是什么菜？", "糖醋里脊", "炒年糕")


def test_a_cuisines_word_said_in_another_sense_replaces_nothing(globex, fake_ollama):
    # "German" and "Spanish" are cuisines in the vocabulary, and the session was on a restaurant just before, but
    # neither statement speaks of food: two languages, both still true
    _session(
        globex, fake_ollama, "language-en",
        [("Can you recommend a good place to eat tonight?", "The Golden Curry is lovely."),
         ("I'm learning German now.", "That's impressive!"),
         ("Have you come across any good resources for learning Spanish?", "There are some good apps for that.")],
    )  # fmt: skip
    _unchanged(globex, "learning German")


def test_a_cuisine_revised_with_no_word_of_food_is_still_replaced(globex, fake_ollama):
    # The first request speaks of a restaurant: "spanish" after it is the cuisine wanted now
    _session(
        globex, fake_ollama, "cuisine-sense-en",
        [("I want to find a german restaurant.", "I'm sorry, there are none."),
         ("How about spanish?", "La Raza is a spanish restaurant.")],
    )  # fmt: skip
    _assert_replaced(globex, "cuisine-sense-en", "What cuisine did I want?", "spanish", "german restaurant")


def test_small_talk_unlike_every_domain_example_replaces_nothing(globex, fake_ollama):
    # Most of the far domain examples are a restaurant's, but none is close: a favourite recipe and a love of
    # cooking are small talk, and neither replaces a word of the other
    _session(
        globex, fake_ollama, "small-talk-en",
        [("I love cooking! My favorite recipe is Chicken Pot Pie. It's so cozy and delicious, especially on a cold "
          "day.", "That sounds wonderful."),
         ("I love trying out new recipes and experimenting in the kitchen - it's like an escape for me.",
          "Cooking is a great hobby.")],
    )  # fmt: skip
    _unchanged(globex, "Chicken Pot Pie")


def test_a_kind_said_in_a_statement_whose_own_matter_shows_it_is_replaced(globex, fake_ollama):
    # Neither statement says a word customers say with a kind of attraction, but each one's own words are an
    # attraction's by the domain examples: "architecture" replaces the museum
    _session(
        globex, fake_ollama, "own-matter-en",
        [("Can you look for a museum for me?", "There are 12 museums. Which area would you like?"),
         ("Actually, is there something like architecture?", "All Saints Church is in the centre.")],
    )  # fmt: skip
    _assert_replaced(
        globex, "own-matter-en", "What type of attraction did I want to visit?", "architecture", "look for a museum"
    )


def test_a_parking_space_moved_from_one_number_to_another(acme, fake_ollama):
    # 「有没有近一点的」 is "a little closer", no time: the statement names B2-117 and nothing else, and the later
    # 「从B2-117换为B2-032」 is its later state
    _session(
        acme, fake_ollama, "parking-zh",
        [("另外我车位想换一个，现在是B2-117，离电梯太远了，有没有近一点的？",
          "目前靠近电梯的B2-032空出来了，需要的话我帮您申请。")],
    )  # fmt: skip
    _session(
        acme, fake_ollama, "parking-zh",
        [("车位的事怎么样了", "车位更换已审批通过，您的车位已从B2-117换为B2-032，月租不变，即日起生效。")],
    )  # fmt: skip
    results = _recall(acme, "parking-zh", "我现在的车位号是多少？")
    assert "B2-032" in _contents(results)[0], _contents(results)
    assert not any("现在是B2-117" in c for c in _current(results)), results


def test_a_name_spelt_again_with_one_slip_fixed_is_its_correction(globex, fake_ollama):
    _session(
        globex, fake_ollama, "certificate-en",
        [("for the certificate, my name is Noor Hadad", 'Certificate name recorded as "Noor Hadad".')],
    )  # fmt: skip
    _session(
        globex, fake_ollama, "certificate-en",
        [("also the certificate name is spelled wrong, it's Haddad with double d",
          'Thanks for catching that. The certificate name is now "Noor Haddad".')],
    )  # fmt: skip
    results = _recall(globex, "certificate-en", "What name will be printed on my certificate?")
    assert "Haddad" in _contents(results)[0], _contents(results)
    assert not any("Hadad" in c and "Haddad" not in c for c in _current(results)), results


def test_a_reading_and_a_chinese_name_with_a_slip_fixed_are_corrected(acme, fake_ollama):
    _session(
        acme, fake_ollama, "reading-zh",
        [("我妈叫何秀兰，68岁，挂骨科。", "好的，给何秀兰女士预约了骨科。"),
         ("等一下，名字写错了，是何秀岚，山字头那个岚。", "抱歉，已更正就诊人姓名为何秀岚。"),
         ("电表读数是04512", "已记录读数04512。"),
         ("看错了，是04521，后两位反了", "已更正读数为04521。")],
    )  # fmt: skip
    _assert_replaced(acme, "reading-zh", "我妈就诊人名字登记的是哪几个字？", "何秀岚", "何秀兰")
    _assert_replaced(acme, "reading-zh", "电表读数登记的是多少？", "04521", "04512")


def test_two_years_a_digit_apart_are_two_years(globex, fake_ollama):
    _session(
        globex, fake_ollama, "years-en",
        [("In 2022 we went to Lisbon for the conference.", "Sounds lovely."),
         ("In 2023 we went to Porto for the conference.", "Nice!")],
    )  # fmt: skip
    _unchanged(globex, "2022 we went to Lisbon")


def test_what_holds_now_answers_where_the_state_it_superseded_was_found(globex, fake_ollama):
    # The question's words find the first state (a refill request and its reference); its last state says none of
    # them, and is served in its place
    _session(
        globex, fake_ollama, "refill-en",
        [("I need my blood pressure prescription refilled, amlodipine 5mg",
          'I\'ve sent a refill request for amlodipine 5mg to your GP, reference RX-61204. Status: "Awaiting GP '
          'approval".'),
         ("Can the refill be delivered instead of collected?", "Yes, we deliver on Tuesdays and Thursdays."),
         ("Do you have my GP's number for the refill request?", "Yes, Elmwood Surgery, 0161 496 0732."),
         ("Is there a generic version of my prescription refill?", "Yes, generic amlodipine is available."),
         ("Please use the generic one for every refill request", "Noted: generic versions by default."),
         ("How long does a refill request usually take?", "Usually two to three working days.")],
    )  # fmt: skip
    _session(globex, fake_ollama, "refill-en", [("any news?", 'RX-61204 is now "Being prepared".')])
    _session(globex, fake_ollama, "refill-en", [("got it", 'RX-61204 shows as "Collected".')])
    results = _recall(globex, "refill-en", "What is the reference of the amlodipine refill request sent to my GP?")
    current = _current(results)
    assert any("Collected" in c for c in current), results
    assert not any("Awaiting" in c or "Being prepared" in c for c in current), results


# --- values that name their attribute: a unit, a label, a named one of a kind --------------------------------


def test_a_group_by_its_letter_and_a_store_by_its_name_are_replaced_sessions_later(globex, fake_ollama):
    # "Group C" → "Group D" and "our Riverside store" → "our Market Square store": the label and the noun name the
    # attribute, however differently the rest is worded and however far apart
    _session(
        globex, fake_ollama, "group-en",
        [("Swimming lessons for my son please, Group C", "You're booked into Group C, Tuesdays 5-6pm."),
         ("I'll collect the kit at the Riverside store", "Collection is set for our Riverside store.")],
    )  # fmt: skip
    _session(
        globex, fake_ollama, "group-en",
        [("Tuesdays stopped working for us, sorry", "I've moved your son to Group D, Thursdays 5-6pm."),
         ("And the kit, somewhere nearer work?", "Done, I've moved the pickup to our Market Square store.")],
    )  # fmt: skip
    before = _said_at(globex, "booked into Group C")
    _assert_replaced(globex, "group-en", "Which group is my son in?", "Group D", "Group C")
    _assert_replaced(globex, "group-en", "Which store do I pick the kit up from?", "Market Square", "Riverside")
    then = _contents(_recall(globex, "group-en", "Which group is my son in?", before + timedelta(seconds=1)))
    assert any("Group C" in c for c in then), then
    anchor = _next_prompt(globex, fake_ollama, "group-en", "Remind me of the lesson group").split("\n", 1)[0]
    assert "Group C" not in _as_current(anchor), anchor


def test_a_speed_in_its_unit_and_a_flat_in_its_building_are_replaced(acme, fake_ollama):
    # 「100M」 → 「1000M」 (a quantity's unit names the attribute); 「7栋3单元402」 → 「7栋2单元402」 (a flat
    # without its street is an address: one slip fixed is its correction)
    _session(
        acme, fake_ollama, "speed-zh",
        [("我家宽带现在是100M的，经常卡", "已记录您的宽带套餐为100M。"),
         ("我住阳光小区7栋3单元402，路由器也想换", "已登记地址：阳光小区7栋3单元402。")],
    )  # fmt: skip
    _session(
        acme, fake_ollama, "speed-zh",
        [("那帮我升级到1000M吧", "已为您升级为1000M千兆套餐，下月生效。"),
         ("对了，刚才单元说错了，是7栋2单元402", "抱歉，已更正为7栋2单元402。")],
    )  # fmt: skip
    _assert_replaced(acme, "speed-zh", "我家宽带现在是多少兆的？", "1000M", "100M的")
    _assert_replaced(acme, "speed-zh", "我登记的是哪栋哪个单元？", "7栋2单元402", "7栋3单元402")


def test_two_medicines_doses_are_two_facts(globex, fake_ollama):
    # the same unit after two different nouns: amlodipine's dose and atorvastatin's, both current
    _session(
        globex, fake_ollama, "doses-en",
        [("My prescription is amlodipine 5mg every morning", "Noted: amlodipine 5mg, once daily."),
         ("I also take my prescription atorvastatin 20mg at night", "Noted: atorvastatin 20mg at night.")],
    )  # fmt: skip
    _unchanged(globex, "amlodipine 5mg every morning")


def test_an_amount_under_the_same_label_is_replaced_among_other_amounts(globex, fake_ollama):
    # "12 monthly payments of £30", later "the 12 payments are now £25 each" beside two other amounts: the label
    # says which amount changed; the count said again is no longer the older statement's alone
    _session(
        globex, fake_ollama, "payments-en",
        [("Can I pay the membership monthly?", "Yes, I've set you up with 12 monthly payments of £30.")],
    )  # fmt: skip
    _session(
        globex, fake_ollama, "payments-en",
        [("I got the student discount approved",
          "Great, with the £60 discount your total is £300, so the 12 payments are now £25 each.")],
    )  # fmt: skip
    _assert_replaced(globex, "payments-en", "How much is each membership payment?", "£25 each", "payments of £30")


def test_a_titled_applications_later_state_supersedes_the_earlier(globex, acme, fake_ollama):
    # No reference number: the quoted title names the thing whose state changes
    _session(globex, fake_ollama, "title-en", [("any news?", 'Your application "Garden extension" is "Under review".')])
    _session(
        globex, fake_ollama, "title-en",
        [("and now?", '"Garden extension" has been decided: status "Approved", valid for 3 years.')],
    )  # fmt: skip
    question = "Has my garden extension application been decided?"
    _assert_replaced(globex, "title-en", question, "Approved", "Under review")
    _session(acme, fake_ollama, "title-zh", [("进度怎么样", "您的申请「阳台封窗改造」目前状态「审核中」。")])
    _session(acme, fake_ollama, "title-zh", [("现在呢", "「阳台封窗改造」已审核通过，状态「已通过」。")])
    _assert_replaced(acme, "title-zh", "我的阳台封窗申请批了吗？", "已通过", "审核中")


def test_a_title_said_twice_with_no_state_supersedes_nothing(globex, fake_ollama):
    # a film's title in quotes names the film; saying it again is no later state of it
    _session(globex, fake_ollama, "film-en", [('I just watched "Little Women" and loved it!', "Glad you enjoyed it.")])
    _session(
        globex, fake_ollama, "film-en", [('My sister watched "Little Women" too, she cried.', "It is a moving film.")]
    )
    _unchanged(globex, 'I just watched "Little Women"')


def test_two_titled_things_states_are_two_facts(globex, fake_ollama):
    _session(
        globex, fake_ollama, "titles-en", [("any news?", 'Your application "Garden extension" is "Under review".')]
    )
    _session(
        globex, fake_ollama, "titles-en", [("and the other?", 'Your application "Loft conversion" is "Approved".')]
    )
    _unchanged(globex, "Garden extension")


# --- something said to have expired ------------------------------------------------------------------------------


def test_a_coupon_said_to_have_expired_is_no_longer_valid_though_its_date_was_never_said(acme, fake_ollama):
    # 「在有效期内都能用」 gives no date; weeks later the agent says the coupon has expired
    _session(
        acme, fake_ollama, "expired-zh",
        [("那张满200减30的券现在能用吗", "可以的，那张满200减30的券在有效期内都能用。")],
    )  # fmt: skip
    _session(
        acme, fake_ollama, "expired-zh",
        [("我想用那张券", "查到满200减30的券已经过期了，无法再使用。我给您补发了一张满100减10的券，30天内有效。")],
    )  # fmt: skip
    current = _current(_recall(acme, "expired-zh", "我现在还能用的券是哪张？"))
    assert any("满100减10" in c for c in current), current
    assert not any("在有效期内都能用" in c for c in current), current


def test_a_code_said_to_have_expired_leaves_the_refund_beside_it_current(globex, fake_ollama):
    _session(
        globex, fake_ollama, "expired-en",
        [("Sorry to hear that. Anything you can do?",
          "I've refunded £12 to your card, and you can use WELCOME10 for 10% off your next order.")],
    )  # fmt: skip
    _session(
        globex, fake_ollama, "expired-en",
        [("I tried the code today",
          "I'm sorry, WELCOME10 has expired. I can offer SPRING5 instead, valid for 30 days.")],
    )  # fmt: skip
    valid = _current(_recall(globex, "expired-en", "Which discount code can I still use?"))
    assert not any("WELCOME10 for 10% off" in c for c in valid), valid
    refund = _current(_recall(globex, "expired-en", "How much did you refund to my card?"))
    assert any("refunded £12" in c for c in refund), refund


# --- a statement that names what it replaces ---------------------------------------------------------------------


def test_a_dish_the_customer_swaps_out_is_no_longer_on_the_menu(globex, fake_ollama):
    _session(
        globex, fake_ollama, "swap-en",
        [("For the buffet we'd like the beef rendang and a big green salad.",
          "Lovely, beef rendang and green salad are pencilled in.")],
    )  # fmt: skip
    _session(
        globex, fake_ollama, "swap-en",
        [("Could you swap the beef rendang for a vegetable korma? My sister is vegetarian.",
          "Of course, done.")],
    )  # fmt: skip
    _assert_replaced(
        globex, "swap-en", "Which curry is on the buffet menu?", "vegetable korma", "beef rendang are pencilled"
    )


def test_a_plan_the_agent_says_it_changed_from_one_to_another_is_the_new_one(acme, fake_ollama):
    _session(acme, fake_ollama, "from-to-zh", [("我先开个基础套餐吧", "好的，已为您开通基础套餐，每月39元。")])
    _session(
        acme, fake_ollama, "from-to-zh",
        [("流量不够用", "已将您的套餐由基础套餐升级为畅游套餐，每月59元，下月生效。")],
    )  # fmt: skip
    _assert_replaced(acme, "from-to-zh", "我现在开的是什么套餐？", "畅游套餐", "已为您开通基础套餐")


def test_a_place_named_as_replaced_is_no_answer_to_where(globex, fake_ollama):
    # "Where" asks for an address; the replaced term holds one, so the question asks for the term.
    _session(
        globex, fake_ollama, "where-en",
        [("We'd like the picnic in our garden at 14 Rowan Avenue, Saturday at noon.",
          "Lovely, the picnic at 14 Rowan Avenue on Saturday at noon is booked.")],
    )  # fmt: skip
    _session(
        globex, fake_ollama, "where-en",
        [("Rain is forecast, can we move it indoors?",
          "Done: I've moved the picnic from your garden at 14 Rowan Avenue to the Beacon Park Pavilion.")],
    )  # fmt: skip
    _assert_replaced(
        globex,
        "where-en",
        "Where is the picnic happening now?",
        "Beacon Park Pavilion",
        "We'd like the picnic in our garden",
    )


def test_a_pickup_point_set_again_under_its_label_is_the_new_one(acme, fake_ollama):
    _session(acme, fake_ollama, "label-zh", [("我的快递一般放哪？", "您的默认自提点是城西花园南门驿站。")])
    _session(acme, fake_ollama, "label-zh", [("改到公司那边吧", "好的，已把默认自提点改为科技园二期快递柜。")])
    _assert_replaced(acme, "label-zh", "我现在的默认自提点是哪里？", "科技园二期快递柜", "城西花园南门驿站")
    earlier = _recall(acme, "label-zh", "我的默认自提点是哪里？", as_of=_said_at(acme, "城西花园南门驿站"))
    assert any("城西花园南门驿站" in c for c in _current(earlier)), earlier


# --- a later state, named as one or of the same reference -------------------------------------------------------


def test_a_refund_said_done_later_replaces_where_it_stood(globex, fake_ollama):
    _session(
        globex,
        fake_ollama,
        "refund-en",
        [("Any news on my refund?", "RF-8812 has been approved and is with the bank.")],
    )
    _session(
        globex, fake_ollama, "refund-en",
        [("Checking again", "RF-8812 is now refunded: the £24 went back to your card yesterday.")],
    )  # fmt: skip
    _assert_replaced(globex, "refund-en", "Has my refund come through yet?", "now refunded", "is with the bank")


def test_an_invoice_state_named_later_replaces_the_earlier_state(acme, fake_ollama):
    _session(
        acme, fake_ollama, "invoice-zh", [("帮我开张发票", "已提交开票申请，目前状态「待开具」，一般3到5个工作日。")]
    )
    _session(
        acme, fake_ollama, "invoice-zh", [("发票好了吗", "您好，发票已经开好了，状态是「已开具」，已发到您的邮箱。")]
    )
    _assert_replaced(acme, "invoice-zh", "我的发票开出来了吗？", "已开具", "待开具")


# --- another value of what the question asks, said later about the same thing ----------------------------------


def test_a_number_of_guests_said_again_later_is_what_the_question_gets(globex, fake_ollama):
    # given a party's guests counted once and, later in the conversation, counted again with no word of change
    _session(
        globex, fake_ollama, "guests-en",
        [("Hello, I'm organising my mum's 60th and want catering for about 45 guests.",
          "Lovely! A buffet for a family party is one of our favourites."),
         ("Do you bring plates and cutlery?", "Yes, all crockery and cutlery is included."),
         ("What staff do you send?", "For 52 guests we'll send 3 staff: a chef and two servers.")],
    )  # fmt: skip
    between = _said_at(globex, "about 45 guests")
    # when the customer asks how many guests the catering is for
    results = _recall(globex, "guests-en", "How many guests is the catering for?")
    # then the later number answers, and the first is not among the first five
    assert any("52 guests" in c for c in _current(results)), results
    assert not any("45 guests" in c for c in _contents(results)), results
    # and as of a moment between the two, the first number was the answer
    then = _recall(globex, "guests-en", "How many guests is the catering for?", between)
    assert any("45 guests" in c for c in _current(then)), then
    # and the next prompt carries the later number as current
    prompt = _as_current(_next_prompt(globex, fake_ollama, "guests-en", "How many guests is the catering for?"))
    assert "52 guests" in prompt, prompt
    assert "45 guests" not in prompt, prompt


def test_a_delivery_time_said_again_later_is_what_the_question_gets(acme, fake_ollama):
    _session(
        acme, fake_ollama, "slot-zh",
        [("沙发什么时候送？", "已经发货了，预计本周六送到，时间段上午9点到12点。"),
         ("能不能帮忙搬上楼？", "可以的，师傅会帮您搬到家里。"),
         ("周六我们不在家", "没问题，本周日下午2点到6点送货，届时请保持电话畅通。")],
    )  # fmt: skip
    between = _said_at(acme, "上午9点到12点")
    results = _recall(acme, "slot-zh", "送货最后约的是哪天什么时间段？")
    _assert_current_first(results, "下午2点到6点", "上午9点到12点")
    assert not any("上午9点到12点" in c for c in _contents(results)), results
    then = _recall(acme, "slot-zh", "送货约的是哪天什么时间段？", between)
    assert any("上午9点到12点" in c for c in _current(then)), then
    prompt = _as_current(_next_prompt(acme, fake_ollama, "slot-zh", "送货是什么时间？"))
    assert "下午2点到6点" in prompt, prompt
    assert "上午9点到12点" not in prompt, prompt


def test_how_long_asks_for_a_duration_in_months(globex, fake_ollama):
    # the customer's check gives 3 months, the agent's answer 6: "how long" asks for a duration in months too
    _session(
        globex, fake_ollama, "months-en",
        [("Hi, my 10-class pack lasts 3 months, right? I want to use it in time.",
          "Actually, our 10-class packs are valid for 6 months from purchase.")],
    )  # fmt: skip
    _session(globex, fake_ollama, "months-en", [("Thanks, see you Tuesday.", "See you then!")])
    results = _recall(globex, "months-en", "How long have I got to use up my class pack?")
    assert any("6 months" in c for c in _current(results)), results
    assert not any("3 months" in c for c in _current(results)), results


def test_how_long_asks_for_a_duration_in_months_in_chinese(acme, fake_ollama):
    _session(
        acme, fake_ollama, "months-zh",
        [("我的次卡是3个月内用完对吧？", "不是的，次卡的使用期限是6个月，从购买之日算起。")],
    )  # fmt: skip
    _session(acme, fake_ollama, "months-zh", [("好的，谢谢。", "不客气！")])
    results = _recall(acme, "months-zh", "我的次卡能用几个月？")
    assert any("6个月" in c for c in _current(results)), results
    assert not any("3个月" in c for c in _current(results)), results


def test_a_time_wanted_in_another_conversation_is_another_matters(globex, fake_ollama):
    # a train's departures after 13:00 in one conversation, a taxi to leave after 17:00 in another, neither
    # naming what it is for: the later time does not answer anew for the first
    _session(
        globex, fake_ollama, "times-en",
        [("I'd like to leave after 13:00 for 5 people.", "There are several departures after 13:00."),
         ("The earliest one, please.", "Booked, reference TR2512.")],
    )  # fmt: skip
    _session(
        globex, fake_ollama, "times-en",
        [("Hello again, something else today.", "Of course, how can I help?"),
         ("I need to make sure I leave after 17:00.", "Noted, a car will be there at 17:00.")],
    )  # fmt: skip
    results = _recall(globex, "times-en", "What time did I want to leave?", k=10)
    assert any("several departures after 13:00" in c for c in _current(results)), results


def test_two_events_times_labelled_by_different_words_are_two_facts(globex, fake_ollama):
    # a table booked for 13:15, then a train leaving at 9:17 in the same conversation: a time each, two events
    _session(
        globex, fake_ollama, "events-en",
        [("Can you try to book the table for 13:15?", "Done, your table is booked, reference LPYDMTDI."),
         ("I also need a train to London tomorrow morning.", "Certainly, where from?"),
         ("From Cambridge, please.", "The closest I found is TR3899 leaving at 9:17, would that work?")],
    )  # fmt: skip
    results = _recall(globex, "events-en", "What time is my table booked for?", k=10)
    assert any("table for 13:15" in c for c in _current(results)), results


def test_a_range_wanted_for_one_matter_is_not_answered_by_anothers(acme, fake_ollama):
    # a hotel's price range and, later, an attraction's ticket range: two amounts of one kind, two matters
    _session(
        acme, fake_ollama, "ranges-zh",
        [("晚上我需要找一个酒店入住，帮我推荐一个价格在400-500元之间的酒店。", "推荐您如家精选酒店，评分4.6分。"),
         ("再帮我推荐一个票价在100-150元之间的景点吧。", "推荐您去颐和园，评分4.7分。")],
    )  # fmt: skip
    results = _recall(acme, "ranges-zh", "我要找的酒店价格是多少？")
    assert any("400-500元" in c for c in _current(results)), results


def test_a_range_wanted_is_not_replaced_by_the_price_of_what_answers_it(acme, fake_ollama):
    # what the customer wants (a price range) is answered, a turn later, by what a hotel costs: not replaced
    _session(
        acme, fake_ollama, "budget-zh",
        [("帮我推荐一个最低价格700-800元的经济型酒店。", "好的，正在为您查询。"),
         ("查到了吗？", "帮您查到一个价格775元的经济型酒店，名字是飘HOME连锁酒店。")],
    )  # fmt: skip
    results = _recall(acme, "budget-zh", "我要找的酒店价格是多少？")
    assert any("700-800元" in c for c in _current(results)), results


def test_a_plan_changed_from_one_speed_to_another_in_a_later_conversation(acme, fake_ollama):
    # the speed is chosen with the address in one conversation and, days later in another, the agent changes it
    # "from 300M to 500M": the later statement names the old value and a new one, which links the two across
    # conversations
    _session(
        acme, fake_ollama, "speed-zh",
        [("我刚搬家，想办理新装宽带。", "欢迎！请问安装地址是哪里？想要什么套餐？"),
         ("地址是桂林路18弄3号1102室，套餐先要300M的吧。",
          "好的，跟您确认：安装地址桂林路18弄3号1102室，套餐300M极速版，月费99元，对吗？"),
         ("门牌错了，是1201室。", "抱歉，已更正为桂林路18弄3号1201室，300M套餐月费99元不变。")],
    )  # fmt: skip
    between = _said_at(acme, "300M")
    _session(
        acme, fake_ollama, "speed-zh",
        [("你好，安装约在周六对吧？", "是的，周六上午9点到12点，师傅会提前电话联系。"),
         ("路由器需要自己买吗？", "不用，安装时师傅会带一台千兆路由器，免费使用。"),
         ("我想了想还是升级到500M吧，家里两个人打游戏。",
          "没问题，已将套餐由300M改为500M畅享版，月费129元，安装时一并开通。"),
         ("光猫放在哪里比较好？", "建议放在客厅弱电箱附近，信号覆盖更均匀。")],
    )  # fmt: skip
    results = _recall(acme, "speed-zh", "我现在办的宽带是多少兆的？")
    _assert_current_first(results, "500M", "300M极速版")
    # and what said 300M alone is not among the first five
    assert not any("300M" in c and "500M" not in c for c in _contents(results)), results
    then = _recall(acme, "speed-zh", "我办的宽带是多少兆的？", between)
    assert any("300M" in c for c in _current(then)), then
    prompt = _as_current(_next_prompt(acme, fake_ollama, "speed-zh", "我的宽带是多少兆？"))
    assert "500M" in prompt, prompt
    assert "300M极速版" not in prompt, prompt


def test_a_count_changed_from_one_number_to_another_in_a_later_conversation(globex, fake_ollama):
    # two tickets booked with their day and price in one conversation; weeks later, in another, the agent moves
    # the order "from 2 tickets to 3": the old number said again beside the new one links the two, with no
    # identifier in common
    _session(
        globex, fake_ollama, "tickets-en",
        [("Hi, I'd like tickets for the Friday show.", "Of course. How many, and where would you like to sit?"),
         ("Two tickets in the Circle, please.",
          "Booked: 2 tickets for Friday in the Circle, £97 in all, order BT-4410."),
         ("Are they e-tickets?", "Yes, mobile e-tickets, released 48 hours before the show.")],
    )  # fmt: skip
    between = _said_at(globex, "Two tickets")
    _session(
        globex, fake_ollama, "tickets-en",
        [("My sister wants to come along too.", "Good news, the seat next to yours is free."),
         ("Great, add her.", "Done, I've changed your order from 2 tickets to 3 tickets, £145.50 in all."),
         ("What time do doors open?", "Doors open at 6:30pm and the show starts at 7:30pm."),
         ("Is there a cloakroom?", "Yes, on the ground floor, £2 per item.")],
    )  # fmt: skip
    results = _recall(globex, "tickets-en", "How many tickets are on my order?")
    assert any("to 3 tickets" in c for c in _current(results)), results
    assert not any("Two tickets" in c or "Booked: 2 tickets" in c for c in _contents(results)), results
    then = _recall(globex, "tickets-en", "How many tickets are on my order?", between)
    assert any("2 tickets" in c or "Two tickets" in c for c in _current(then)), then
    prompt = _as_current(_next_prompt(globex, fake_ollama, "tickets-en", "How many tickets do I have?"))
    assert "to 3 tickets" in prompt, prompt
    assert "Booked: 2 tickets" not in prompt, prompt


def test_a_price_list_naming_a_count_again_replaces_no_booking(globex, fake_ollama):
    # a table for 4 in one conversation; in another, what a table for 4 and one for 6 cost: the old count and
    # another, but paired with two prices, a list, which changes no booking
    _session(
        globex, fake_ollama, "list-en",
        [("I need a table for 4 people on Friday.", "Done, a table for 4 people on Friday at 19:00.")],
    )  # fmt: skip
    _session(
        globex, fake_ollama, "list-en",
        [("Do you do a set menu for tables?",
          "Yes: the set menu for a table for 4 people is £120, and for a table for 6 people £170.")],
    )  # fmt: skip
    results = _recall(globex, "list-en", "For how many people is my table?", k=10)
    assert any("table for 4 people on Friday" in c for c in _current(results)), results


# --- a later change of something else --------------------------------------------------------------------------


def _assert_left_current(ctx: TenantCtx, fake: Any, settings: Any, end_user: str, question: str, needle: str) -> None:
    """Recall for ``question`` serves ``needle`` as current, and the next prompt does not call it out of date; with
    every overtaken unit marked (``overtaken_mark_similarity`` 0 and ``alike_needs_change`` off, the old behaviour)
    it would be marked (and kept in place, ``marked_last`` off, to be seen)."""
    held = [r for r in _recall(ctx, end_user, question) if needle in r["memory"]["content"]]
    assert held, needle
    assert all(r["current"] for r in held), held
    assert needle in _as_current(_next_prompt(ctx, fake, end_user, question))
    settings.MEMDESK_RECALL = {"overtaken_mark_similarity": 0.0, "alike_needs_change": False, "marked_last": False}
    marked = [r for r in _recall(ctx, end_user, question) if needle in r["memory"]["content"]]
    assert marked, needle
    assert not all(r["current"] for r in marked), marked


def test_a_corrected_phone_number_leaves_the_locked_reservation_current(acme, fake_ollama, settings):
    """A correction of the phone number said after a reservation was locked overtakes it in the ranking only: the
    reservation number is still what is true now, in the API and in the prompt. With every overtaken unit marked
    (``overtaken_mark_similarity`` 0) the prompt would tell the model the reservation is no longer current."""
    _session(
        acme, fake_ollama, "driving-school",
        [("我想报C1周末班，定金现在交", "收到500元定金，保留号TQ-5120已锁定，您的报名已正式生效。"),
         ("体检去哪家医院？", "指定的是市第三人民医院体检中心，带身份证和两张一寸照片。"),
         ("我上次留的手机号打错了一位，应该是139 0000 7215，不是7251。",
          "已帮您把手机号更正为139 0000 7215，之后的考试通知都会发到这个号码。")],
    )  # fmt: skip
    # the phone number itself did change: the wrong one is not current
    assert not any(
        "7251" in c and "7215" not in c for c in _current(_recall(acme, "driving-school", "我的手机号是多少？"))
    )
    _assert_left_current(acme, fake_ollama, settings, "driving-school", "我报名锁定的保留号是多少？", "TQ-5120")


def test_a_changed_billing_address_leaves_the_way_of_paying_current_in_english(globex, fake_ollama, settings):
    """The English counterpart: a billing address changed after the customer chose to pay monthly by direct debit
    leaves that choice current."""
    _session(
        globex, fake_ollama, "water-account",
        [("Monthly please, by direct debit.",
          "Noted: you pay monthly by direct debit, and bills go to sam.k@example.com."),
         ("When is the first payment?", "The first collection is on the 1st of next month."),
         ("I've moved, can you change my billing address?",
          "Of course. I've changed your billing address to 14 Mill Lane, Leeds LS2 7EW.")],
    )  # fmt: skip
    _assert_left_current(
        globex, fake_ollama, settings, "water-account", "How did I say I'd like to pay?", "direct debit"
    )


# --- what the form of a later statement says it changed -----------------------------------------------------------


def _marked_only_with_form(ctx: TenantCtx, settings: Any, end_user: str, question: str, needle: str) -> None:
    """Recall for ``question`` does not serve ``needle`` as current; without reading what the later statement's form
    says it changed (``overtaken_in_form`` off) it would."""
    results = _recall(ctx, end_user, question)
    assert any(needle in c for c in _contents(results)), results
    assert not any(needle in c for c in _current(results)), results
    settings.MEMDESK_RECALL = {"overtaken_in_form": False}
    assert any(needle in c for c in _current(_recall(ctx, end_user, question)))
    settings.MEMDESK_RECALL = {}


def test_a_respelt_meter_reading_is_no_longer_current_but_the_account_number_beside_it_is(
    globex, fake_ollama, settings
):
    """The agent corrects a reading the customer read with two digits swapped: the statement that recorded the
    first reading is out of date for the reading, and still the answer for the account number it also gave."""
    _session(
        globex, fake_ollama, "meter-en",
        [("Hi, I've just moved in and need a water account. The meter reads 00418.",
          "I've recorded an opening meter reading of 00418 for Flat 2, 9 Elm Street. Your new account number is "
          "WA-330871."),
         ("Sorry, I looked again with a torch, it's 00481, I swapped the last two digits.",
          "Thanks for checking. I've corrected the opening reading to 00481.")],
    )  # fmt: skip
    _marked_only_with_form(
        globex, settings, "meter-en", "What opening meter reading did you take for my flat?", "reading of 00418"
    )
    assert any("WA-330871" in c for c in _current(_recall(globex, "meter-en", "What's my water account number?")))
    # what is out of date follows everything current; with ``marked_last`` off it sits in place, just below its
    # correction, above the customer's own "it's 00481"
    question = "What opening meter reading did you take for my flat?"
    marks = [r["current"] for r in _recall(globex, "meter-en", question, k=10)]
    assert False in marks, marks
    assert marks == sorted(marks, reverse=True), marks
    settings.MEMDESK_RECALL = {"marked_last": False}
    in_place = [r["current"] for r in _recall(globex, "meter-en", question, k=10)]
    assert in_place != sorted(in_place, reverse=True), in_place
    settings.MEMDESK_RECALL = {}
    prompt = _as_current(_next_prompt(globex, fake_ollama, "meter-en", "What opening reading do you have?"))
    assert "reading of 00418" not in prompt, prompt


def test_a_state_awaiting_an_act_is_no_longer_current_once_the_act_is_done(acme, fake_ollama, settings):
    """「待交管所受理」, and a week later 「交管所已经受理」: for where the application stands, the earlier state is out
    of date, though the two share no words but the act's."""
    _session(
        acme, fake_ollama, "licence-zh",
        [("我的驾照报名办到哪一步了？",
          "我查了一下，您的报名状态现在是“体检已审核，待交管所受理”，一般要3到5个工作日。")],
    )  # fmt: skip
    _session(
        acme, fake_ollama, "licence-zh",
        [("有新进展吗？", "交管所已经受理，您的科目一考试已预约成功，时间是下周三上午9点，在车管所考场。")],
    )  # fmt: skip
    _marked_only_with_form(acme, settings, "licence-zh", "我这个驾照报名现在办到哪了？", "待交管所受理")
    prompt = _as_current(_next_prompt(acme, fake_ollama, "licence-zh", "我的驾照报名现在办到哪了？"))
    assert "待交管所受理" not in prompt, prompt


def _current_but_marked_without(
    ctx: TenantCtx, settings: Any, end_user: str, question: str, needle: str, knob: str, k: int = 5
) -> None:
    """Recall for ``question`` serves ``needle`` as current; with ``knob`` off it would be marked out of date."""
    held = [r for r in _recall(ctx, end_user, question, k=k) if needle in r["memory"]["content"]]
    assert held, needle
    assert all(r["current"] for r in held), held
    settings.MEMDESK_RECALL = {knob: False}
    marked = [r for r in _recall(ctx, end_user, question, k=k) if needle in r["memory"]["content"]]
    assert marked, needle
    assert not all(r["current"] for r in marked), marked
    settings.MEMDESK_RECALL = {}


def test_the_customers_request_stays_current_beside_the_agents_confirmation_of_it(globex, fake_ollama, settings):
    """The customer gives a new number and the agent confirms it "instead of" the old one: both say what is true now;
    reading their likeness as a change (``restated_current`` off) called the customer's words out of date."""
    _session(
        globex, fake_ollama, "newphone-en",
        [("Morning, is my bike ready?", "Not yet, the part arrives tomorrow."),
         ("Also I've got a new phone, the number's now 07700 900671. Use that for texts from now on.",
          "Let me update that for you."),
         ("Thanks.", "Updated. Texts will go to 07700 900671 instead of 07700 900233.")],
    )  # fmt: skip
    _current_but_marked_without(
        globex, settings, "newphone-en", "Which mobile number are you texting me on?", "the number's now",
        "restated_current",
    )  # fmt: skip


def test_the_customers_request_stays_current_beside_the_agents_confirmation_in_chinese(acme, fake_ollama, settings):
    """「要燕麦色的，不要灰色」, then the agent's 「由灰色改为燕麦色」: the customer's words name both values of the
    change they asked for, and stay current beside its confirmation."""
    _session(
        acme, fake_ollama, "sofa-zh",
        [("沙发颜色我下单时点错了，要燕麦色的，不要灰色。", "好的，我帮您看一下订单。"),
         ("麻烦快点。", "已帮您把沙发颜色由灰色改为燕麦色，价格不变，仍为4299元。")],
    )  # fmt: skip
    question = "我订的沙发最后是什么颜色？"
    _current_but_marked_without(acme, settings, "sofa-zh", question, "要燕麦色的", "restated_current")


def test_a_changed_phone_leaves_the_work_order_number_beside_it_current(acme, fake_ollama, settings):
    """A repair booking gave the phone number the customer later changed: for the phone it is out of date, for the
    work order number it gave in another clause it is still the answer."""
    _session(
        acme, fake_ollama, "repair-zh",
        [("洗衣机不排水了，帮我约个维修。",
          "已为您预约维修：朝阳区望京西园三区312楼6单元1102，联系电话 138 1055 6273，上门时间为后天上午9:00-12:00，"
          "工单号 WX24061988。")],
    )  # fmt: skip
    _session(
        acme, fake_ollama, "repair-zh",
        [("我换手机号了，新号码是139 1133 2854。", "好的，我来更新。"),
         ("谢谢。", "已将您的联系电话更新为 139 1133 2854，原号码 138 1055 6273 已停用，师傅明天上午9:00-12:00上门前"
                    "会打新号码，工单号不变。")],
    )  # fmt: skip
    booking = "工单号 WX24061988"
    phone = [r for r in _recall(acme, "repair-zh", "我的联系电话是多少？") if booking in r["memory"]["content"]]
    assert not any(r["current"] for r in phone), phone
    _current_but_marked_without(acme, settings, "repair-zh", "我那个维修工单号是多少？", booking, "mark_asked_part")


def _marked_only_with(ctx: TenantCtx, settings: Any, end_user: str, question: str, needle: str, knob: str) -> None:
    """With ``knob`` on, recall for ``question`` finds ``needle`` and does not serve it as current; with it off (the
    default of ``answered_otherwise``) it does."""
    settings.MEMDESK_RECALL = {knob: True}
    results = _recall(ctx, end_user, question, k=10)
    assert any(needle in c for c in _contents(results)), results
    assert not any(needle in c for c in _current(results)), results
    settings.MEMDESK_RECALL = {knob: False}
    assert any(needle in c for c in _current(_recall(ctx, end_user, question, k=10)))
    settings.MEMDESK_RECALL = {}


def test_a_price_the_customer_checks_is_no_longer_current_when_the_reply_gives_another(acme, fake_ollama, settings):
    """「年卡续费还是1980吧？」 answered 「现在是2180元」 in the same turn: the customer's question carried the old
    price; message and reply share a moment, so only the reply's words show it no longer holds."""
    _session(
        acme, fake_ollama, "renew-zh",
        [("你好，我的年卡下个月到期。", "好的，到期前我们会短信提醒您。"),
         ("年卡续费还是1980吧？我准备续了。", "年卡这个月起调整为2180元，老会员续费可以打九折。")],
    )  # fmt: skip
    _marked_only_with(acme, settings, "renew-zh", "年卡续费现在要多少钱？", "还是1980", "answered_otherwise")
    assert any("2180" in c for c in _current(_recall(acme, "renew-zh", "年卡续费现在要多少钱？")))


def test_a_time_the_customer_checks_is_no_longer_current_when_the_reply_gives_another(globex, fake_ollama, settings):
    """ "Checkout's at 11, right?" answered "checkout is 10:30am": the question's time is not what holds."""
    _session(
        globex, fake_ollama, "checkout-en",
        [("Hi, I'm in room 214 till Sunday.", "Welcome! Let us know if you need anything."),
         ("Checkout's at 11, right? I'd like a lie-in.", "On Sundays checkout is 10:30am, I'm afraid.")],
    )  # fmt: skip
    _marked_only_with(
        globex, settings, "checkout-en", "What time is checkout?", "Checkout's at 11", "answered_otherwise"
    )


def test_a_locker_the_reply_says_is_wrong_is_no_longer_current(globex, fake_ollama, settings):
    """The customer names locker A3; the agent's reply in the same turn says it is B7, not A3."""
    _session(
        globex, fake_ollama, "locker-en",
        [("My parcel is in locker A3 I think, but I can't find it there.",
          "Sorry for the confusion: it's in locker B7, not A3. Same collection code.")],
    )  # fmt: skip
    _marked_only_with(globex, settings, "locker-en", "Which locker is my parcel in?", "locker A3", "answered_otherwise")


def test_a_value_the_customer_checks_and_the_reply_confirms_stays_current(globex, fake_ollama, settings):
    """ "Is the table still for 4 people?", "Yes, 4 people at 7pm": the reply keeps the question's value."""
    settings.MEMDESK_RECALL = {"answered_otherwise": True}
    _session(
        globex, fake_ollama, "table-en",
        [("Is the table still for 4 people?", "Yes, 4 people at 7pm on Friday, table by the window.")],
    )  # fmt: skip
    held = [
        r
        for r in _recall(globex, "table-en", "How many people is the table for?")
        if "4 people" in r["memory"]["content"]
    ]
    assert held
    assert all(r["current"] for r in held), held


def test_the_same_answer_about_two_venues_changes_neither(acme, fake_ollama):
    # 「人均消费是23元」 and, another day, 「人均消费是131元」 read alike, but each answers a question about the
    # restaurant the agent had just named: two venues' prices, both true
    _session(
        acme, fake_ollama, "two-venues-zh",
        [("帮我推荐一家能吃驴肉火烧的餐馆。", "王胖子驴肉火烧（鼓楼店）这家餐馆有您要吃的菜。"),
         ("请问这家餐馆的人均消费是多少钱？", "人均消费是23元。")],
    )  # fmt: skip
    _session(
        acme, fake_ollama, "two-venues-zh",
        [("帮我推荐一家能吃烤鱼的餐馆。", "推荐您去庆云楼(什刹海店)用餐。"),
         ("这家餐馆的人均消费是多少钱啊？", "人均消费是131元。")],
    )  # fmt: skip
    _unchanged(acme, "人均消费是23元")
    results = _recall(acme, "two-venues-zh", "王胖子驴肉火烧的人均消费是多少？", k=10)
    assert any("23元" in c for c in _current(results)), results


def test_what_the_customer_wants_does_not_change_what_a_venue_costs(acme, fake_ollama):
    # the agent's 「人均消费140元」 is what the restaurant costs; the customer's later 「人均消费是50-100元」 is what
    # they want on another day: it changes no price
    _session(
        acme, fake_ollama, "wants-zh",
        [("有能吃虾滑的餐馆吗？", "推荐您去捞王锅物料理，人均消费140元，有手工虾滑。")],
    )  # fmt: skip
    _session(
        acme, fake_ollama, "wants-zh",
        [("可以帮我找一个人均消费是50-100元，能吃到冰激凌的餐馆吗？", "推荐您去DQ冰雪皇后。")],
    )  # fmt: skip
    _unchanged(acme, "人均消费140元")


# --- newer and alike, changing nothing ---------------------------------------------------------------------------


def test_promising_to_keep_someone_updated_changes_nothing(globex, fake_ollama):
    """ "I'll keep you updated" promises news; it changes nothing said before. Read as a change ("updated"), it took
    the audition it followed out of date: the answer to "when was my audition" was served as no longer current."""
    _session(
        globex, fake_ollama, "audition-en",
        [("Hey! I had an audition yesterday for a writing gig.", "Congrats! How did the audition go?"),
         ("It went alright, mixed emotions about the writing gig audition. I'll keep you updated.",
          "Fingers crossed for you!")],
    )  # fmt: skip
    question = "When did I have the audition for the writing gig?"
    held = [r for r in _recall(globex, "audition-en", question) if "audition yesterday" in r["memory"]["content"]]
    assert held
    assert all(r["current"] for r in held), held
    assert "audition yesterday" in _as_current(_next_prompt(globex, fake_ollama, "audition-en", question))


def test_a_newer_remark_alike_but_changing_nothing_leaves_the_older_current(globex, fake_ollama, settings):
    """A question about the present lets any newer alike unit overtake an older one, but being alike and newer
    shows no change: "That painting's amazing, the colours are so bold!" after "Our latest work is a sunset
    painting" leaves the sunset painting current. Marked by likeness alone (``alike_needs_change`` off), it
    would be no longer current."""
    _session(
        globex, fake_ollama, "paint-en",
        [("We love painting together, my kids and I. Our latest work is a sunset painting by the lake.",
          "That sounds lovely!")],
    )  # fmt: skip
    _session(
        globex, fake_ollama, "paint-en",
        [("Thanks! The kids loved painting together, the sunset painting colours are so bold!",
          "Painting together is great bonding.")],
    )  # fmt: skip
    _current_but_marked_without(
        globex, settings, "paint-en", "What is our latest painting project?", "sunset painting by the lake",
        "alike_needs_change", k=10,
    )  # fmt: skip


def test_a_change_word_that_changes_no_value_leaves_the_older_current(globex, fake_ollama, settings):
    """ "It changed the game for me" says "changed" and changes no value: the older, alike statement stays what is
    true. Without ``update_needs_value`` the change word alone marked it no longer current."""
    _session(
        globex, fake_ollama, "training-en",
        [("I do strength training for my basketball, it builds muscle and power.", "That's a great habit!")],
    )  # fmt: skip
    _session(
        globex, fake_ollama, "training-en",
        [("Strength training really changed the game for my basketball, it builds so much power.",
          "Love to hear it!")],
    )  # fmt: skip
    _current_but_marked_without(
        globex, settings, "training-en", "What do I do to supplement my basketball training?",
        "builds muscle and power", "update_needs_value", k=10,
    )  # fmt: skip


def test_the_agents_echo_of_a_replaced_email_is_no_longer_current(acme, fake_ollama, settings):
    """The customer gives a work e-mail and the agent says results will go there; the next day the customer makes a
    home e-mail the default. The agent's echo keys nothing, but it says the e-mail the customer's keyed fact no
    longer holds: for 「现在用哪个邮箱」 it is out of date (``echoed_stale``). A colleague's e-mail said beside it was
    never the customer's, and stays current."""
    _session(
        acme, fake_ollama, "echo-zh",
        [("我先问问同事，有结果发我邮箱hejing.work@example.com。",
          "好的，查询结果会发到hejing.work@example.com。提醒一下，报价2小时后失效，到时需要重新查询。"),
         ("同事罗敏的行程单也要发，她邮箱luomin@example.com。", "好的，罗敏女士的行程单会发到luomin@example.com。")],
    )  # fmt: skip
    _session(
        acme, fake_ollama, "echo-zh",
        [("以后通知别发我工作邮箱了，默认改成hejing.home@example.com吧。", "好的，已更新。"),
         ("改签后的行程单什么时候能收到？", "已经发出了，请查收。")],
    )  # fmt: skip
    question = "你们现在给我发通知用的是哪个邮箱？"
    needle = "查询结果会发到hejing.work"
    echo = [r for r in _recall(acme, "echo-zh", question, k=10) if needle in r["memory"]["content"]]
    assert echo
    assert not any(r["current"] for r in echo), echo
    settings.MEMDESK_RECALL = {"echoed_stale": False}
    echo = [r for r in _recall(acme, "echo-zh", question, k=10) if needle in r["memory"]["content"]]
    assert echo
    assert all(r["current"] for r in echo), echo
    settings.MEMDESK_RECALL = {}
    colleague = _recall(acme, "echo-zh", "罗敏的邮箱是哪个？", k=10)
    assert any("luomin@example.com" in c for c in _current(colleague)), colleague


def test_a_confirmation_naming_the_old_email_beside_the_new_stays_current(globex, fake_ollama):
    """ "Bills will now go to jade.morrow@… instead of jade.m@…" says the old e-mail but also the current one: it is the
    change, and current. The earlier echo that says only the old one is not."""
    _session(
        globex, fake_ollama, "bills-en",
        [("Hi, my email is jade.m@example.com.", "Thanks, your bills will go to jade.m@example.com.")],
    )  # fmt: skip
    _session(
        globex, fake_ollama, "bills-en",
        [("Can bills go to my work email instead? jade.morrow@example.com.",
          "Done. Bills and statements will now go to jade.morrow@example.com instead of jade.m@example.com.")],
    )  # fmt: skip
    results = _recall(globex, "bills-en", "Which email address do my bills go to?", k=10)
    assert any("will now go to jade.morrow@example.com" in c for c in _current(results)), results
    echo = [r for r in results if "bills will go to jade.m@" in r["memory"]["content"]]
    assert echo, [(r["memory"]["content"], r["current"]) for r in results]
    assert not any(r["current"] for r in echo), echo
