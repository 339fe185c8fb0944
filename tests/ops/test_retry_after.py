"""Every 429 tells the client when to come back: an integer ``Retry-After`` in seconds (API.md, rate limits)."""

from __future__ import annotations

import pytest
from rest_framework import exceptions as drf_exc

from config.errors import ApiError, api_exception_handler
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_rate_limited_message_carries_retry_after(acme, fake_ollama):
    # given: one message a minute for the session, already sent
    acme.tenant.settings = {"rate_limits": {"per_session_per_minute": 1}}
    acme.tenant.save(update_fields=["settings"])
    sid = open_session(acme, "hasty")["session_id"]
    assert acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "一"}, format="json").status_code == 200
    # when
    limited = acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "二"}, format="json")
    # then
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "rate_limited"
    assert limited.headers["Retry-After"].isdigit()
    assert 1 <= int(limited.headers["Retry-After"]) <= 60


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (ApiError("slow down", code="rate_limited", status=429), "60"),
        (ApiError("slow down", code="rate_limited", status=429, retry_after=2.2), "3"),
        (drf_exc.Throttled(wait=4.5), "5"),
        (drf_exc.Throttled(), "60"),
    ],
)
def test_every_429_of_the_error_handler_has_an_integer_retry_after(exc, expected):
    response = api_exception_handler(exc, {})
    assert response.status_code == 429
    assert response.headers["Retry-After"] == expected


def test_other_errors_have_no_retry_after_unless_they_name_one():
    assert "Retry-After" not in api_exception_handler(ApiError("bad"), {}).headers
    named = api_exception_handler(ApiError("busy", code="turn_in_progress", status=409, retry_after=1), {})
    assert named.headers["Retry-After"] == "1"
