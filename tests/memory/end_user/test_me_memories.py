"""The end user's own memories over REST (API.md "End users"): what the browser, holding only its session
token, sees of what memdesk remembers, and its "forget this" and "this is wrong"."""

from __future__ import annotations

from typing import Any

import pytest
from django.core import signing
from rest_framework.test import APIClient

from conversations.models import ChatSession
from conversations.session_tokens import issue_token
from memory.models import MemoryEvent, MemoryUnit
from memory.recall.pipeline import recall
from tenants.rls import tenant_scope
from tests.factories import TenantCtx, open_session, write_memory

PHONE = "用户手机号：13812345678"
ME = "/api/v1/me/memories"


def _browser(ctx: TenantCtx, end_user: str) -> tuple[APIClient, ChatSession]:
    """A session opened by the tenant's back end, and a client holding what the end user's browser holds: the
    session id and its token (no API key)."""
    opened = open_session(ctx, end_user)
    client = APIClient()
    client.credentials(HTTP_X_SESSION_ID=opened["session_id"], HTTP_X_SESSION_TOKEN=opened["token"])
    with tenant_scope(ctx.tenant):
        session = ChatSession.objects.for_tenant(ctx.tenant).get(pk=opened["session_id"])
    return client, session


def _phone(ctx: TenantCtx, session: ChatSession, content: str = PHONE, number: str = "13812345678") -> MemoryUnit:
    return write_memory(ctx, session, content, type="user_profile", key="phone", data={"phone": number})


def _rows(ctx: TenantCtx) -> tuple[list[tuple[Any, ...]], int]:
    """Every memory of the tenant as stored, and how many events it has: what "nothing changed" compares."""
    with tenant_scope(ctx.tenant):
        rows = (
            MemoryUnit.objects.for_tenant(ctx.tenant)
            .order_by("id")
            .values_list("id", "content", "expires_at", "superseded_at")
        )
        return list(rows), MemoryEvent.objects.for_tenant(ctx.tenant).count()


def _events(ctx: TenantCtx, memory_id: Any) -> list[tuple[str, str]]:
    with tenant_scope(ctx.tenant):
        events = MemoryEvent.objects.for_tenant(ctx.tenant).filter(memory_id=memory_id).order_by("id")
        return list(events.values_list("kind", "actor"))


def _recalled(ctx: TenantCtx, session: ChatSession, query: str) -> list[str]:
    return [hit.memory.content for hit in recall(ctx.tenant, session, query, k=10, record=False).hits]


def test_the_list_shows_the_end_users_memories_masked_and_never_another_end_users(acme):
    # given alice's phone, a note from another session of hers, and bob's phone
    alice, session = _browser(acme, "alice")
    _phone(acme, session)
    _, earlier = _browser(acme, "alice")
    write_memory(acme, earlier, "用户提到：喜欢周末送货", key="delivery_pref")
    _, bob = _browser(acme, "bob")
    _phone(acme, bob, "用户手机号：13900001111", "13900001111")
    # when
    response = alice.get(ME)
    # then she sees her two memories, her phone masked as the prompt's anchor shows it, and nothing of bob's
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["memory_enabled"] is True
    assert body["can_turn_off"] is False
    contents = [m["content"] for m in body["memories"]]
    assert sorted(contents) == ["用户手机号：138****5678", "用户提到：喜欢周末送货"]
    assert "13812345678" not in response.content.decode()
    assert "1390000" not in response.content.decode()
    assert set(body["memories"][0]) == {"id", "type", "key", "content", "created_at", "expires_at"}
    assert body["memories"][0]["expires_at"].endswith("Z")


def test_forget_expires_the_memory_and_recall_no_longer_returns_it(acme):
    # given alice's phone, which recall finds
    alice, session = _browser(acme, "alice")
    phone = _phone(acme, session)
    assert PHONE in _recalled(acme, session, "我的手机号是多少")
    # when she forgets it
    response = alice.post(f"{ME}/{phone.pk}/forget")
    # then it is answered, gone from her list and from recall, and the audit trail says she did it
    assert response.status_code == 200, response.content
    assert response.json()["id"] == str(phone.pk)
    assert response.json()["content"] == "用户手机号：138****5678"
    assert alice.get(ME).json()["memories"] == []
    assert PHONE not in _recalled(acme, session, "我的手机号是多少")
    assert _events(acme, phone.pk) == [("create", "system"), ("expire", "end_user")]


def test_forgetting_a_fact_forgets_the_conversation_units_that_state_it(acme):
    # given the phone and the sentence of the conversation that stated it
    alice, session = _browser(acme, "alice")
    phone = _phone(acme, session)
    unit = write_memory(
        acme, session, "我的手机号是13812345678，有事打这个", key="conversation:0123456789abcdef",
        data={"source": "conversation", "role": "user", "facts": {"phone": "13812345678"}},
    )  # fmt: skip
    # when
    assert alice.post(f"{ME}/{phone.pk}/forget").status_code == 200
    # then the sentence goes too: it would bring the number back at the next recall
    assert alice.get(ME).json()["memories"] == []
    assert not any("13812345678" in c for c in _recalled(acme, session, "我的手机号是多少"))
    assert _events(acme, unit.pk)[-1] == ("expire", "end_user")


def test_correct_supersedes_the_memory_and_recall_serves_the_new_version(acme):
    # given alice's phone, which is wrong
    alice, session = _browser(acme, "alice")
    old = _phone(acme, session)
    # when she gives the right number
    response = alice.post(f"{ME}/{old.pk}/correct", {"content": "13900001111"}, format="json")
    # then a new version holds it, the old one is kept as history, and recall serves the new one
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["id"] != str(old.pk)
    assert body["content"] == "用户手机号：139****1111"
    with tenant_scope(acme.tenant):
        new = MemoryUnit.objects.for_tenant(acme.tenant).get(pk=body["id"])
        old.refresh_from_db()
    assert (new.type, new.key, new.content, new.data) == (
        "user_profile", "phone", "用户手机号：13900001111", {"phone": "13900001111"},
    )  # fmt: skip
    assert old.superseded_by_id == new.pk
    assert old.content == PHONE
    recalled = _recalled(acme, session, "我的手机号是多少")
    assert "用户手机号：13900001111" in recalled
    assert PHONE not in recalled
    assert [m["content"] for m in alice.get(ME).json()["memories"]] == ["用户手机号：139****1111"]
    assert _events(acme, old.pk)[-1] == ("replace", "end_user")
    assert _events(acme, new.pk) == [("create", "end_user")]


def test_correct_a_memory_without_a_key_supersedes_it_too(acme):
    # given a note the tenant's back end stored without a key
    alice, session = _browser(acme, "alice")
    note = write_memory(acme, session, "用户偏好：周末送货")
    # when
    response = alice.post(f"{ME}/{note.pk}/correct", {"content": "用户偏好：工作日送货"}, format="json")
    # then
    assert response.status_code == 200, response.content
    assert [m["content"] for m in alice.get(ME).json()["memories"]] == ["用户偏好：工作日送货"]
    with tenant_scope(acme.tenant):
        note.refresh_from_db()
    assert str(note.superseded_by_id) == response.json()["id"]
    assert _events(acme, note.pk)[-1] == ("replace", "end_user")


def test_another_end_users_memory_is_not_found_and_stays(acme):
    # given bob's phone
    alice, _ = _browser(acme, "alice")
    _, bob = _browser(acme, "bob")
    phone = _phone(acme, bob, "用户手机号：13900001111", "13900001111")
    before = _rows(acme)
    # when alice names it
    forgotten = alice.post(f"{ME}/{phone.pk}/forget")
    corrected = alice.post(f"{ME}/{phone.pk}/correct", {"content": "13812345678"}, format="json")
    unknown = alice.post(f"{ME}/not-a-uuid/forget")
    # then it is "not found", exactly as a memory that does not exist, and nothing changed
    for response in (forgotten, corrected, unknown):
        assert response.status_code == 404, response.content
        assert response.json()["error"]["code"] == "memory_not_found"
    assert _rows(acme) == before


@pytest.mark.parametrize(
    "token",
    [None, "", "garbage", "expired", "another session's"],
)
def test_a_bad_token_is_401_invalid_session_token_and_changes_nothing(acme, monkeypatch, token):
    # given alice's phone, and a browser whose token is wrong
    alice, session = _browser(acme, "alice")
    phone = _phone(acme, session)
    if token == "expired":
        three_days_ago = signing.b62_encode(int(__import__("time").time()) - 3 * 86400)
        monkeypatch.setattr(signing.TimestampSigner, "timestamp", lambda self: three_days_ago)
        token = issue_token(acme.tenant.pk, session.pk)
        monkeypatch.undo()
    elif token == "another session's":
        token = open_session(acme, "bob")["token"]
    client = APIClient()
    headers = {"HTTP_X_SESSION_ID": str(session.pk)}
    if token is not None:
        headers["HTTP_X_SESSION_TOKEN"] = token
    before = _rows(acme)
    # when
    responses = [
        client.get(ME, **headers),
        client.post(f"{ME}/{phone.pk}/forget", **headers),
        client.post(f"{ME}/{phone.pk}/correct", {"content": "x"}, format="json", **headers),
        client.put(ME, {"memory_enabled": False}, format="json", **headers),
    ]
    # then
    for response in responses:
        assert response.status_code == 401, response.content
        assert response.json()["error"]["code"] == "invalid_session_token"
    assert _rows(acme) == before


def test_a_tenant_api_key_is_not_an_end_users_token(acme):
    # given the tenant's back end, with its key and a session id
    _, session = _browser(acme, "alice")
    acme.client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}", HTTP_X_SESSION_ID=str(session.pk))
    # when
    response = acme.client.get(ME)
    # then
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_session_token"


def test_a_session_of_another_tenant_is_404_session_not_found(acme, globex):
    # given a token that names acme but a session of globex's
    globex_session = open_session(globex, "carol")["session_id"]
    client = APIClient()
    client.credentials(
        HTTP_X_SESSION_ID=globex_session, HTTP_X_SESSION_TOKEN=issue_token(acme.tenant.pk, globex_session)
    )
    # when
    response = client.get(ME)
    # then
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "session_not_found"


def test_a_missing_session_id_is_400(acme):
    opened = open_session(acme, "alice")
    client = APIClient()
    client.credentials(HTTP_X_SESSION_TOKEN=opened["token"])
    response = client.get(ME)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "session_id_required"


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("", "invalid_request"),
        ("   ", "invalid_request"),
        ("1" * 151, "content_too_long"),
        ("139\x0000001111", "invalid_text"),
        ("139\x0700001111", "invalid_text"),
        (13900001111, "invalid_request"),
        (None, "invalid_request"),
    ],
)
def test_bad_corrected_content_is_400_and_nothing_changes(acme, content, code):
    # given alice's phone
    alice, session = _browser(acme, "alice")
    phone = _phone(acme, session)
    before = _rows(acme)
    # when
    response = alice.post(f"{ME}/{phone.pk}/correct", {"content": content}, format="json")
    # then
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code
    assert _rows(acme) == before
    assert [m["content"] for m in alice.get(ME).json()["memories"]] == ["用户手机号：138****5678"]


def test_the_widget_on_an_allowed_site_may_call_and_another_site_may_not(acme):
    # given acme's shop is allowed to embed the widget
    acme.tenant.allowed_origins = ["https://shop.example.com"]
    acme.tenant.save(update_fields=["allowed_origins"])
    alice, session = _browser(acme, "alice")
    _phone(acme, session)
    # when the browser asks first (CORS preflight: no token yet), then calls, from the shop and from elsewhere
    preflight = alice.options(ME, HTTP_ORIGIN="https://evil.example.net", HTTP_ACCESS_CONTROL_REQUEST_METHOD="PUT")
    allowed = alice.get(ME, HTTP_ORIGIN="https://shop.example.com")
    refused = alice.get(ME, HTTP_ORIGIN="https://evil.example.net")
    # then the preflight is answered (it names no tenant), the shop's call too, the other site's is refused
    assert preflight.status_code == 204
    assert "X-Session-Token" in preflight["Access-Control-Allow-Headers"]
    assert "PUT" in preflight["Access-Control-Allow-Methods"]
    assert allowed.status_code == 200
    assert allowed["Access-Control-Allow-Origin"] == "https://shop.example.com"
    assert len(allowed.json()["memories"]) == 1
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "origin_not_allowed"
    assert "memories" not in refused.json()
