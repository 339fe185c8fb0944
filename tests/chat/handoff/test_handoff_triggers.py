"""Each trigger of a handoff hands the conversation to a person, records its trigger and reason, and the turn's
reply tells the end user in their language (and their place in the queue) without calling the model."""

from __future__ import annotations

import pytest

from conversations.models import ChatSession, Message
from tenants.rls import tenant_scope
from testkit.fake_ollama import Reply
from tests.chat.handoff.kit import chat_socket, configure, send, session_row, until
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sid(acme):
    return open_session(acme, "zhangwei")["session_id"]


def test_the_end_user_asking_for_a_person_is_handed_off_without_the_model(acme, sid, fake_ollama):
    # when
    response = send(acme, sid, "我要转人工")
    after = send(acme, sid, "在吗？")
    # then
    assert response.status_code == 200, response.content
    assert response.json()["reply"] == "好的，正在为您转接人工客服，请稍候。您目前排在第 1 位。"
    assert fake_ollama.chat_requests == []
    row = session_row(acme, sid)
    assert (row.state, row.handoff_trigger) == ("waiting_for_human", "user_request")
    assert row.handoff_reason
    assert after.status_code == 202


def test_an_english_request_is_answered_in_english_with_the_position(acme, globex, fake_ollama):
    # given: someone already waits
    first = open_session(globex, "first")["session_id"]
    send(globex, first, "human agent please")
    sid = open_session(globex, "second")["session_id"]
    # when
    response = send(globex, sid, "Can I talk to a real person?")
    # then
    assert response.json()["reply"] == (
        "Sure, I'm connecting you to a person. You are number 2 in the queue; please stay here."
    )
    assert fake_ollama.chat_requests == []


@pytest.mark.parametrize(
    "text",
    [
        "不用转人工，谢谢",
        "I don't need a human agent, thanks",
        # sentences from long conversations (LoCoMo) that describe people rather than ask for one
        "Just skyped with a fan I met in CA. We talked characters - so cool to talk to someone who gets it. You?",
        "Thanks, Maria! It's been great to talk to someone who understands the importance of these issues.",
        "Yeah, nature is all connected. We as human being need look after it.",
    ],
)
def test_declining_or_describing_a_person_is_not_a_request(acme, sid, fake_ollama, text):
    # given
    fake_ollama.script("好的")
    # when
    response = send(acme, sid, text)
    # then
    assert response.json()["reply"] == "好的"
    assert session_row(acme, sid).state == "ai"


def test_the_user_request_trigger_can_be_turned_off(acme, sid, fake_ollama):
    # given
    configure(acme, user_request=False)
    fake_ollama.script("我来帮您")
    # when
    response = send(acme, sid, "转人工")
    # then
    assert response.json()["reply"] == "我来帮您"
    assert session_row(acme, sid).state == "ai"


def test_the_tenants_keyword_rule_hands_off(acme, sid, fake_ollama):
    # given
    configure(acme, keywords=["律师函"])
    # when
    response = send(acme, sid, "再不退款我就发律师函了")
    # then
    assert "第 1 位" in response.json()["reply"]
    row = session_row(acme, sid)
    assert (row.state, row.handoff_trigger) == ("waiting_for_human", "keyword")
    assert "律师函" in row.handoff_reason
    assert fake_ollama.chat_requests == []


def _mark_replies_needing_confirmation(ctx, sid):
    with tenant_scope(ctx.tenant):
        for reply in Message.objects.for_tenant(ctx.tenant).filter(session_id=sid, role=Message.Role.ASSISTANT):
            reply.data = {**reply.data, "needs_confirmation": True}
            reply.save(update_fields=["data"])


def test_replies_needing_confirmation_n_times_in_a_row_hand_off(acme, sid, fake_ollama):
    # given: two replies in a row that needed the user's confirmation
    configure(acme, confirmation_streak=2)
    fake_ollama.script("请确认您的地址？", "请再确认一次？")
    send(acme, sid, "帮我改地址")
    send(acme, sid, "上海")
    _mark_replies_needing_confirmation(acme, sid)
    # when
    response = send(acme, sid, "对")
    # then
    assert "人工客服" in response.json()["reply"]
    assert session_row(acme, sid).handoff_trigger == "confirmation"
    assert len(fake_ollama.chat_requests) == 2  # the third message did not reach the model


def test_one_reply_needing_confirmation_is_not_a_streak(acme, sid, fake_ollama):
    # given
    configure(acme, confirmation_streak=2)
    fake_ollama.script("请确认？", "好的")
    send(acme, sid, "帮我改地址")
    _mark_replies_needing_confirmation(acme, sid)
    # when
    response = send(acme, sid, "对")
    # then
    assert response.json()["reply"] == "好的"


def test_an_amnesia_alert_whose_streak_goes_on_hands_off(acme, sid, fake_ollama):
    # given: a tenant with the amnesia trigger on; three empty-recall turns whose replies admit forgetting fire
    # the amnesia alert
    configure(acme, amnesia=True)
    fake_ollama.default_reply = "抱歉，我不太记得了，请再说一遍。"
    for text in ("嗯", "啊", "哦"):
        assert send(acme, sid, text).status_code == 200
    assert session_row(acme, sid).amnesia_alerted
    # when
    response = send(acme, sid, "呃")
    # then
    assert "人工客服" in response.json()["reply"]
    assert session_row(acme, sid).handoff_trigger == "amnesia"
    assert len(fake_ollama.chat_requests) == 3


def test_negative_messages_in_a_row_hand_off(acme, sid, fake_ollama):
    # given
    configure(acme, negative_mood_turns=2)
    fake_ollama.script("非常抱歉，我马上帮您查。")
    send(acme, sid, "气死我了，快递等了三天还没到")
    # when
    response = send(acme, sid, "太过分了！！你们到底怎么回事")
    # then
    assert "人工客服" in response.json()["reply"]
    row = session_row(acme, sid)
    assert (row.state, row.handoff_trigger) == ("waiting_for_human", "negative_mood")
    assert len(fake_ollama.chat_requests) == 1


def test_by_default_only_the_end_users_own_request_hands_off(acme, sid, fake_ollama):
    # given a tenant that set nothing, and an angry customer whose replies need confirmation
    fake_ollama.default_reply = "非常抱歉，我不太记得了，请再说一遍。"
    # when they write four angry messages in a row
    for text in ("气死我了，快递等了三天还没到", "太过分了！！", "你们到底怎么回事！！", "垃圾服务，气死了"):
        response = send(acme, sid, text)
        # then the AI keeps answering: the automatic triggers wait for the tenant to turn them on
        assert response.status_code == 200, response.content
    assert session_row(acme, sid).state == "ai"
    assert len(fake_ollama.chat_requests) == 4


def test_one_negative_message_is_not_a_mood(acme, sid, fake_ollama):
    # given
    configure(acme, negative_mood_turns=2)
    fake_ollama.script("您好", "非常抱歉")
    send(acme, sid, "你好")
    # when
    response = send(acme, sid, "太过分了！！")
    # then
    assert response.json()["reply"] == "非常抱歉"


def test_the_model_hands_off_with_a_structured_tool_call(acme, sid, fake_ollama):
    # given
    configure(acme, model_tool=True)
    call = {"function": {"name": "handoff_to_human", "arguments": {"reason": "refund above my limit"}}}
    fake_ollama.script(Reply(tool_calls=[call]))
    # when
    response = send(acme, sid, "我要退款两万元")
    # then
    assert response.status_code == 200
    assert response.json()["reply"] == "好的，正在为您转接人工客服，请稍候。您目前排在第 1 位。"
    [request] = fake_ollama.chat_requests
    assert [t["function"]["name"] for t in request["tools"]] == ["handoff_to_human"]
    row = session_row(acme, sid)
    assert (row.state, row.handoff_trigger, row.handoff_reason) == (
        "waiting_for_human",
        "model",
        "refund above my limit",
    )


def test_the_model_is_not_offered_the_tool_by_default(acme, sid, fake_ollama):
    # given
    fake_ollama.script("您好")
    # when
    send(acme, sid, "你好")
    # then
    assert not fake_ollama.chat_requests[0].get("tools")


async def test_the_widget_button_hands_off_over_the_socket(acme, fake_ollama):
    # given
    opened = await _open(acme)
    communicator = await chat_socket(opened)
    # when
    await communicator.send_json_to({"type": "handoff"})
    frame = await communicator.receive_json_from(timeout=10)
    # then
    assert frame == {"type": "state", "state": "waiting_for_human", "position": 1}
    row = await _row(acme, opened["session_id"])
    assert row.handoff_trigger == "user_button"
    await communicator.disconnect()


async def test_on_the_socket_a_message_while_waiting_gets_ack_then_state(acme, fake_ollama):
    # given
    opened = await _open(acme)
    communicator = await chat_socket(opened)
    await communicator.send_json_to({"type": "handoff"})
    await until(communicator, "state")
    # when
    await communicator.send_json_to({"type": "message", "text": "还要等多久？", "client_msg_id": "w1"})
    ack = await communicator.receive_json_from(timeout=10)
    state = await communicator.receive_json_from(timeout=10)
    # then
    assert (ack["type"], ack["client_msg_id"]) == ("ack", "w1")
    assert state == {"type": "state", "state": "waiting_for_human", "position": 1}
    assert fake_ollama.chat_requests == []
    await communicator.disconnect()


async def test_on_the_socket_a_trigger_streams_the_notice_and_the_state(acme, fake_ollama):
    # given
    opened = await _open(acme)
    communicator = await chat_socket(opened)
    # when
    await communicator.send_json_to({"type": "message", "text": "人工客服", "client_msg_id": "h1"})
    done, before = await until(communicator, "done")
    # then
    kinds = [f["type"] for f in before]
    assert kinds[0] == "ack"
    assert "state" in kinds
    assert "第 1 位" in done["text"]
    assert fake_ollama.chat_requests == []
    await communicator.disconnect()


async def _open(ctx):
    from asgiref.sync import sync_to_async

    return await sync_to_async(open_session)(ctx, "socket-user")


async def _row(ctx, sid) -> ChatSession:
    from asgiref.sync import sync_to_async

    return await sync_to_async(session_row)(ctx, sid)


@pytest.mark.parametrize(
    "text",
    [
        "My refund still hasn't arrived after three weeks. I want to talk to a real person about it.",
        "This bot keeps misunderstanding me, please let me speak with a live agent now.",
    ],
)
def test_a_long_message_that_asks_for_a_person_is_a_request(acme, sid, fake_ollama, text):
    send(acme, sid, text)
    assert session_row(acme, sid).state == "waiting_for_human"
