"""Throttles per API key on session creation, the memory endpoints and recall:
past the rate, 429 ``rate_limited``; another key (another tenant's) counts on
its own."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache

from tests.factories import open_session_obj


@pytest.fixture
def rates(settings: Any) -> Any:
    """Sets low rates for the test (DRF re-reads its settings when they change)."""

    def set_rates(**scopes: str) -> None:
        settings.REST_FRAMEWORK = {
            **settings.REST_FRAMEWORK,
            "DEFAULT_THROTTLE_RATES": {**settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], **scopes},
        }

    return set_rates


def _speak_for_a_session(ctx: Any, end_user: str) -> Any:
    session = open_session_obj(ctx, end_user)
    ctx.client.credentials(HTTP_AUTHORIZATION=f"Bearer {ctx.api_key}", HTTP_X_SESSION_ID=str(session.pk))
    return ctx.client


def _recall(client: Any) -> Any:
    return client.post("/api/v1/memories/recall", {"query": "我的手机号"}, format="json")


def test_the_recall_past_the_rate_is_429_and_another_tenant_is_not_affected(acme, globex, rates):
    # given 3 recalls a minute per key
    rates(recall="3/min")
    acme_client = _speak_for_a_session(acme, "alice")
    globex_client = _speak_for_a_session(globex, "gina")
    # when
    allowed = [_recall(acme_client).status_code for _ in range(3)]
    refused = _recall(acme_client)
    # then
    assert allowed == [200, 200, 200]
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited"
    assert int(refused["Retry-After"]) >= 1  # DRF's Throttled goes through config.errors' handler
    assert _recall(globex_client).status_code == 200
    # and the other scopes count on their own
    assert acme_client.get("/api/v1/memories").status_code == 200


def test_session_creation_past_the_rate_is_429(acme, globex, rates):
    # given
    rates(sessions="2/min")
    # when
    statuses = [
        acme.client.post("/api/v1/sessions", {"end_user_id": f"u{n}"}, format="json").status_code for n in range(3)
    ]
    # then
    assert statuses == [201, 201, 429]
    assert globex.client.post("/api/v1/sessions", {"end_user_id": "u"}, format="json").status_code == 201


def test_memory_endpoints_past_the_rate_are_429(acme, rates):
    # given
    rates(memories="2/min")
    client = _speak_for_a_session(acme, "alice")
    # when
    created = client.post("/api/v1/memories", {"type": "user_profile", "key": "name", "content": "张伟"}, format="json")
    listed = client.get("/api/v1/memories")
    refused = client.get(f"/api/v1/memories/{created.json()['id']}")
    # then
    assert (created.status_code, listed.status_code) == (201, 200)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited"


def test_an_unknown_key_is_refused_before_it_is_counted(db, anon_client, rates):
    # given
    rates(sessions="1/min")
    anon_client.credentials(HTTP_AUTHORIZATION="Bearer mdk_live_nope")
    # then
    for _ in range(3):
        assert anon_client.post("/api/v1/sessions", {"end_user_id": "u"}, format="json").status_code == 401


def _redis_up() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=0.5):
            return True
    except OSError:
        return False


def _redis_cache(location: str) -> dict[str, Any]:
    return {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": location,
            "KEY_PREFIX": f"memdesk-test-{uuid.uuid4().hex[:8]}",
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }


def test_with_redis_the_count_lives_in_redis(acme, rates, settings):
    if not _redis_up():
        pytest.skip("no Redis on 127.0.0.1:6379 (.ci/run starts one)")
    # given the cache config/settings.py builds when REDIS_URL is set
    settings.CACHES = _redis_cache("redis://127.0.0.1:6379/0")
    rates(sessions="2/min")
    # when
    statuses = [acme.client.post("/api/v1/sessions", {"end_user_id": "u"}, format="json").status_code for _ in "abc"]
    # then the third is refused, and the count is in Redis, where every worker process reads it
    assert statuses == [201, 201, 429]
    [key] = acme.tenant.api_keys.all()
    assert len(cache.get(f"throttle:sessions:{acme.tenant.pk}:{key.pk}")) == 2


def test_an_unreachable_redis_lets_requests_through(acme, rates, settings):
    # given a cache on a port where nothing listens
    settings.CACHES = _redis_cache("redis://127.0.0.1:1/0")
    rates(sessions="1/min")
    # then the throttle steps aside rather than failing every request
    for _ in range(2):
        assert acme.client.post("/api/v1/sessions", {"end_user_id": "u"}, format="json").status_code == 201


def test_settings_use_redis_for_the_cache_when_redis_url_is_set(tmp_path):
    # given
    environ = {k: v for k, v in os.environ.items() if not k.startswith("THROTTLE_")}
    environ.update(
        REDIS_URL="redis://127.0.0.1:6379/2", THROTTLE_RECALL="30/s", MEMDESK_DATA_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="config.settings",
    )  # fmt: skip
    code = (
        "import json, config.settings as s; print(json.dumps([s.CACHES, s.REST_FRAMEWORK['DEFAULT_THROTTLE_RATES']]))"
    )
    # when
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], env=environ, capture_output=True,
        text=True, timeout=60, check=True,
    )  # fmt: skip
    # then
    caches, rates = json.loads(result.stdout.strip().splitlines()[-1])
    assert caches["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    assert caches["default"]["LOCATION"] == "redis://127.0.0.1:6379/2"
    assert rates == {
        "sessions": "600/min",
        "memories": "600/min",
        "recall": "30/s",
        "imports": "1200/min",
        "knowledge": "600/min",
    }
