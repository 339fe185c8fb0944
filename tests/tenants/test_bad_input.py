"""Bad input answers 4xx with the error shape, never a 500, never a lost row."""

from __future__ import annotations

import pytest

from tenants.models import EndUser
from tenants.rls import tenant_scope


def _end_users(ctx) -> int:
    with tenant_scope(ctx.tenant):
        return EndUser.objects.for_tenant(ctx.tenant).count()


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        ('{"end_user_id": ', "application/json", 400, "malformed_json"),
        ("end_user_id=x", "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
        ('{"metadata": {}}', "application/json", 400, "invalid_request"),
        ('{"end_user_id": ""}', "application/json", 400, "invalid_request"),
        ('{"end_user_id": "u", "metadata": "not an object"}', "application/json", 400, "invalid_request"),
        ('{"end_user_id": "' + "x" * 201 + '"}', "application/json", 400, "invalid_request"),
        ("[1, 2, 3]", "application/json", 400, "invalid_request"),
    ],
)
def test_bad_session_bodies_are_rejected_cleanly(acme, body, content_type, status, code):
    # given one existing end user
    acme.client.post("/api/v1/sessions", {"end_user_id": "kept"}, format="json")
    before = _end_users(acme)
    # when
    response = acme.client.generic("POST", "/api/v1/sessions", body, content_type=content_type)
    # then
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    assert _end_users(acme) == before


def test_huge_body_is_413_and_stores_nothing(acme, settings):
    before = _end_users(acme)
    body = '{"end_user_id": "u", "metadata": {"blob": "' + "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 10) + '"}}'
    response = acme.client.generic("POST", "/api/v1/sessions", body, content_type="application/json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "request_too_large"
    assert _end_users(acme) == before


def test_oversized_metadata_is_400(acme):
    response = acme.client.post("/api/v1/sessions", {"end_user_id": "u", "metadata": {"k": "x" * 9000}}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "metadata_too_large"


def test_unknown_api_path_is_json_404(acme):
    response = acme.client.get("/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_wrong_method_is_405(acme):
    response = acme.client.delete("/api/v1/sessions")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
