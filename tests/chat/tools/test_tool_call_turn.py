"""A turn in which the model calls a tenant tool: the signed call, the
execution context in the next prompt and in GET …/context, the audit message."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from conversations.models import Message
from tenants.rls import tenant_scope
from testkit.fake_ollama import Reply
from tests.chat.tools.backend import Answer
from tests.chat.tools.conftest import register
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

CALL = {"function": {"name": "query_order", "arguments": {"order_id": "A123"}}}


def _send(ctx, sid, text):
    return ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": text}, format="json")


def _execution_context(system_prompt: str) -> dict:
    line = next(li for li in system_prompt.split("\n") if li.startswith("<|execution_context|>"))
    return json.loads(line.removeprefix("<|execution_context|>"))


def test_the_tool_is_called_with_a_signed_body(acme, backend, fake_ollama):
    # given
    register(acme, backend.url)
    sid = open_session(acme, "zhangwei")["session_id"]
    backend.responder = lambda r: Answer(json={"order_id": "A123", "status": "shipped"})
    fake_ollama.script(Reply(tool_calls=[CALL]), "您的订单 A123 已发货。")
    # when
    response = _send(acme, sid, "帮我查一下订单 A123")
    # then
    assert response.status_code == 200, response.content
    assert response.json()["reply"] == "您的订单 A123 已发货。"
    [call] = backend.requests
    assert call.json == {
        "tool": "query_order",
        "arguments": {"order_id": "A123"},
        "session_id": sid,
        "end_user_id": "zhangwei",
    }
    expected = "sha256=" + hmac.new(acme.tenant.signing_secret.encode(), call.raw, hashlib.sha256).hexdigest()
    assert call.headers["X-Memdesk-Signature"] == expected
    assert call.headers["Content-Type"].startswith("application/json")


def test_the_model_is_offered_the_tenants_tools(acme, backend, fake_ollama):
    # given
    tool = register(acme, backend.url)
    sid = open_session(acme)["session_id"]
    # when
    _send(acme, sid, "你好")
    # then
    [request] = fake_ollama.chat_requests
    [offered] = request["tools"]
    assert offered["type"] == "function"
    assert offered["function"]["name"] == "query_order"
    assert offered["function"]["description"] == tool["description"]
    # Ollama's tool format carries type, properties and required; memdesk
    # itself checks the arguments against the whole schema (minLength, …).
    assert offered["function"]["parameters"]["required"] == ["order_id"]
    assert offered["function"]["parameters"]["properties"]["order_id"]["type"] == "string"
    assert backend.requests == []


def test_the_next_model_call_sees_the_result_as_json_not_as_chat_text(acme, backend, fake_ollama):
    # given
    register(acme, backend.url)
    sid = open_session(acme)["session_id"]
    backend.responder = lambda r: Answer(json={"order_id": "A123", "status": "shipped", "eta": "2025-06-01"})
    fake_ollama.script(Reply(tool_calls=[CALL]), "已发货")
    # when
    _send(acme, sid, "查订单 A123")
    # then
    first, second = fake_ollama.chat_requests
    result = {"order_id": "A123", "status": "shipped", "eta": "2025-06-01"}
    system = second["messages"][0]["content"]
    assert '<|execution_context|>{"current_tool":"query_order","tool_args":{"order_id":"A123"},' in system
    assert _execution_context(system) == {
        "current_tool": "query_order",
        "tool_args": {"order_id": "A123"},
        "last_tool_result": result,
        "session_variables": {},
    }
    assert _execution_context(first["messages"][0]["content"])["last_tool_result"] is None
    *_, user, assistant, tool = second["messages"]
    assert user == {"role": "user", "content": "查订单 A123"}
    assert assistant["role"] == "assistant"
    assert assistant["tool_calls"][0]["function"] == CALL["function"]
    assert tool["role"] == "tool"
    assert json.loads(tool["content"]) == result
    assert tool["content"] == json.dumps(result, ensure_ascii=False, separators=(",", ":"))
    assert not any(m["role"] == "assistant" and "shipped" in (m.get("content") or "") for m in second["messages"]), (
        "the result never travels as assistant chat text"
    )


def test_get_context_reflects_the_tool_call(acme, backend, fake_ollama):
    # given
    register(acme, backend.url)
    sid = open_session(acme)["session_id"]
    backend.responder = lambda r: Answer(json={"order_id": "A123", "status": "shipped"})
    fake_ollama.script(Reply(tool_calls=[CALL]), "已发货")
    # when
    _send(acme, sid, "查订单 A123")
    context = acme.client.get(f"/api/v1/sessions/{sid}/context")
    # then
    assert context.status_code == 200
    assert context.json() == {
        "current_tool": "query_order",
        "tool_args": {"order_id": "A123"},
        "last_tool_result": {"order_id": "A123", "status": "shipped"},
        "session_variables": {},
    }


def test_the_call_is_stored_as_a_tool_message_for_audit(acme, backend, fake_ollama):
    # given
    register(acme, backend.url)
    sid = open_session(acme)["session_id"]
    backend.responder = lambda r: Answer(json={"status": "shipped"})
    fake_ollama.script(Reply(tool_calls=[CALL]), "已发货")
    # when
    _send(acme, sid, "查订单 A123")
    # then
    with tenant_scope(acme.tenant):
        stored = list(Message.objects.for_tenant(acme.tenant).filter(session_id=sid).order_by("seq"))
    assert [m.role for m in stored] == ["user", "tool", "assistant"]
    audit = stored[1]
    assert json.loads(audit.text) == {
        "tool": "query_order",
        "arguments": {"order_id": "A123"},
        "result": {"status": "shipped"},
    }
    assert audit.data["outcome"] == "ok"
    assert audit.reply_to_id == stored[0].pk
    api = acme.client.get(f"/api/v1/sessions/{sid}/messages").json()["messages"]
    assert [m["role"] for m in api] == ["user", "tool", "assistant"]


def test_arguments_that_break_the_schema_are_an_error_and_the_tool_is_not_called(acme, backend, fake_ollama):
    # given
    register(acme, backend.url)
    sid = open_session(acme)["session_id"]
    bad = {"function": {"name": "query_order", "arguments": {"order": 5}}}
    fake_ollama.script(Reply(tool_calls=[bad]), "请提供订单号")
    # when
    response = _send(acme, sid, "查订单")
    # then
    assert response.status_code == 200
    assert backend.requests == []
    error = acme.client.get(f"/api/v1/sessions/{sid}/context").json()["last_tool_result"]["error"]
    assert error["code"] == "invalid_arguments"
    tool_message = fake_ollama.chat_requests[1]["messages"][-1]
    assert json.loads(tool_message["content"])["error"]["code"] == "invalid_arguments"


def test_at_most_three_tool_rounds_then_the_model_must_answer(acme, backend, fake_ollama):
    # given a model that would call tools forever
    register(acme, backend.url)
    sid = open_session(acme)["session_id"]
    fake_ollama.script(*[Reply(tool_calls=[CALL]) for _ in range(3)], Reply(text="好的", tool_calls=[CALL]))
    # when
    response = _send(acme, sid, "查订单 A123")
    # then
    assert response.status_code == 200
    assert response.json()["reply"] == "好的"
    assert len(backend.requests) == 3
    requests = fake_ollama.chat_requests
    assert len(requests) == 4
    assert all(r.get("tools") for r in requests[:3])
    assert not requests[3].get("tools")
    version_after = 6  # 3 calls × (start + answer)
    from chat.models import ExecutionContext

    with tenant_scope(acme.tenant):
        assert ExecutionContext.objects.for_tenant(acme.tenant).get(session_id=sid).version == version_after
