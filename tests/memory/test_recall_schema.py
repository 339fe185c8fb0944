"""POST /api/v1/memories/recall answers exactly the fields its OpenAPI schema (``RecallOut``) declares."""

from __future__ import annotations


def test_the_recall_answer_and_its_schema_name_the_same_fields(memapi, client):
    # given the published schema
    schema = client.get("/api/schema/?format=json").json()
    recall_out = schema["components"]["schemas"]["RecallOut"]

    # when a recall runs
    response = memapi.post("/api/v1/memories/recall", {"query": "我的手机号"}, format="json")

    # then every field it answers is declared, with rewritten_query nullable, and every declared one is there
    assert response.status_code == 200, response.content
    assert set(response.json()) == set(recall_out["properties"])
    assert recall_out["properties"]["rewritten_query"]["nullable"] is True
    assert set(recall_out["required"]) == set(recall_out["properties"])
