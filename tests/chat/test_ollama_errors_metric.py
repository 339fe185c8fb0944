"""A failed model call counts in ``memdesk_ollama_errors_total{code}`` on /metrics, by the error code the
client is told: the MemdeskOllamaErrors and MemdeskOllamaUnavailable alerts (platform/prometheus/alerts.yml)
read nothing else."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from testkit.fake_ollama import FakeOllama, Reply
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)


def _ollama_errors(client) -> dict[str, float]:
    """``memdesk_ollama_errors_total`` by code, as a Prometheus scrape of /metrics reads it."""
    response = client.get("/metrics")
    assert response.status_code == 200
    return {
        sample.labels["code"]: sample.value
        for family in text_string_to_metric_families(response.content.decode())
        if family.name == "memdesk_ollama_errors"
        for sample in family.samples
        if sample.name == "memdesk_ollama_errors_total"
    }


def _counted_since(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {code: after[code] - before.get(code, 0) for code in after if after[code] != before.get(code, 0)}


def _send(ctx, sid):
    return ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "你好"}, format="json")


def test_a_turn_the_model_failed_counts_one_llm_unavailable_error(acme, fake_ollama, client):
    # given a model that answers HTTP 500 (its runner died)
    sid = open_session(acme, "zhangwei")["session_id"]
    fake_ollama.script(Reply(status=500))
    before = _ollama_errors(client)

    # when a turn runs
    response = _send(acme, sid)

    # then the client is told llm_unavailable, and /metrics counts exactly that one failure under its code
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "llm_unavailable"
    assert _counted_since(before, _ollama_errors(client)) == {"llm_unavailable": 1}


def test_a_model_missing_from_the_host_counts_under_model_not_found(acme, settings, client):
    # given an Ollama host without the configured model
    from chat.llm import clear_context_cache

    sid = open_session(acme, "zhangwei")["session_id"]
    before = _ollama_errors(client)
    with FakeOllama(models=["llama3:8b"]) as fake:
        settings.OLLAMA_HOST = fake.host
        clear_context_cache()

        # when a turn runs
        response = _send(acme, sid)
    clear_context_cache()

    # then it is counted under the code the client got
    assert response.json()["error"]["code"] == "model_not_found"
    assert _counted_since(before, _ollama_errors(client)) == {"model_not_found": 1}


def test_a_turn_the_model_answered_counts_no_error(acme, fake_ollama, client):
    # given a model that answers
    sid = open_session(acme, "zhangwei")["session_id"]
    fake_ollama.script("您好，请讲。")
    before = _ollama_errors(client)

    # when a turn runs
    response = _send(acme, sid)

    # then nothing is counted
    assert response.status_code == 200, response.content
    assert _counted_since(before, _ollama_errors(client)) == {}
