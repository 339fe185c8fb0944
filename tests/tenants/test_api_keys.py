"""API keys: shown once, stored only as an HMAC, revocable."""

from __future__ import annotations

import json

from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from tenants.models import API_KEY_PREFIX, ApiKey


def test_plain_key_is_never_stored(acme):
    # when we look at every column of every api key row
    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(k)::text FROM tenants_apikey k")
        rows = [r[0] for r in cursor.fetchall()]
    # then the plain key appears nowhere, only a visible prefix
    assert rows
    assert all(acme.api_key not in row for row in rows)
    key = ApiKey.objects.for_tenant(acme.tenant).get()
    assert acme.api_key.startswith(key.prefix)
    assert key.prefix.startswith(API_KEY_PREFIX)
    assert len(key.key_hash) == 64


def test_key_authenticates_and_records_last_use(acme):
    response = acme.client.post("/api/v1/sessions", {"end_user_id": "u"}, format="json")
    assert response.status_code == 201
    key = ApiKey.objects.for_tenant(acme.tenant).get()
    assert key.last_used_at is not None


def test_revoked_key_is_refused(acme):
    ApiKey.objects.for_tenant(acme.tenant).update(revoked_at=timezone.now())
    response = acme.client.post("/api/v1/sessions", {"end_user_id": "u"}, format="json")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_create_tenant_prints_json_with_a_working_key(db, capsys):
    from rest_framework.test import APIClient

    # when
    call_command("create_tenant", "initech", "--name", "Initech")
    # then the last line is the JSON object of the contract
    last = capsys.readouterr().out.strip().splitlines()[-1]
    data = json.loads(last)
    assert set(data) >= {"tenant_id", "slug", "api_key"}
    assert data["slug"] == "initech"
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {data['api_key']}")
    assert client.post("/api/v1/sessions", {"end_user_id": "u"}, format="json").status_code == 201


def test_create_tenant_rejects_a_bad_slug(db):
    import pytest
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="slug"):
        call_command("create_tenant", "Not A Slug")
