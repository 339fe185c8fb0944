"""The memory endpoints of API.md and their error codes."""

from __future__ import annotations

import uuid

import pytest

from tests.factories import open_session_obj


def test_create_returns_the_memory_unit_shape(memapi, acme_session):
    # when
    response = memapi.post(
        "/api/v1/memories",
        {"type": "user_profile", "key": "phone", "content": "用户手机号 13912345678", "data": {"phone": "13912345678"}},
        format="json",
    )
    # then
    assert response.status_code == 201, response.content
    body = response.json()
    assert set(body) == {
        "id", "type", "key", "content", "data", "session_id", "end_user_id", "source_message_id", "lifespan", "expired",
    }  # fmt: skip
    assert body["end_user_id"] == "alice"
    assert body["session_id"] is None  # user_profile belongs to the end user
    assert body["lifespan"]["expires_in"] == 86400
    assert body["lifespan"]["relevance_score"] == 1.0
    assert body["lifespan"]["created_at"].endswith("Z")
    assert body["expired"] is False


def test_same_key_replaces_instead_of_duplicating(memapi):
    first = memapi.post(
        "/api/v1/memories", {"type": "user_profile", "key": "phone", "content": "手机 138"}, format="json"
    )
    second = memapi.post(
        "/api/v1/memories", {"type": "user_profile", "key": "phone", "content": "手机 139"}, format="json"
    )
    assert first.status_code == second.status_code == 201
    listed = memapi.get("/api/v1/memories").json()["memories"]
    assert [m["content"] for m in listed] == ["手机 139"]
    history = memapi.get("/api/v1/memories?include_expired=true").json()["memories"]
    assert {m["content"] for m in history} == {"手机 138", "手机 139"}


def test_session_state_is_scoped_to_its_session(memapi, acme, acme_session):
    memapi.post(
        "/api/v1/memories", {"type": "session_state", "key": "topic", "content": "在查 10 月账单"}, format="json"
    )
    memapi.post("/api/v1/memories", {"type": "user_profile", "key": "name", "content": "用户姓名 张伟"}, format="json")
    # a second session of the same end user
    other = open_session_obj(acme, "alice")
    acme.client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}", HTTP_X_SESSION_ID=str(other.pk))
    contents = [m["content"] for m in acme.client.get("/api/v1/memories").json()["memories"]]
    assert contents == ["用户姓名 张伟"]


def test_get_patch_expire_feedback_delete(memapi):
    mid = memapi.post(
        "/api/v1/memories", {"type": "fact_reference", "content": "订单 ABC123 已发货"}, format="json"
    ).json()["id"]
    assert memapi.get(f"/api/v1/memories/{mid}").json()["content"] == "订单 ABC123 已发货"

    patched = memapi.patch(f"/api/v1/memories/{mid}", {"content": "订单 ABC123 已签收"}, format="json")
    assert patched.status_code == 200
    assert patched.json()["content"] == "订单 ABC123 已签收"

    used = memapi.post(f"/api/v1/memories/{mid}/feedback", {"event": "used"}, format="json")
    assert used.json()["lifespan"]["relevance_score"] == pytest.approx(1.1)

    expired = memapi.post(f"/api/v1/memories/{mid}/expire")
    assert expired.status_code == 200
    assert expired.json()["expired"] is True
    assert memapi.get("/api/v1/memories").json()["memories"] == []

    assert memapi.delete(f"/api/v1/memories/{mid}").status_code == 204
    assert memapi.get(f"/api/v1/memories/{mid}").status_code == 404


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"type": "user_profile", "content": "x" * 151}, "content_too_long"),
        ({"type": "diary", "content": "hello"}, "unknown_type"),
        ({"type": "user_profile"}, "invalid_request"),
        ({"type": "user_profile", "content": ""}, "invalid_request"),
        ({"type": "user_profile", "content": "ok", "expires_in": 0}, "invalid_request"),
        ({"type": "user_profile", "content": "ok", "expires_in": "soon"}, "invalid_request"),
        ({"type": "user_profile", "content": "ok", "key": "has space"}, "invalid_request"),
        ({"type": "user_profile", "content": 42}, "invalid_request"),
    ],
)
def test_bad_memory_bodies_are_rejected_and_nothing_is_stored(memapi, body, code):
    memapi.post("/api/v1/memories", {"type": "user_profile", "key": "name", "content": "张伟"}, format="json")
    response = memapi.post("/api/v1/memories", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code
    assert [m["content"] for m in memapi.get("/api/v1/memories").json()["memories"]] == ["张伟"]


def test_content_of_exactly_150_characters_is_accepted(memapi):
    response = memapi.post("/api/v1/memories", {"type": "user_profile", "content": "字" * 150}, format="json")
    assert response.status_code == 201


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("?as_of=yesterday", "invalid_as_of"),
        ("?type=diary", "unknown_type"),
        ("?include_expired=perhaps", "invalid_request"),
    ],
)
def test_bad_list_queries(memapi, query, code):
    response = memapi.get("/api/v1/memories" + query)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code


@pytest.mark.parametrize(
    ("k", "code"), [(0, "invalid_k"), (51, "invalid_k"), ("five", "invalid_k"), (True, "invalid_k")]
)
def test_bad_k_in_recall(memapi, k, code):
    response = memapi.post("/api/v1/memories/recall", {"query": "订单", "k": k}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code


def test_bad_as_of_in_recall(memapi):
    response = memapi.post("/api/v1/memories/recall", {"query": "订单", "as_of": "next tuesday"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_as_of"


def test_unknown_feedback_event(memapi):
    mid = memapi.post("/api/v1/memories", {"type": "user_profile", "content": "张伟"}, format="json").json()["id"]
    response = memapi.post(f"/api/v1/memories/{mid}/feedback", {"event": "loved"}, format="json")
    assert response.status_code == 400
    assert memapi.get(f"/api/v1/memories/{mid}").json()["lifespan"]["relevance_score"] == 1.0


def test_session_header_errors(acme, acme_session):
    client = acme.client
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}")
    missing = client.get("/api/v1/memories")
    assert missing.status_code == 400
    assert missing.json()["error"]["code"] == "session_id_required"
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}", HTTP_X_SESSION_ID="123")
    assert client.get("/api/v1/memories").json()["error"]["code"] == "session_id_invalid"
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}", HTTP_X_SESSION_ID=str(uuid.uuid4()))
    unknown = client.get("/api/v1/memories")
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "session_not_found"


def test_other_tenant_cannot_use_acme_session_or_memory(memapi, acme_session, globex):
    mid = memapi.post("/api/v1/memories", {"type": "user_profile", "content": "张伟"}, format="json").json()["id"]
    globex.client.credentials(HTTP_AUTHORIZATION=f"Bearer {globex.api_key}", HTTP_X_SESSION_ID=str(acme_session.pk))
    for response in (
        globex.client.get("/api/v1/memories"),
        globex.client.get(f"/api/v1/memories/{mid}"),
        globex.client.post("/api/v1/memories", {"type": "user_profile", "content": "intruder"}, format="json"),
        globex.client.post("/api/v1/memories/recall", {"query": "张伟"}, format="json"),
        globex.client.delete(f"/api/v1/memories/{mid}"),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "session_not_found"
    assert memapi.get(f"/api/v1/memories/{mid}").json()["content"] == "张伟"


def test_other_end_users_memory_is_not_found(memapi, acme):
    mid = memapi.post("/api/v1/memories", {"type": "user_profile", "content": "alice 的地址"}, format="json").json()[
        "id"
    ]
    bob = open_session_obj(acme, "bob")
    acme.client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}", HTTP_X_SESSION_ID=str(bob.pk))
    for response in (
        acme.client.get(f"/api/v1/memories/{mid}"),
        acme.client.patch(f"/api/v1/memories/{mid}", {"content": "hijack"}, format="json"),
        acme.client.post(f"/api/v1/memories/{mid}/expire"),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "memory_not_found"
    assert acme.client.get("/api/v1/memories").json()["memories"] == []


def test_malformed_memory_id_is_404(memapi):
    response = memapi.get("/api/v1/memories/not-a-uuid")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "memory_not_found"
