"""Nobody to take over: outside business hours, or nobody online after the wait, the end user is offered to
leave a message with a contact; it is stored, in the staff queue, and POSTed signed to the tenant's webhook."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from chat.handoff import state as handoff
from chat.handoff.offline import check_business_hours, within_business_hours
from conversations.models import ChatSession
from tenants.rls import tenant_scope
from tenants.signing import verify_signature_v2
from tests.chat.handoff.kit import configure, send, stored
from tests.chat.tools.backend import Answer, FakeBackend
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

SHANGHAI_WEEKDAYS = {
    "timezone": "Asia/Shanghai",
    "weekly": {day: [["09:00", "12:00"], ["13:00", "18:00"]] for day in ("mon", "tue", "wed", "thu", "fri")},
    "holidays": ["2026-12-25"],
}
CLOSED_ALWAYS = {"timezone": "Asia/Shanghai", "weekly": {}}


@pytest.mark.parametrize(
    ("utc", "is_open"),
    [
        (datetime(2026, 12, 7, 2, 0, tzinfo=UTC), True),  # Monday 10:00 in Shanghai
        (datetime(2026, 12, 7, 4, 30, tzinfo=UTC), False),  # Monday 12:30: the lunch break
        (datetime(2026, 12, 7, 10, 0, tzinfo=UTC), False),  # Monday 18:00: closed from 18:00
        (datetime(2026, 12, 5, 2, 0, tzinfo=UTC), False),  # Saturday
        (datetime(2026, 12, 25, 2, 0, tzinfo=UTC), False),  # a Friday, but a holiday
        (datetime(2026, 12, 6, 17, 30, tzinfo=UTC), False),  # Sunday 17:30 UTC is Monday 01:30 in Shanghai
    ],
)
def test_business_hours_are_read_in_the_tenants_time_zone(acme, utc, is_open):
    # given
    configure(acme, business_hours=SHANGHAI_WEEKDAYS)
    # then
    assert within_business_hours(acme.tenant, utc) is is_open


def test_without_business_hours_or_with_a_broken_setting_it_is_always_open(acme):
    # given
    now = datetime(2026, 12, 5, 2, 0, tzinfo=UTC)
    # then
    assert within_business_hours(acme.tenant, now)
    configure(acme, business_hours={"timezone": "Mars/Olympus", "weekly": {}})
    assert within_business_hours(acme.tenant, now)
    assert "time zone" in check_business_hours(acme.tenant.settings["business_hours"])
    assert check_business_hours(SHANGHAI_WEEKDAYS) is None
    assert check_business_hours({"weekly": {"mon": [["18:00", "09:00"]]}}) is not None


@pytest.fixture
def verifying_backend(acme):
    """A tenant back end that accepts only requests whose X-Memdesk-Signature-V2 verifies."""
    secret = acme.tenant.signing_secret

    def answer(request):
        signed = verify_signature_v2(secret, request.headers.get("X-Memdesk-Signature-V2"), request.raw, time.time())
        return Answer(status=200 if signed else 401, json={"ok": signed})

    with FakeBackend(responder=answer) as server:
        yield server


def test_outside_business_hours_the_message_left_is_kept_and_posted_signed(acme, verifying_backend, fake_ollama):
    # given
    configure(acme, business_hours=CLOSED_ALWAYS, webhook_url=verifying_backend.url)
    sid = open_session(acme, "night-owl")["session_id"]
    # when
    asked = send(acme, sid, "转人工")
    left = send(acme, sid, "我的电话是13812345678，订单A123一直没发货，请明天联系我", "left-1")
    # then: the end user is offered to leave a message
    assert asked.json()["reply"] == (
        "抱歉，现在是非工作时间，暂时没有人工客服可以接待。请留下您的问题和联系方式（电话或邮箱），我们会尽快联系您。"
    )
    assert left.status_code == 202
    assert left.json() == {
        "message_id": left.json()["message_id"], "state": "waiting_for_human", "position": 1, "leave_message": True,
    }  # fmt: skip
    # kept, and in the queue
    assert [m.text for m in stored(acme, sid)][-1] == "我的电话是13812345678，订单A123一直没发货，请明天联系我"
    assert [row["session_id"] for row in handoff.live_queue([acme.tenant])] == [sid]
    # posted to the webhook, signed: the back end verified the signature and accepted it
    [request] = verifying_backend.requests
    body = request.json
    assert body["event"] == "handoff.message_left"
    assert body["session_id"] == sid
    assert body["end_user_id"] == "night-owl"
    assert body["message"]["id"] == left.json()["message_id"]
    assert body["contact"] == {"phone": "13812345678"}
    assert body["business_hours_open"] is False
    assert body["handoff"]["trigger"] == "user_request"
    assert verify_signature_v2(
        acme.tenant.signing_secret, request.headers["X-Memdesk-Signature-V2"], request.raw, time.time()
    )
    assert request.headers["X-Memdesk-Timestamp"]
    assert fake_ollama.chat_requests == []


def test_a_forged_signature_would_be_refused_by_the_receiver(acme):
    # given
    body = b'{"event":"handoff.message_left"}'
    # then: the receiver's check the webhook test relies on refuses another secret and an old timestamp
    from tenants.signing import sign_v2

    now = int(time.time())
    assert not verify_signature_v2(acme.tenant.signing_secret, sign_v2("whsec_other", body, now), body, now)
    old = sign_v2(acme.tenant.signing_secret, body, now - 3600)
    assert not verify_signature_v2(acme.tenant.signing_secret, old, body, now)


def test_with_nobody_online_and_no_wait_the_end_user_is_offered_to_leave_a_message(acme, fake_ollama):
    # given
    configure(acme, offline_wait_s=0)
    sid = open_session(acme)["session_id"]
    # when
    response = send(acme, sid, "人工客服")
    # then
    assert "目前没有客服在线" in response.json()["reply"]
    assert "联系方式" in response.json()["reply"]


def test_with_a_console_open_the_end_user_waits_for_a_person(acme, staff, fake_ollama):
    # given: an agent's console said it is open a moment ago
    configure(acme, offline_wait_s=0)
    handoff.do_mark_online(staff["agent_a"], [acme.tenant])
    sid = open_session(acme)["session_id"]
    # when
    response = send(acme, sid, "人工客服")
    # then
    assert response.json()["reply"] == "好的，正在为您转接人工客服，请稍候。您目前排在第 1 位。"


def test_after_the_wait_with_nobody_online_a_new_message_is_one_left(acme, verifying_backend, fake_ollama):
    # given: the handoff found someone online; the wait has passed and nobody is online any more
    configure(acme, offline_wait_s=60, webhook_url=verifying_backend.url)
    sid = open_session(acme)["session_id"]
    assert acme.client.post(f"/api/v1/sessions/{sid}/handoff", {}, format="json").json() == {
        "state": "waiting_for_human", "position": 1,
    }  # fmt: skip
    with tenant_scope(acme.tenant):
        ChatSession.objects.for_tenant(acme.tenant).filter(pk=sid).update(handoff_at=datetime(2026, 1, 1, tzinfo=UTC))
    # when
    response = send(acme, sid, "还有人吗？我的邮箱是 li@example.com")
    # then
    assert response.json()["leave_message"] is True
    [request] = verifying_backend.requests
    assert request.json["contact"] == {"email": "li@example.com"}
    assert request.json["business_hours_open"] is True
