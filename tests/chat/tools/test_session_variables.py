"""Session variables (S1): written by the tenant's back end and by a tool's answer, read by the model.

Seed: 「session_variables: 当前会话的临时变量（如{"cart_items": 3, "discount_applied": True}）」 — part of the
execution context the runtime assembles, never chat text."""

from __future__ import annotations

import json

import pytest

from chat.models import ExecutionContext
from tenants.rls import tenant_scope
from testkit.fake_ollama import Reply
from tests.chat.tools.backend import Answer
from tests.chat.tools.conftest import register
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

CALL = {"function": {"name": "query_order", "arguments": {"order_id": "A123"}}}


def _patch(ctx, sid, body):
    return ctx.client.patch(f"/api/v1/sessions/{sid}/context", body, format="json")


def _execution_context(request: dict) -> dict:
    system = request["messages"][0]["content"]
    line = next(li for li in system.split("\n") if li.startswith("<|execution_context|>"))
    return json.loads(line.removeprefix("<|execution_context|>"))


def _stored(ctx, sid) -> ExecutionContext:
    with tenant_scope(ctx.tenant):
        return ExecutionContext.objects.for_tenant(ctx.tenant).get(session_id=sid)


def test_the_back_end_sets_variables_and_the_next_prompt_carries_them(acme, fake_ollama):
    """「session_variables: 当前会话的临时变量」: set by the tenant's back end, seen by the model."""
    # given
    sid = open_session(acme)["session_id"]
    # when the back end sets two variables, then a turn runs
    response = _patch(acme, sid, {"session_variables": {"cart_items": 3, "discount_applied": True}})
    acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "购物车里有什么"}, format="json")
    # then the answer is the whole execution context, and the model saw the variables as context JSON
    assert response.status_code == 200, response.content
    assert response.json()["session_variables"] == {"cart_items": 3, "discount_applied": True}
    assert _execution_context(fake_ollama.chat_requests[-1])["session_variables"] == {
        "cart_items": 3,
        "discount_applied": True,
    }
    assert acme.client.get(f"/api/v1/sessions/{sid}/context").json()["session_variables"] == {
        "cart_items": 3,
        "discount_applied": True,
    }


def test_keys_merge_and_null_removes_one_each_write_a_new_version(acme):
    """Merged like the seed's dictionary: a new value replaces, ``null`` removes (API.md)."""
    # given
    sid = open_session(acme)["session_id"]
    _patch(acme, sid, {"session_variables": {"cart_items": 3, "discount_applied": True}})
    before = _stored(acme, sid).version
    # when
    response = _patch(acme, sid, {"session_variables": {"cart_items": 4, "discount_applied": None, "coupon": "C9"}})
    # then
    assert response.json()["session_variables"] == {"cart_items": 4, "coupon": "C9"}
    assert _stored(acme, sid).version == before + 1


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"session_variables": {"notes": "x" * 5000}}, "context_too_large"),
        ({"session_variables": ["cart_items", 3]}, "invalid_request"),
        ({"session_variables": {"": 1}}, "invalid_request"),
        ({}, "invalid_request"),
    ],
)
def test_a_refused_change_says_why_and_leaves_the_variables_as_they_were(acme, body, code):
    # given variables already set
    sid = open_session(acme)["session_id"]
    _patch(acme, sid, {"session_variables": {"cart_items": 3}})
    before = _stored(acme, sid)
    # when a change that cannot be kept arrives
    response = _patch(acme, sid, body)
    # then a clear 400, and nothing changed
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    after = _stored(acme, sid)
    assert (after.session_variables, after.version) == (before.session_variables, before.version)


def test_another_tenants_session_is_not_found(acme, globex):
    # given acme's session
    sid = open_session(acme)["session_id"]
    # when globex's key tries to set its variables
    response = _patch(globex, sid, {"session_variables": {"cart_items": 99}})
    # then it does not exist for globex, and acme's context is untouched
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "session_not_found"
    assert acme.client.get(f"/api/v1/sessions/{sid}/context").json()["session_variables"] == {}


def test_a_tools_answer_sets_variables_for_the_next_model_call(acme, backend, fake_ollama):
    """A tool's answer ``{"result": …, "session_variables": {…}}`` updates the variables with the answer."""
    # given a tool whose answer sets a variable
    register(acme, backend.url)
    sid = open_session(acme)["session_id"]
    backend.responder = lambda r: Answer(json={"result": {"status": "shipped"}, "session_variables": {"cart_items": 3}})
    fake_ollama.script(Reply(tool_calls=[CALL]), "已发货")
    # when the model calls it
    acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "查订单 A123"}, format="json")
    # then the next model call sees the variable in the context, and the answer without it
    context = _execution_context(fake_ollama.chat_requests[-1])
    assert context["session_variables"] == {"cart_items": 3}
    assert context["last_tool_result"] == {"result": {"status": "shipped"}}
