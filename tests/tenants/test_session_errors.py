"""The session_id error matrix of API.md, on the REST API."""

from __future__ import annotations

import uuid

from django.utils import timezone

from conversations.models import ChatSession
from tenants.rls import tenant_scope
from tests.factories import open_session


def test_open_session_returns_contract_fields(acme):
    # when
    body = open_session(acme, "customer-42", metadata={"page": "/checkout"})
    # then
    assert set(body) == {"session_id", "token", "expires_at", "ws_url"}
    uuid.UUID(body["session_id"])
    assert body["ws_url"].startswith("ws://testserver/ws/chat/?session_id=" + body["session_id"])
    detail = acme.client.get(f"/api/v1/sessions/{body['session_id']}").json()
    assert detail["end_user_id"] == "customer-42"
    assert detail["status"] == "open"
    assert detail["turns"] == 0


def test_session_id_not_a_uuid_is_400_session_id_invalid(acme):
    response = acme.client.get("/api/v1/sessions/not-a-uuid")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "session_id_invalid"


def test_unknown_session_is_404_session_not_found(acme):
    response = acme.client.get(f"/api/v1/sessions/{uuid.uuid4()}")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "session_not_found"


def test_other_tenants_session_is_404_exactly_like_unknown(acme, globex):
    # given a session of acme
    sid = open_session(acme)["session_id"]
    # when globex asks for it, reads or closes it
    responses = [
        globex.client.get(f"/api/v1/sessions/{sid}"),
        globex.client.post(f"/api/v1/sessions/{sid}/close"),
    ]
    # then it is "not found", with no data, and acme's session is still open
    for response in responses:
        assert response.status_code == 404
        assert response.json() == {"error": {"code": "session_not_found", "message": "No such session."}}
    assert acme.client.get(f"/api/v1/sessions/{sid}").json()["status"] == "open"


def test_closed_session_is_410_session_closed(acme):
    sid = open_session(acme)["session_id"]
    closed = acme.client.post(f"/api/v1/sessions/{sid}/close")
    assert closed.status_code == 200
    assert closed.json()["status"] == "closed"
    response = acme.client.get(f"/api/v1/sessions/{sid}")
    assert response.status_code == 410
    assert response.json()["error"]["code"] == "session_closed"


def test_expired_session_is_410_session_closed(acme):
    sid = open_session(acme)["session_id"]
    with tenant_scope(acme.tenant):
        ChatSession.objects.for_tenant(acme.tenant).filter(pk=sid).update(expires_at=timezone.now())
    response = acme.client.get(f"/api/v1/sessions/{sid}")
    assert response.status_code == 410
    assert response.json()["error"]["code"] == "session_closed"


def test_no_api_key_is_401(anon_client, acme):
    sid = open_session(acme)["session_id"]
    for response in (
        anon_client.post("/api/v1/sessions", {"end_user_id": "x"}, format="json"),
        anon_client.get(f"/api/v1/sessions/{sid}"),
    ):
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "authentication_required"


def test_wrong_api_key_is_401_invalid_api_key(anon_client, acme):
    anon_client.credentials(HTTP_AUTHORIZATION="Bearer mdk_live_not-a-real-key")
    response = anon_client.post("/api/v1/sessions", {"end_user_id": "x"}, format="json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_malformed_authorization_header_is_401(anon_client):
    anon_client.credentials(HTTP_AUTHORIZATION="Basic dXNlcjpwYXNz")
    response = anon_client.post("/api/v1/sessions", {"end_user_id": "x"}, format="json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_authorization"
