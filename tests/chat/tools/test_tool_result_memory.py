"""A tool's answer becomes a compressed tool_result memory without secrets."""

from __future__ import annotations

import pytest

from conversations.models import Message
from memory.models import MemoryUnit
from tenants.rls import tenant_scope
from testkit.fake_ollama import Reply
from tests.chat.tools.backend import Answer
from tests.chat.tools.conftest import register
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

CALL = {"function": {"name": "query_order", "arguments": {"order_id": "A123"}}}
TOKEN = "tok_live_9f8e7d6c5b4a3f2e1d0c"
API_KEY = "sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
ANSWER = {
    "order_id": "A123",
    "status": "shipped",
    "carrier": "SF Express",
    "tracking_number": "SF1234567890",
    "token": TOKEN,
    "api_key": API_KEY,
    "debug": {"trace": "x" * 500, "request_id": "r-1"},
    "items": [{"sku": f"SKU-{i}", "name": "一件很长的商品名称" * 3, "qty": i} for i in range(20)],
}


def _memories(ctx, sid):
    with tenant_scope(ctx.tenant):
        return list(MemoryUnit.objects.for_tenant(ctx.tenant).filter(type="tool_result", superseded_at__isnull=True))


def test_the_answer_is_stored_compressed_and_without_secrets(acme, backend, fake_ollama):
    # given a back end whose answer carries a token and an API key
    register(acme, backend.url)
    sid = open_session(acme)["session_id"]
    backend.responder = lambda r: Answer(json=ANSWER)
    fake_ollama.script(Reply(tool_calls=[CALL]), "已发货")
    # when
    acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "查订单 A123"}, format="json")
    # then
    [memory] = _memories(acme, sid)
    assert len(memory.content) <= 150
    assert memory.content.startswith("query_order: ")
    assert "A123" in memory.content
    assert "shipped" in memory.content
    stored = repr(memory.data) + memory.content + memory.search_text
    assert TOKEN not in stored
    assert API_KEY not in stored
    assert memory.data["order_id"] == "A123"
    assert memory.data["tool"] == "query_order"
    assert "token" not in memory.data
    assert memory.key == "tool:query_order"
    with tenant_scope(acme.tenant):
        audit = Message.objects.for_tenant(acme.tenant).get(session_id=sid, role="tool")
    assert memory.source_message_id == audit.pk


def test_secrets_never_reach_the_model_or_the_context(acme, backend, fake_ollama):
    # given
    register(acme, backend.url)
    sid = open_session(acme)["session_id"]
    backend.responder = lambda r: Answer(json=ANSWER)
    fake_ollama.script(Reply(tool_calls=[CALL]), "已发货")
    # when
    acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "查订单 A123"}, format="json")
    # then
    second = repr(fake_ollama.chat_requests[1])
    context = repr(acme.client.get(f"/api/v1/sessions/{sid}/context").json())
    messages = repr(acme.client.get(f"/api/v1/sessions/{sid}/messages").json())
    for text in (second, context, messages):
        assert TOKEN not in text
        assert API_KEY not in text
    assert "SF1234567890" in second
    assert "SF1234567890" in context


def test_a_failed_call_stores_no_memory(acme, backend, fake_ollama):
    register(acme, backend.url)
    sid = open_session(acme)["session_id"]
    backend.responder = lambda r: Answer(status=503, json={})
    fake_ollama.script(Reply(tool_calls=[CALL]), "稍后再试")
    acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "查订单 A123"}, format="json")
    assert _memories(acme, sid) == []
