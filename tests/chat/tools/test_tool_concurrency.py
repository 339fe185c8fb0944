"""Two turns of one session calling tools at the same time never interleave
their execution-context updates (S16)."""

from __future__ import annotations

import json
import re
import threading

import pytest
from django.db import connections
from rest_framework.test import APIClient

from chat.models import ExecutionContext
from conversations.models import Message
from tenants.rls import tenant_scope
from testkit.fake_ollama import Reply
from tests.chat.tools.backend import Answer
from tests.chat.tools.conftest import register
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

ECHO_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _model(body):
    """Calls ``echo`` with the number in the user's message; once the answer
    is back, says which number it got."""
    last = body["messages"][-1]
    if last["role"] == "user":
        n = int(re.search(r"\d+", last["content"]).group())
        return Reply(tool_calls=[{"function": {"name": "echo", "arguments": {"n": n}}}])
    return Reply(text=f"got {json.loads(last['content'])['echo']}")


def _context_of(system_prompt):
    line = next(li for li in system_prompt.split("\n") if li.startswith("<|execution_context|>"))
    return json.loads(line.removeprefix("<|execution_context|>"))


def test_concurrent_turns_in_one_session_never_interleave_context_updates(acme, backend, fake_ollama):
    # given a tool slow enough for the two turns to overlap
    register(acme, backend.url, name="echo", schema=ECHO_SCHEMA)
    sid = open_session(acme)["session_id"]
    backend.responder = lambda r: Answer(json={"echo": r.arguments["n"]}, delay_s=0.5)
    fake_ollama.default_reply = _model
    results: dict[int, object] = {}
    barrier = threading.Barrier(2)

    def turn(n):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}")
        try:
            barrier.wait()
            results[n] = client.post(f"/api/v1/sessions/{sid}/messages", {"text": f"echo {n}"}, format="json")
        finally:
            connections.close_all()

    # when
    threads = [threading.Thread(target=turn, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    # then both turns completed, each with its own answer
    assert {n: r.status_code for n, r in results.items()} == {1: 200, 2: 200}
    assert {n: r.json()["reply"] for n, r in results.items()} == {1: "got 1", 2: "got 2"}
    # the tool calls ran one after the other
    first, second = sorted(backend.requests, key=lambda r: r.started)
    assert first.ended <= second.started
    # every update bumped the version by one: 2 calls × (start + answer)
    with tenant_scope(acme.tenant):
        context = ExecutionContext.objects.for_tenant(acme.tenant).get(session_id=sid)
        audits = list(Message.objects.for_tenant(acme.tenant).filter(session_id=sid, role="tool").order_by("seq"))
    assert context.version == 4
    assert [a.data["context_version"] for a in audits] == [2, 4]
    # each turn's second model call sees its own call and answer
    follow_ups = [r for r in fake_ollama.chat_requests if r["messages"][-1]["role"] == "tool"]
    assert len(follow_ups) == 2
    for request in follow_ups:
        *_, user, assistant, tool = request["messages"]  # the turn's input, the call, the answer
        assert (user["role"], assistant["role"], tool["role"]) == ("user", "assistant", "tool")
        n = int(re.search(r"\d+", user["content"]).group())
        assert assistant["tool_calls"][0]["function"]["arguments"] == {"n": n}
        assert json.loads(tool["content"]) == {"echo": n}
        seen = _context_of(request["messages"][0]["content"])
        assert seen["current_tool"] == "echo"
        assert seen["tool_args"] == {"n": n}
        assert seen["last_tool_result"] == {"echo": n}
