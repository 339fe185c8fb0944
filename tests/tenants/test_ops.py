"""Operations endpoints: liveness, readiness, schema, metrics."""

from __future__ import annotations


def test_healthz(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_reports_each_dependency(client, db, settings):
    settings.OLLAMA_HOST = "http://127.0.0.1:9"  # nothing listens there
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 503
    assert body["status"] == "unavailable"
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["database"]["pgvector"]
    assert body["checks"]["channel_layer"]["ok"] is True
    assert body["checks"]["ollama"]["ok"] is False
    assert body["checks"]["ollama"]["error"]


def test_openapi_schema_lists_the_session_paths(client, db):
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert "/api/v1/sessions" in schema["paths"]
    assert "/api/v1/sessions/{session_id}" in schema["paths"]


def test_metrics_exposes_prometheus_text(client, db):
    client.get("/healthz")
    response = client.get("/metrics")
    assert response.status_code == 200
    assert b"django_http_requests_total_by_method_total" in response.content
