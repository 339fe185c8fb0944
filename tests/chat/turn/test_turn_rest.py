"""POST /api/v1/sessions/<id>/messages: the turn pipeline over REST."""

from __future__ import annotations

import pytest

from conversations.models import Message
from tenants.rls import tenant_scope
from testkit.fake_ollama import FakeOllama, Reply
from tests.factories import open_session

# The turn pipeline runs its database steps through database_sync_to_async,
# which closes connections left in a test transaction: use real transactions.
pytestmark = pytest.mark.django_db(transaction=True)


def _send(ctx, sid, text, client_msg_id=None):
    body = {"text": text}
    if client_msg_id:
        body["client_msg_id"] = client_msg_id
    return ctx.client.post(f"/api/v1/sessions/{sid}/messages", body, format="json")


def _stored(ctx, sid):
    with tenant_scope(ctx.tenant):
        return list(Message.objects.for_tenant(ctx.tenant).filter(session_id=sid).order_by("seq"))


@pytest.fixture
def sid(acme):
    return open_session(acme, "zhangwei")["session_id"]


def test_a_turn_answers_and_stores_both_messages(acme, sid, fake_ollama):
    # given
    fake_ollama.script("您好张伟，请问有什么可以帮您？")
    # when
    response = _send(acme, sid, "你好，我叫张伟", "m1")
    # then
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["reply"] == "您好张伟，请问有什么可以帮您？"
    assert set(body) == {"message_id", "reply_id", "reply", "recalled", "needs_confirmation", "usage", "citations"}
    assert body["usage"]["prompt_tokens"] > 0
    assert body["usage"]["completion_tokens"] > 0
    stored = _stored(acme, sid)
    assert [(m.role, m.text) for m in stored] == [
        ("user", "你好，我叫张伟"),
        ("assistant", "您好张伟，请问有什么可以帮您？"),
    ]
    assert str(stored[0].pk) == body["message_id"]
    assert str(stored[1].pk) == body["reply_id"]
    request = fake_ollama.chat_requests[-1]
    assert request["options"]["num_ctx"] == 32768
    assert request["messages"][0]["role"] == "system"
    assert request["messages"][0]["content"].startswith("<|memory_anchor|>")
    assert request["messages"][-1] == {"role": "user", "content": "你好，我叫张伟"}


def test_the_users_name_reaches_the_anchor_of_the_next_turn(acme, sid, fake_ollama):
    _send(acme, sid, "你好，我叫张伟")
    _send(acme, sid, "我的订单号是 ABC123")
    system = fake_ollama.chat_requests[-1]["messages"][0]["content"]
    anchor = system.split("\n", 1)[0]
    assert "张伟" in anchor


def test_repeated_client_msg_id_returns_the_first_result(acme, sid, fake_ollama):
    first = _send(acme, sid, "查一下订单", "same-id").json()
    second = _send(acme, sid, "查一下订单", "same-id").json()
    assert second == first
    assert len(fake_ollama.chat_requests) == 1
    assert len(_stored(acme, sid)) == 2


def test_ollama_down_keeps_the_message_and_a_retry_works(acme, sid, settings):
    # given nothing listens on the Ollama port
    settings.OLLAMA_HOST = "http://127.0.0.1:9"
    from chat.llm import clear_context_cache

    clear_context_cache()
    # when
    down = _send(acme, sid, "我的手机号是 13912345678", "retry-me")
    # then
    assert down.status_code == 503
    error = down.json()["error"]
    assert error["code"] == "llm_unavailable"
    assert error["retryable"] is True
    assert [m.text for m in _stored(acme, sid)] == ["我的手机号是 13912345678"]
    # and once Ollama is back the same client_msg_id completes the turn
    with FakeOllama(default_reply="好的，已记录。") as fake:
        settings.OLLAMA_HOST = fake.host
        clear_context_cache()
        again = _send(acme, sid, "我的手机号是 13912345678", "retry-me")
    assert again.status_code == 200
    assert again.json()["message_id"] == down.json()["message_id"]
    assert [m.role for m in _stored(acme, sid)] == ["user", "assistant"]


def test_failure_mid_stream_is_503_and_stores_no_half_reply(acme, sid, fake_ollama):
    fake_ollama.script(Reply(text="这是 一段 会 被 打断 的 回复", close_after=2))
    response = _send(acme, sid, "你好")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "llm_unavailable"
    assert [m.role for m in _stored(acme, sid)] == ["user"]


def test_ollama_slower_than_its_timeout_is_503(acme, sid, fake_ollama, settings):
    settings.OLLAMA_TIMEOUT_S = 0.5
    fake_ollama.script(Reply(text="太慢了", first_token_delay_s=3))
    response = _send(acme, sid, "你好")
    assert response.status_code == 503
    assert [m.role for m in _stored(acme, sid)] == ["user"]


def test_prompt_that_cannot_fit_is_413_and_the_message_is_stored(acme, settings):
    sid = open_session(acme, "long-talker")["session_id"]
    with FakeOllama(context_length=1100, num_ctx=1100) as fake:
        settings.OLLAMA_HOST = fake.host
        from chat.llm import clear_context_cache

        clear_context_cache()
        response = _send(acme, sid, "很长的问题 " * 300)
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "context_overflow"
        assert fake.chat_requests == []
    assert [m.role for m in _stored(acme, sid)] == ["user"]
    clear_context_cache()


def test_model_not_found_is_a_clear_error(acme, sid, settings):
    with FakeOllama(models=["llama3:8b"]) as fake:
        settings.OLLAMA_HOST = fake.host
        from chat.llm import clear_context_cache

        clear_context_cache()
        response = _send(acme, sid, "你好")
    clear_context_cache()
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "model_not_found"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"text": ""}, 400, "invalid_message"),
        ({"text": 42}, 400, "invalid_message"),
        ({}, 400, "invalid_message"),
        ({"text": "x" * 4001}, 400, "message_too_long"),
        ({"text": "hi", "client_msg_id": 5}, 400, "invalid_message"),
    ],
)
def test_bad_messages_are_rejected_and_nothing_is_stored(acme, sid, fake_ollama, body, status, code):
    response = acme.client.post(f"/api/v1/sessions/{sid}/messages", body, format="json")
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert _stored(acme, sid) == []


def test_rate_limit_per_session(acme, sid, fake_ollama):
    acme.tenant.settings = {"rate_limits": {"per_session_per_minute": 2}}
    acme.tenant.save()
    assert _send(acme, sid, "一").status_code == 200
    assert _send(acme, sid, "二").status_code == 200
    limited = _send(acme, sid, "三")
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "rate_limited"
    assert [m.text for m in _stored(acme, sid) if m.role == "user"] == ["一", "二"]


def test_history_is_paginated(acme, sid, fake_ollama):
    for n in range(3):
        _send(acme, sid, f"消息 {n}")
    page = acme.client.get(f"/api/v1/sessions/{sid}/messages?limit=4").json()
    assert [m["text"] for m in page["messages"]][-1] == "你好！"
    assert len(page["messages"]) == 4
    assert page["has_more"] is True
    older = acme.client.get(f"/api/v1/sessions/{sid}/messages?limit=4&before={page['messages'][0]['id']}").json()
    assert [m["text"] for m in older["messages"]] == ["消息 0", "你好！"]
    assert older["has_more"] is False


def test_context_endpoint_shows_the_execution_context(acme, sid):
    body = acme.client.get(f"/api/v1/sessions/{sid}/context").json()
    assert body == {"current_tool": None, "tool_args": None, "last_tool_result": None, "session_variables": {}}


def test_other_tenant_cannot_post_into_the_session(globex, sid, fake_ollama):
    response = _send(globex, sid, "hello")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "session_not_found"


def test_a_new_session_has_its_empty_execution_context_before_its_first_turn(acme):
    # given / when: a session is opened and nothing is said yet
    from chat.models import ExecutionContext

    opened = open_session(acme, "context-before-turn")
    # then: its execution context already exists, empty, in its tenant only (the first turn writes none)
    with tenant_scope(acme.tenant):
        assert ExecutionContext.objects.for_tenant(acme.tenant).filter(session_id=opened["session_id"]).exists()
    context = acme.client.get(f"/api/v1/sessions/{opened['session_id']}/context")
    assert context.status_code == 200
    assert not any(context.json().values())


def test_a_turn_counts_each_memory_it_recalled_once(acme, sid, fake_ollama):
    # given: a memory from the first turn, and another end user's memory with the same key
    from memory.models import MemoryUnit

    fake_ollama.script("好的。", "您的订单 AB12345 正在配送。")
    assert _send(acme, sid, "我的订单号是 AB12345", "m1").status_code == 200
    other = open_session(acme, "lisi")["session_id"]
    fake_ollama.script("好的。")
    assert _send(acme, other, "我的订单号是 CD67890", "m1").status_code == 200

    def counts():
        with tenant_scope(acme.tenant):
            return dict(MemoryUnit.objects.for_tenant(acme.tenant).values_list("id", "recall_count"))

    before = counts()
    # when
    body = _send(acme, sid, "我的订单到哪了？", "m2").json()
    # then: the recalled memory was counted once; the other end user's was not touched
    after = counts()
    with tenant_scope(acme.tenant):
        contents = dict(MemoryUnit.objects.for_tenant(acme.tenant).values_list("id", "content"))
    recalled = {m for m in after if str(m) in body["recalled"]}
    assert any("AB12345" in contents[m] for m in recalled)
    assert any("CD67890" in contents[m] for m in after if m not in recalled)
    assert {m: after[m] - before.get(m, 0) for m in after} == {m: int(m in recalled) for m in after}
