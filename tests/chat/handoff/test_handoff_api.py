"""API.md "Handoff to a person" over REST: state, handoff with its queue position, messages while a person has
the conversation (202, no model call), release, rating; bad input refused with its code and nothing changed."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from chat.handoff import state as handoff
from conversations.models import SessionRating
from tenants.rls import tenant_scope
from tests.chat.handoff.kit import send, session_row, stored
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)


def _handoff(ctx, sid, body=None):
    return ctx.client.post(f"/api/v1/sessions/{sid}/handoff", body or {}, format="json")


def test_a_session_reports_its_state(acme):
    # given
    sid = open_session(acme)["session_id"]
    # when
    detail = acme.client.get(f"/api/v1/sessions/{sid}").json()
    closed = acme.client.post(f"/api/v1/sessions/{sid}/close").json()
    # then
    assert detail["state"] == "ai"
    assert closed["state"] == "closed"


def test_a_handoff_puts_the_session_in_the_queue_with_its_position(acme):
    # given
    first = open_session(acme, "u1")["session_id"]
    second = open_session(acme, "u2")["session_id"]
    # when
    one = _handoff(acme, first, {"reason": "VIP customer"})
    two = _handoff(acme, second, {"reason": "refund dispute"})
    # then
    assert one.status_code == 200, one.content
    assert one.json() == {"state": "waiting_for_human", "position": 1}
    assert two.json() == {"state": "waiting_for_human", "position": 2}
    row = session_row(acme, first)
    assert (row.state, row.handoff_trigger, row.handoff_reason) == ("waiting_for_human", "api", "VIP customer")
    assert row.handoff_at is not None
    assert acme.client.get(f"/api/v1/sessions/{first}").json()["state"] == "waiting_for_human"


def test_a_second_handoff_keeps_the_first_trigger_and_place(acme):
    # given
    sid = open_session(acme)["session_id"]
    _handoff(acme, sid, {"reason": "first"})
    # when
    again = _handoff(acme, sid, {"reason": "second"})
    # then
    assert again.json() == {"state": "waiting_for_human", "position": 1}
    assert session_row(acme, sid).handoff_reason == "first"


@pytest.mark.parametrize("reason", [123, "x" * 301, "bad\x00reason", ["a list"]])
def test_a_bad_reason_is_refused_and_nothing_changes(acme, reason):
    # given
    sid = open_session(acme)["session_id"]
    # when
    response = _handoff(acme, sid, {"reason": reason})
    # then
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_reason"
    assert session_row(acme, sid).state == "ai"


def test_while_waiting_a_message_is_stored_and_not_answered(acme, fake_ollama):
    # given
    sid = open_session(acme)["session_id"]
    _handoff(acme, sid, {"reason": "complaint"})
    # when
    response = send(acme, sid, "我的快递还没到，电话 13812345678", "m1")
    again = send(acme, sid, "我的快递还没到，电话 13812345678", "m1")
    # then
    assert response.status_code == 202, response.content
    body = response.json()
    assert body == {"message_id": body["message_id"], "state": "waiting_for_human", "position": 1}
    assert again.status_code == 202
    assert again.json()["message_id"] == body["message_id"]  # the same client_msg_id: the same message
    assert fake_ollama.chat_requests == []  # no model call
    messages = stored(acme, sid)
    assert [(m.role, m.text) for m in messages] == [("user", "我的快递还没到，电话 13812345678")]
    assert messages[0].turn_lease_until is None


def test_with_a_person_the_state_is_with_human_and_staff_messages_are_listed(acme, staff, fake_ollama):
    # given
    sid = open_session(acme)["session_id"]
    _handoff(acme, sid)
    session = session_row(acme, sid)
    handoff.do_claim(acme.tenant, session, staff["agent_a"])
    handoff.do_staff_reply(acme.tenant, session, staff["agent_a"], "您好，我是客服小王。")
    # when
    response = send(acme, sid, "你好小王")
    listed = acme.client.get(f"/api/v1/sessions/{sid}/messages").json()["messages"]
    # then
    assert response.status_code == 202
    assert response.json()["state"] == "with_human"
    assert "position" not in response.json()
    assert [(m["role"], m["text"]) for m in listed] == [("staff", "您好，我是客服小王。"), ("user", "你好小王")]
    assert fake_ollama.chat_requests == []
    assert acme.client.get(f"/api/v1/sessions/{sid}").json()["state"] == "with_human"


def test_release_hands_the_conversation_back_to_the_ai(acme, fake_ollama):
    # given
    sid = open_session(acme)["session_id"]
    _handoff(acme, sid)
    fake_ollama.script("您好，有什么可以帮您？")
    # when
    released = acme.client.post(f"/api/v1/sessions/{sid}/release")
    answered = send(acme, sid, "你好")
    # then
    assert released.status_code == 200
    assert released.json() == {"state": "ai"}
    assert answered.status_code == 200
    assert answered.json()["reply"] == "您好，有什么可以帮您？"
    assert len(fake_ollama.chat_requests) == 1


def _csat_count(tenant, handled_by):
    return REGISTRY.get_sample_value("memdesk_csat_count", {"tenant": tenant, "handled_by": handled_by}) or 0


def test_a_rating_is_stored_and_a_second_replaces_it(acme, fake_ollama):
    # given
    sid = open_session(acme)["session_id"]
    fake_ollama.script("好的")
    send(acme, sid, "你好")
    acme.client.post(f"/api/v1/sessions/{sid}/close")
    before = _csat_count("acme", "ai")
    # when
    first = acme.client.post(f"/api/v1/sessions/{sid}/rating", {"score": 2, "comment": "慢"}, format="json")
    second = acme.client.post(f"/api/v1/sessions/{sid}/rating", {"score": 5}, format="json")
    # then
    assert first.status_code == 201, first.content
    assert first.json()["handled_by"] == "ai"
    assert second.status_code == 201
    assert (second.json()["score"], second.json()["comment"]) == (5, "")
    with tenant_scope(acme.tenant):
        ratings = list(SessionRating.objects.for_tenant(acme.tenant).filter(session_id=sid))
    assert [(r.score, r.handled_by) for r in ratings] == [(5, "ai")]
    assert _csat_count("acme", "ai") == before + 2


def test_a_rating_says_who_handled_the_conversation(acme, staff, fake_ollama):
    # given
    sid = open_session(acme)["session_id"]
    fake_ollama.script("好的")
    send(acme, sid, "你好")
    _handoff(acme, sid)
    session = session_row(acme, sid)
    handoff.do_claim(acme.tenant, session, staff["agent_a"])
    handoff.do_staff_reply(acme.tenant, session, staff["agent_a"], "您好")
    # when
    response = acme.client.post(f"/api/v1/sessions/{sid}/rating", {"score": 4}, format="json")
    # then
    assert response.json()["handled_by"] == "both"
    with tenant_scope(acme.tenant):
        assert SessionRating.objects.for_tenant(acme.tenant).get(session_id=sid).staff == staff["agent_a"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"score": 0}, "invalid_score"),
        ({"score": 6}, "invalid_score"),
        ({"score": "5"}, "invalid_score"),
        ({"score": True}, "invalid_score"),
        ({"score": 3, "comment": 5}, "invalid_comment"),
        ({}, "invalid_request"),
    ],
)
def test_a_bad_rating_is_refused_and_nothing_is_stored(acme, body, code):
    # given
    sid = open_session(acme)["session_id"]
    # when
    response = acme.client.post(f"/api/v1/sessions/{sid}/rating", body, format="json")
    # then
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    with tenant_scope(acme.tenant):
        assert not SessionRating.objects.for_tenant(acme.tenant).filter(session_id=sid).exists()


def test_another_tenants_session_cannot_be_handed_off_released_or_rated(acme, globex):
    # given
    sid = open_session(acme)["session_id"]
    # when
    responses = [
        _handoff(globex, sid),
        globex.client.post(f"/api/v1/sessions/{sid}/release"),
        globex.client.post(f"/api/v1/sessions/{sid}/rating", {"score": 1}, format="json"),
    ]
    # then
    assert [r.status_code for r in responses] == [404, 404, 404]
    assert {r.json()["error"]["code"] for r in responses} == {"session_not_found"}
    assert session_row(acme, sid).state == "ai"


def test_the_schema_lists_the_new_paths(acme):
    # when
    schema = acme.client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    # then
    for suffix in ("handoff", "release", "rating"):
        assert f"/api/v1/sessions/{{session_id}}/{suffix}" in schema["paths"]
