"""Staff take over on ``ws/staff/``: the live queue, claim (one winner), reply and typing reaching the end
user's socket, release; another tenant's staff neither see nor claim; no model call while a person answers."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from chat.handoff import state as handoff
from conversations.models import Message
from tests.chat.handoff.kit import chat_socket, send, session_row, staff_socket, stored, until
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

GREETING = "您好，我是客服小王，请问有什么可以帮您？"


def _handoff(ctx, sid):
    response = ctx.client.post(f"/api/v1/sessions/{sid}/handoff", {"reason": "needs a person"}, format="json")
    assert response.status_code == 200, response.content


async def _waiting(ctx, end_user="customer"):
    opened = await sync_to_async(open_session)(ctx, end_user)
    await sync_to_async(_handoff)(ctx, opened["session_id"])
    return opened


async def test_the_console_gets_the_queue_then_new_waiting_sessions_live(acme, staff):
    # given
    first = await _waiting(acme, "early")
    console = await staff_socket(staff["agent_a"])
    queue = await console.receive_json_from(timeout=10)
    # when
    second = await _waiting(acme, "late")
    event, _ = await until(console, "session")
    # then
    assert queue["type"] == "queue"
    assert [(s["session_id"], s["position"], s["state"]) for s in queue["sessions"]] == [
        (first["session_id"], 1, "waiting_for_human")
    ]
    assert event["session"]["session_id"] == second["session_id"]
    assert event["session"]["position"] == 2
    assert event["session"]["trigger"] == "api"
    await console.disconnect()


async def test_a_claimed_conversation_gets_the_staff_reply_on_the_end_users_socket(acme, staff, fake_ollama):
    # given
    opened = await _waiting(acme)
    sid = opened["session_id"]
    end_user = await chat_socket(opened)
    console = await staff_socket(staff["agent_a"])
    await until(console, "queue")
    # when: claim, then reply
    await console.send_json_to({"type": "claim", "session_id": sid})
    claimed, _ = await until(console, "claimed")
    state, _ = await until(end_user, "state")
    await console.send_json_to({"type": "reply", "session_id": sid, "text": GREETING})
    sent, _ = await until(console, "sent")
    delta = await end_user.receive_json_from(timeout=10)
    done = await end_user.receive_json_from(timeout=10)
    # then
    assert claimed["note"]["state"] == "with_human"
    assert state == {"type": "state", "state": "with_human"}
    assert delta == {"type": "delta", "reply_id": sent["message_id"], "text": GREETING, "role": "staff"}
    assert done["type"] == "done"
    assert done["role"] == "staff"
    assert done["reply_id"] == sent["message_id"]
    messages = await sync_to_async(stored)(acme, sid)
    assert [(m.role, m.author_id) for m in messages] == [(Message.Role.STAFF, staff["agent_a"].pk)]
    assert (await sync_to_async(session_row)(acme, sid)).staff_involved
    # and the end user's messages reach the console, with no model call
    await end_user.send_json_to({"type": "message", "text": "我的订单A123还没到", "client_msg_id": "u1"})
    staff_event, _ = await until(console, "message")  # the console hears its own reply too
    event, _ = await until(console, "message")
    assert (staff_event["message"]["role"], staff_event["message"]["author"]) == ("staff", "agent_a")
    assert (event["message"]["role"], event["message"]["text"]) == ("user", "我的订单A123还没到")
    assert event["session_id"] == sid
    assert fake_ollama.chat_requests == []
    await end_user.disconnect()
    await console.disconnect()


async def test_typing_goes_both_ways_while_a_person_answers(acme, staff):
    # given
    opened = await _waiting(acme)
    sid = opened["session_id"]
    end_user = await chat_socket(opened)
    console = await staff_socket(staff["agent_a"])
    await until(console, "queue")
    await console.send_json_to({"type": "claim", "session_id": sid})
    await until(console, "claimed")
    await until(end_user, "state")
    # when
    await console.send_json_to({"type": "typing", "session_id": sid})
    to_user = await end_user.receive_json_from(timeout=10)
    await end_user.send_json_to({"type": "typing"})
    to_staff, _ = await until(console, "typing")
    # then
    assert to_user == {"type": "typing", "role": "staff"}
    assert to_staff == {"type": "typing", "session_id": sid, "role": "user"}
    await end_user.disconnect()
    await console.disconnect()


async def test_two_concurrent_claims_have_one_winner(acme, staff):
    # given
    opened = await _waiting(acme)
    sid = opened["session_id"]
    consoles = [await staff_socket(staff["agent_a"]), await staff_socket(staff["owner_a"])]
    for console in consoles:
        await until(console, "queue")
    # when
    await asyncio.gather(*(c.send_json_to({"type": "claim", "session_id": sid}) for c in consoles))
    outcomes = []
    for console in consoles:
        while True:
            frame = await console.receive_json_from(timeout=20)
            if frame["type"] in ("claimed", "error"):
                outcomes.append(frame)
                break
    # then
    kinds = sorted(f["type"] for f in outcomes)
    assert kinds == ["claimed", "error"]
    [refused] = [f for f in outcomes if f["type"] == "error"]
    assert refused["code"] == "already_claimed"
    assert refused["session_id"] == sid
    row = await sync_to_async(session_row)(acme, sid)
    assert row.state == "with_human"
    assert row.assigned_to_id in (staff["agent_a"].pk, staff["owner_a"].pk)
    for console in consoles:
        await console.disconnect()


def test_claims_from_many_threads_at_once_have_exactly_one_winner(acme, staff):
    # given
    sid = open_session(acme)["session_id"]
    _handoff(acme, sid)
    session = session_row(acme, sid)
    users = [staff["agent_a"], staff["owner_a"], staff["root"], staff["agent_a"]]
    start = threading.Barrier(len(users))
    results: list[str] = []

    def claim(user):
        start.wait()
        try:
            handoff.do_claim(acme.tenant, session, user)
            results.append(f"won:{user.pk}")
        except handoff.AlreadyClaimed:
            results.append("lost")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claim, args=(user,)) for user in users]
    # when
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    # then: one user won (the same agent twice may both "win": claiming one's own session again is a no-op)
    winners = {r for r in results if r.startswith("won:")}
    assert len(winners) == 1
    assert session_row(acme, sid).assigned_to_id == int(winners.pop().removeprefix("won:"))


async def test_another_tenants_staff_neither_see_nor_claim(acme, globex, staff):
    # given: acme's session waits; globex's owner has a console open
    opened = await _waiting(acme)
    sid = opened["session_id"]
    outsider = await staff_socket(staff["outsider"])
    queue = await outsider.receive_json_from(timeout=10)
    # when
    await _waiting(acme, "another")  # a live event acme's consoles hear
    await outsider.send_json_to({"type": "claim", "session_id": sid})
    claim = await outsider.receive_json_from(timeout=10)
    await outsider.send_json_to({"type": "reply", "session_id": sid, "text": "hi"})
    reply = await outsider.receive_json_from(timeout=10)
    await outsider.send_json_to({"type": "open", "session_id": sid})
    note = await outsider.receive_json_from(timeout=10)
    # then: nothing of acme's, and its session is "not found" like one that does not exist
    assert queue == {"type": "queue", "sessions": []}
    assert [claim["code"], reply["code"], note["code"]] == ["session_not_found"] * 3
    assert await outsider.receive_nothing(timeout=0.5)
    assert (await sync_to_async(session_row)(acme, sid)).state == "waiting_for_human"
    await outsider.disconnect()


async def test_a_superuser_sees_every_tenants_queue(acme, globex, staff):
    # given
    mine = await _waiting(acme)
    theirs = await _waiting(globex)
    # when
    console = await staff_socket(staff["root"])
    queue = await console.receive_json_from(timeout=10)
    # then
    assert {s["session_id"] for s in queue["sessions"]} == {mine["session_id"], theirs["session_id"]}
    await console.disconnect()


async def test_without_a_staff_login_or_from_another_site_the_console_is_refused(acme, staff):
    # given
    from channels.testing import WebsocketCommunicator

    from config.asgi import application

    anonymous = WebsocketCommunicator(application, "/ws/staff/", headers=[(b"host", b"testserver")])
    await anonymous.connect(timeout=10)
    # when
    await anonymous.receive_json_from(timeout=10)
    anonymous_close = await anonymous.receive_output(timeout=10)
    cross_site = await staff_socket(staff["agent_a"], origin=b"https://evil.example")
    await cross_site.receive_json_from(timeout=10)
    cross_close = await cross_site.receive_output(timeout=10)
    # then
    assert anonymous_close == {"type": "websocket.close", "code": 4401}
    assert cross_close == {"type": "websocket.close", "code": 4403}


async def test_release_from_the_console_lets_the_ai_answer_again(acme, staff, fake_ollama):
    # given
    opened = await _waiting(acme)
    sid = opened["session_id"]
    end_user = await chat_socket(opened)
    console = await staff_socket(staff["agent_a"])
    await until(console, "queue")
    await console.send_json_to({"type": "claim", "session_id": sid})
    await until(console, "claimed")
    await until(end_user, "state")
    fake_ollama.script("您好，我是智能助手，还有什么可以帮您？")
    # when
    await console.send_json_to({"type": "release", "session_id": sid})
    released, _ = await until(console, "released")
    state, _ = await until(end_user, "state")
    await end_user.send_json_to({"type": "message", "text": "你好", "client_msg_id": "after"})
    done, _ = await until(end_user, "done")
    # then
    assert released["session_id"] == sid
    assert state == {"type": "state", "state": "ai"}
    assert done["text"] == "您好，我是智能助手，还有什么可以帮您？"
    assert "role" not in done
    assert len(fake_ollama.chat_requests) == 1
    await end_user.disconnect()
    await console.disconnect()


def test_a_reply_by_someone_who_has_not_claimed_is_refused(acme, staff):
    # given
    sid = open_session(acme)["session_id"]
    _handoff(acme, sid)
    session = session_row(acme, sid)
    handoff.do_claim(acme.tenant, session, staff["agent_a"])
    # when
    with pytest.raises(handoff.NotAssigned):
        handoff.do_staff_reply(acme.tenant, session, staff["owner_a"], "我来回答")
    # then
    assert stored(acme, sid) == []
    assert send(acme, sid, "你好").status_code == 202
