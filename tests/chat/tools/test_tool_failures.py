"""A tool that times out, answers 500 or answers non-JSON becomes a structured
error for the model; the turn completes."""

from __future__ import annotations

import json
import time

import pytest
from asgiref.sync import async_to_sync

from chat.metrics import TOOL_CALLS
from chat.tools.call import call_tool, call_tool_sync
from chat.tools.registry import get_tool
from testkit.fake_ollama import Reply
from tests.chat.tools.backend import Answer
from tests.chat.tools.conftest import register
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

CALL = {"function": {"name": "query_order", "arguments": {"order_id": "A123"}}}


def _turn(ctx, sid):
    return ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "查订单 A123"}, format="json")


def _counted(outcome):
    return TOOL_CALLS.labels(tenant="acme", tool="query_order", outcome=outcome)._value.get()


def test_a_timeout_is_a_structured_error_and_the_turn_completes(acme, backend, fake_ollama):
    # given a back end slower than the tool's 1 s timeout
    register(acme, backend.url, timeout_s=1)
    sid = open_session(acme)["session_id"]
    backend.responder = lambda r: Answer(json={"status": "late"}, delay_s=3)
    fake_ollama.script(Reply(tool_calls=[CALL]), "查询超时了，请稍后再试。")
    before = _counted("timeout")
    # when
    response = _turn(acme, sid)
    # then
    assert response.status_code == 200, response.content
    assert response.json()["reply"] == "查询超时了，请稍后再试。"
    result = acme.client.get(f"/api/v1/sessions/{sid}/context").json()["last_tool_result"]
    assert result["error"]["code"] == "tool_timeout"
    assert "1s" in result["error"]["message"]
    tool_message = fake_ollama.chat_requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert json.loads(tool_message["content"]) == result
    assert _counted("timeout") == before + 1


def test_a_500_is_a_structured_error_with_its_status(acme, backend, fake_ollama):
    # given
    register(acme, backend.url)
    sid = open_session(acme)["session_id"]
    backend.responder = lambda r: Answer(status=500, json={"detail": "db down"})
    fake_ollama.script(Reply(tool_calls=[CALL]), "系统繁忙")
    before = _counted("error")
    # when
    response = _turn(acme, sid)
    # then
    assert response.status_code == 200
    result = acme.client.get(f"/api/v1/sessions/{sid}/context").json()["last_tool_result"]
    assert result == {"error": {"code": "tool_http_error", "message": "the tool answered HTTP 500", "status": 500}}
    assert json.loads(fake_ollama.chat_requests[1]["messages"][-1]["content"]) == result
    assert _counted("error") == before + 1


def test_a_non_json_answer_is_a_bad_response(acme, backend, fake_ollama):
    # given
    register(acme, backend.url)
    sid = open_session(acme)["session_id"]
    backend.responder = lambda r: Answer(body=b"<html>Bad Gateway</html>", content_type="text/html")
    fake_ollama.script(Reply(tool_calls=[CALL]), "系统繁忙")
    # when
    response = _turn(acme, sid)
    # then
    assert response.status_code == 200
    error = acme.client.get(f"/api/v1/sessions/{sid}/context").json()["last_tool_result"]["error"]
    assert error["code"] == "tool_bad_response"
    assert error["status"] == 200


def test_an_unreachable_tool_is_an_http_error(acme, fake_ollama):
    # given a URL where nothing listens
    register(acme, "http://127.0.0.1:9/tool")
    sid = open_session(acme)["session_id"]
    fake_ollama.script(Reply(tool_calls=[CALL]), "系统繁忙")
    # when
    response = _turn(acme, sid)
    # then
    assert response.status_code == 200
    error = acme.client.get(f"/api/v1/sessions/{sid}/context").json()["last_tool_result"]["error"]
    assert error["code"] == "tool_http_error"


def test_a_tool_the_tenant_never_registered_is_an_error(acme, backend, fake_ollama):
    # given
    register(acme, backend.url)
    sid = open_session(acme)["session_id"]
    fake_ollama.script(Reply(tool_calls=[{"function": {"name": "drop_tables", "arguments": {}}}]), "做不到")
    # when
    response = _turn(acme, sid)
    # then
    assert response.status_code == 200
    assert backend.requests == []
    error = acme.client.get(f"/api/v1/sessions/{sid}/context").json()["last_tool_result"]["error"]
    assert error["code"] == "unknown_tool"


@pytest.mark.parametrize("caller", ["turn", "batch worker"])
def test_an_answer_that_trickles_in_past_the_timeout_is_a_timeout_for_every_caller(acme, backend, caller):
    # given a back end that answers at once but sends its body a byte every 50 ms (10 s for the whole of it)
    register(acme, backend.url, timeout_s=1)
    backend.responder = lambda _request: Answer(json={"status": "shipped", "pad": "x" * 180}, trickle_s=0.05)
    tool = get_tool(acme.tenant, "query_order")
    arguments = {"order_id": "A123"}
    # when the turn's call (awaited in an event loop) or the batch worker's (synchronous) makes the call
    started = time.monotonic()
    if caller == "turn":
        outcome = async_to_sync(call_tool)(acme.tenant, tool, arguments, session_id="s", end_user_id="u")
    else:
        outcome = call_tool_sync(acme.tenant, tool, arguments, session_id="s", end_user_id="u")
    # then the tool's timeout ends the exchange, long before the body would have ended
    assert outcome.result["error"]["code"] == "tool_timeout"
    assert time.monotonic() - started < 5
