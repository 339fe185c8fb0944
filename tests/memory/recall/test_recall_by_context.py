"""A fact is recalled by what it was about: the clerk's "Reference number is I4012ZAZ" never names the train, the
turns before it do, and a customer who comes back asks by the route and the day (docs/memory.md, "Found by what
it was about").

Every turn goes through ``POST /api/v1/sessions/<id>/messages`` (``chat.turn.run.run_turn``) with the fake Ollama
answering as the clerk; the questions are asked from a new session of the same end user.
"""

from __future__ import annotations

from typing import Any

import pytest

from testkit.fake_ollama import Reply
from tests.factories import TenantCtx, open_session

pytestmark = pytest.mark.django_db(transaction=True)


def _session(ctx: TenantCtx, fake: Any, end_user: str, turns: list[tuple[str, str]]) -> None:
    """One chat session of ``end_user``: each (customer, clerk) pair is a turn."""
    sid = open_session(ctx, end_user)["session_id"]
    for user, clerk in turns:
        fake.script(Reply(text=clerk))
        response = ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": user}, format="json")
        assert response.status_code == 200, response.content


def _recalled(ctx: TenantCtx, end_user: str, query: str) -> list[str]:
    """The contents recalled for ``query`` from a new session of ``end_user``, best first."""
    sid = open_session(ctx, end_user)["session_id"]
    response = ctx.client.post(
        "/api/v1/memories/recall", {"query": query, "k": 5}, format="json", HTTP_X_SESSION_ID=sid
    )
    assert response.status_code == 200, response.content
    return [r["memory"]["content"] for r in response.json()["results"]]


def _rank(contents: list[str], needle: str) -> int:
    """The place of the first content naming ``needle`` (len(contents) when none does)."""
    return next((i for i, c in enumerate(contents) if needle.casefold() in c.casefold()), len(contents))


EN_TRAINS = [
    ("I need a train from Cambridge to Kings Lynn on Friday.", "TR9226 leaves at 09:11 and arrives at 09:58."),
    (
        "Sounds good. Please book it for two people.",
        "Booking was successful, the total fee is 17.6 GBP. Reference number is I4012ZAZ.",
    ),
]
EN_OTHER_TRAIN = [
    ("I am looking for a train from Ely to Norwich on Monday.", "That would be train TR5167. It arrives at 17:58."),
    ("Book one seat please.", "Booking was successful, the total fee is 9.8 GBP. Reference number is K7PQ2WNE."),
]
EN_TAXIS = [
    ("I need a taxi from Bridge Guest House to the Lucky Star.", "What time would you like to leave?"),
    ("At 18:15 please.", "Booked! A grey Volvo will pick you up. The contact number is 07700900123."),
]
EN_OTHER_TAXI = [
    ("Can you get me a taxi from the Junction to Kettle's Yard?", "When would you like to be picked up?"),
    ("By 10:30.", "Booked! A black Toyota will pick you up. The contact number is 07700900456."),
]


def test_a_booking_reference_is_recalled_by_its_route_and_day(globex, fake_ollama):
    # given two train bookings in two sessions, each reference said where neither route nor day is
    _session(globex, fake_ollama, "tourist", EN_TRAINS)
    _session(globex, fake_ollama, "tourist", EN_OTHER_TRAIN)
    # when the customer comes back and asks by the route and the day
    recalled = _recalled(
        globex, "tourist", "What is the booking reference for the train from Cambridge to Kings Lynn on Friday?"
    )
    # then the reference of that train comes first of the two
    assert _rank(recalled, "I4012ZAZ") < _rank(recalled, "K7PQ2WNE")
    assert _rank(recalled, "I4012ZAZ") < 3


def test_a_taxis_car_is_recalled_by_its_pick_up_and_destination(globex, fake_ollama):
    # given two taxis booked in one session, each car named in a reply that names neither place
    _session(globex, fake_ollama, "tourist", EN_TAXIS + EN_OTHER_TAXI)
    # when the customer asks for the car of one of them from a later session
    recalled = _recalled(globex, "tourist", "What car is the taxi from Bridge Guest House to the Lucky Star?")
    # then its car comes before the other's
    assert _rank(recalled, "grey Volvo") < _rank(recalled, "black Toyota")
    assert _rank(recalled, "grey Volvo") < 3


def test_two_bookings_of_the_same_kind_on_different_days_are_told_apart(globex, fake_ollama):
    # given the same route booked for Tuesday and for Thursday, in two sessions
    for day, ref in (("Tuesday", "TUE4K2Q9"), ("Thursday", "THU8M3X1")):
        _session(globex, fake_ollama, "tourist", [
            (f"I need a train from Cambridge to London Kings Cross on {day}.", "TR2000 leaves at 07:00."),
            ("That works, book it for one.", f"Booking was successful. Reference number is {ref}."),
        ])  # fmt: skip
    # when the customer asks for each day's reference
    thursday = _recalled(globex, "tourist", "booking reference for the train to London Kings Cross on Thursday")
    tuesday = _recalled(globex, "tourist", "booking reference for the train to London Kings Cross on Tuesday")
    # then each day's reference comes before the other's
    assert _rank(thursday, "THU8M3X1") < _rank(thursday, "TUE4K2Q9")
    assert _rank(tuesday, "TUE4K2Q9") < _rank(tuesday, "THU8M3X1")


ZH_TRAINS = [
    ("我要订周五从北京到天津的火车票。", "有G123次，上午九点发车，十点到达。"),
    ("可以，帮我订两张。", "预订成功，总价109元，预订编号是TK8812345。"),
]
ZH_OTHER_TRAIN = [
    ("我想订周一从上海到杭州的火车。", "有G7511次，下午两点发车。"),
    ("订一张吧。", "预订成功，总价73元，预订编号是TK5523456。"),
]
ZH_TAXIS = [
    ("帮我叫一辆出租车，从天伦王朝酒店到京仪大酒店。", "好的，请问几点出发？"),
    ("下午三点。", "已为您叫好车，是一辆白色丰田凯美瑞。"),
    ("再帮我叫一辆从故宫到王府井的出租车。", "请问几点出发？"),
    ("晚上七点。", "已为您叫好车，是一辆黑色大众帕萨特。"),
]


def test_a_chinese_booking_reference_is_recalled_by_its_route_and_day(acme, fake_ollama):
    # given two train bookings, each booking number said where neither route nor day is
    _session(acme, fake_ollama, "wang", ZH_TRAINS)
    _session(acme, fake_ollama, "wang", ZH_OTHER_TRAIN)
    # when the customer comes back and asks by the route and the day
    recalled = _recalled(acme, "wang", "周五北京到天津的火车票预订编号是多少？")
    # then that train's booking number comes first of the two
    assert _rank(recalled, "TK8812345") < _rank(recalled, "TK5523456")
    assert _rank(recalled, "TK8812345") < 3


def test_a_chinese_taxis_car_is_recalled_by_its_pick_up_and_destination(acme, fake_ollama):
    # given two taxis called in one session, each car named in a reply that names neither place
    _session(acme, fake_ollama, "wang", ZH_TAXIS)
    # when the customer asks for the car of the first from a later session
    recalled = _recalled(acme, "wang", "从天伦王朝酒店到京仪大酒店的出租车是什么车？")
    # then its car comes before the other's
    assert _rank(recalled, "丰田") < _rank(recalled, "帕萨特")
    assert _rank(recalled, "丰田") < 3


def test_two_chinese_bookings_of_the_same_kind_on_different_days_are_told_apart(acme, fake_ollama):
    # given the same route booked for Tuesday and for Thursday, in two sessions
    for day, ref in (("周二", "TK2200001"), ("周四", "TK4400002")):
        _session(acme, fake_ollama, "wang", [
            (f"我要订{day}从北京到上海的高铁。", "有G1次，早上七点发车。"),
            ("好的，订一张。", f"预订成功，预订编号是{ref}。"),
        ])  # fmt: skip
    # when the customer asks for each day's booking number
    thursday = _recalled(acme, "wang", "周四去上海的高铁预订编号是多少？")
    tuesday = _recalled(acme, "wang", "周二去上海的高铁预订编号是多少？")
    # then each day's booking number comes before the other's
    assert _rank(thursday, "TK4400002") < _rank(thursday, "TK2200001")
    assert _rank(tuesday, "TK2200001") < _rank(tuesday, "TK4400002")


def test_the_background_writer_gives_a_unit_the_same_context(globex, fake_ollama, settings):
    # given the booking turns written by the background writer (announced, then written in one batch), as
    # the product does by default
    from conversations.models import Message
    from memory.conversation.writer import Announced, write_announced
    from memory.models import MemoryUnit
    from tenants.rls import tenant_scope

    settings.MEMORY_WRITER = "worker"
    _session(globex, fake_ollama, "tourist", EN_TRAINS)
    with tenant_scope(globex.tenant):
        messages = list(Message.objects.for_tenant(globex.tenant).order_by("seq"))
    write_announced([Announced(str(globex.tenant.pk), str(messages[0].session_id), tuple(str(m.pk) for m in messages))])
    # then the reference's unit carries the request it answers and, a level lower, the route named before it
    with tenant_scope(globex.tenant):
        # the conversation unit, not the booking reference keyed as an order id from the same message
        unit = MemoryUnit.objects.for_tenant(globex.tenant).get(
            key__startswith="conversation:", content__contains="I4012ZAZ"
        )
    assert "book" in unit.search_context.split()
    assert {"kings", "lynn", "friday"} <= set(unit.search_around.split())
    assert "I4012ZAZ" in unit.content
    assert "Kings" not in unit.content  # the context is for finding, never the memory's content
    # and a later session finds it by the route and the day
    recalled = _recalled(globex, "tourist", "What is the booking reference for the train to Kings Lynn on Friday?")
    assert _rank(recalled, "I4012ZAZ") < 3


# A customer's choice said by its value alone: the question's words are said where it is asked for and in other
# turns, never beside the value.
EN_DINNER = [
    ("I need a restaurant in town for tonight. What food options are there?", "We have lots of restaurants. Any area?"),
    ("The restaurant area doesn't matter much.", "I'd be happy to help. What kind of food would you like?"),
    ("How about a gastropub?", "The Slug and Lettuce is a gastropub in the centre."),
    ("Is that restaurant's food any good? What are the options in the area?", "It is very popular, yes."),
]
ZH_DINNER = [
    ("今晚想找个餐馆吃饭，有什么菜推荐吗？", "附近餐馆很多，您有什么要求吗？"),
    ("菜的口味清淡一点，餐馆要安静。", "好的，您想吃什么？"),
    ("有没有做酸菜鱼的店？", "有的，鱼酷(五道口店)的酸菜鱼很有名。"),
    ("这家餐馆的菜贵吗？环境怎么样？", "人均八十元，环境不错。"),
]


@pytest.mark.parametrize(
    ("tenant", "turns", "query", "value"),
    [
        ("globex", EN_DINNER, "What kind of food did I want at the restaurant?", "gastropub"),
        ("acme", ZH_DINNER, "我想吃的是哪道菜？", "酸菜鱼"),
    ],
)
def test_a_choice_said_by_its_value_alone_answers_a_question_naming_its_attribute(
    tenant, turns, query, value, request, fake_ollama
):
    # given a customer who named the cuisine or the dish by itself, and other turns that say "food" or 「菜」
    ctx = request.getfixturevalue(tenant)
    _session(ctx, fake_ollama, "diner", turns)
    # when they come back and ask for it by what it is
    recalled = _recalled(ctx, "diner", query)
    # then the turn that gives the value comes first
    assert _rank(recalled, value) == 0, recalled


# A rating asked by its label: 「评分」 is said in many turns; the value under it is what the customer asked for.
ZH_RATING = [
    ("你好，我想去游玩。请帮我找一个评分是4分以上，票价是150-200元的景点。", "推荐您去水立方嬉水乐园，您觉得咋样？"),
    ("好的。水立方嬉水乐园这个景点的周边都有哪些景点？", "有国家体育院和中华女子学院等。"),
    ("嗯呢。水立方嬉水乐园的周边景点里，哪个的评分是4.5分以上，门票是免费？", "推荐您去中华民族园，可以吗？"),
    ("嗯嗯，可以。中华民族园这个景点的周边都有啥好点的酒店吗？", "有北京国家会议中心大酒店, 北京亚奥国际酒店等。"),
    ("好的。这个景点的周边餐馆都有啥啊？", "有海底捞火锅(牡丹园店), 爆肚金生隆, 酒吧。"),
    ("嗯呢。游玩结束想去住宿。请帮我找一家有吹风机的高档型酒店。", "有很多家，推荐您去泉谷酒店(北京天坛店)。"),
    ("好。泉谷酒店(北京天坛店)的评分是几分？", "评分是4.3分。"),
    ("嗯呢。这家酒店的周边有哪些好玩的景点？", "只有一个景点是首都图书馆。"),
    ("嗯。首都图书馆这个景点的评分是4.5分以上，游玩的时长是2小时吗？",
     "很抱歉，没有查到评分，游玩时间是1小时 - 2小时。"),
    ("嗯嗯。这个景点的周边还有啥景点？", "有 今日美术馆, 天坛, 祈年殿等。"),
    ("嗯呢。这个景点的地址是什么啊？", "地址是北京朝阳区东三环南路88号。"),
]  # fmt: skip


def test_a_value_is_found_by_the_label_a_chinese_question_names(acme, fake_ollama):
    # given a customer who asked for a sight rated 4 or more, then for one rated 4.5 or more, among turns about
    # the sights, hotels and restaurants near it that say 「评分」 without giving the rating asked for
    _session(acme, fake_ollama, "rater", ZH_RATING)
    # when they come back and ask for the rating by its label
    recalled = _recalled(acme, "rater", "我要求景点评分是多少？")
    # then the request giving the rating that holds ranks above the reply that only names the word
    assert _rank(recalled, "门票是免费") < _rank(recalled, "没有查到评分"), recalled
    assert _rank(recalled, "门票是免费") < 2, recalled
