"""POST/GET/DELETE /api/v1/tools: validation with clear codes, tenant isolation."""

from __future__ import annotations

import pytest

from tests.chat.tools.conftest import ORDER_SCHEMA, register

pytestmark = pytest.mark.django_db


def _post(ctx, **overrides):
    body = {
        "name": "query_order",
        "description": "Look up an order",
        "parameters": ORDER_SCHEMA,
        "url": "https://shop.example.com/tools/order",
        **overrides,
    }
    return ctx.client.post("/api/v1/tools", body, format="json")


def test_a_registered_tool_is_listed_with_its_defaults(acme):
    # when
    response = _post(acme)
    # then
    assert response.status_code == 201, response.content
    created = response.json()
    assert created["name"] == "query_order"
    assert created["timeout_s"] == 10
    assert created["parameters"] == ORDER_SCHEMA
    listed = acme.client.get("/api/v1/tools").json()["tools"]
    assert [t["name"] for t in listed] == ["query_order"]
    assert listed[0]["url"] == "https://shop.example.com/tools/order"


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"parameters": {"type": "object", "properties": {"x": {"type": "strnig"}}}}, "invalid_schema"),
        ({"parameters": {"type": "object", "required": "order_id"}}, "invalid_schema"),
        ({"parameters": {"type": "string"}}, "invalid_schema"),
        ({"parameters": "not a schema"}, "invalid_schema"),
        ({"url": "ftp://shop.example.com/x"}, "invalid_url"),
        ({"url": "/relative/path"}, "invalid_url"),
        ({"url": 42}, "invalid_url"),
        ({"name": "1starts_with_digit"}, "invalid_tool_name"),
        ({"name": "has-dash"}, "invalid_tool_name"),
        ({"name": "x" * 65}, "invalid_tool_name"),
        ({"name": ""}, "invalid_tool_name"),
        ({"timeout_s": 0}, "invalid_timeout"),
        ({"timeout_s": 61}, "invalid_timeout"),
        ({"timeout_s": "5"}, "invalid_timeout"),
        ({"timeout_s": True}, "invalid_timeout"),
    ],
)
def test_bad_registrations_are_clear_400s(acme, overrides, code):
    # when
    response = _post(acme, **overrides)
    # then
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code
    assert acme.client.get("/api/v1/tools").json()["tools"] == []


def test_a_missing_field_is_invalid_request(acme):
    response = acme.client.post("/api/v1/tools", {"name": "x", "url": "https://a.example"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


def test_a_duplicate_name_is_409_tool_exists(acme):
    # given
    register(acme, "https://shop.example.com/a")
    # when
    response = _post(acme, url="https://shop.example.com/b")
    # then
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "tool_exists"
    assert [t["url"] for t in acme.client.get("/api/v1/tools").json()["tools"]] == ["https://shop.example.com/a"]


def test_the_same_name_in_another_tenant_is_another_tool(acme, globex):
    register(acme, "https://acme.example.com/t")
    register(globex, "https://globex.example.com/t")
    assert acme.client.get("/api/v1/tools").json()["tools"][0]["url"] == "https://acme.example.com/t"


def test_another_tenant_can_neither_see_nor_delete_a_tool(acme, globex):
    # given
    register(acme, "https://acme.example.com/t")
    # when
    listed = globex.client.get("/api/v1/tools")
    deleted = globex.client.delete("/api/v1/tools/query_order")
    # then
    assert listed.json() == {"tools": []}
    assert deleted.status_code == 404
    assert deleted.json()["error"]["code"] == "tool_not_found"
    assert len(acme.client.get("/api/v1/tools").json()["tools"]) == 1


def test_delete_removes_the_tool_and_a_second_delete_is_404(acme):
    # given
    register(acme, "https://acme.example.com/t")
    # when
    first = acme.client.delete("/api/v1/tools/query_order")
    second = acme.client.delete("/api/v1/tools/query_order")
    # then
    assert first.status_code == 204
    assert second.status_code == 404
    assert second.json()["error"]["code"] == "tool_not_found"
    assert acme.client.get("/api/v1/tools").json()["tools"] == []


def test_tools_need_an_api_key(anon_client):
    response = anon_client.get("/api/v1/tools")
    assert response.status_code == 401
