"""The fake Ollama speaks Ollama's wire protocol: proven with the official
``ollama`` client (and raw httpx where the client hides the wire)."""

from __future__ import annotations

import json

import httpx
import ollama
import pytest

from testkit.fake_ollama import FakeOllama, Reply


def test_streams_deltas_then_a_final_line_with_usage(fake_ollama: FakeOllama) -> None:
    # given
    fake_ollama.script(Reply(text="您的订单已发货", prompt_eval_count=42, eval_count=7))
    client = ollama.Client(host=fake_ollama.host)

    # when
    parts = list(client.chat(model="qwen2.5:7b", messages=[{"role": "user", "content": "订单呢"}], stream=True))

    # then
    assert "".join(p.message.content or "" for p in parts) == "您的订单已发货"
    assert [p.done for p in parts] == [False] * (len(parts) - 1) + [True]
    assert len(parts) == len("您的订单已发货") + 1
    final = parts[-1]
    assert (final.done_reason, final.prompt_eval_count, final.eval_count) == ("stop", 42, 7)


def test_wire_is_chunked_ndjson(fake_ollama: FakeOllama) -> None:
    # given
    fake_ollama.script(Reply(deltas=["Hello", " there"]))

    # when
    response = httpx.post(f"{fake_ollama.host}/api/chat", json={"model": "qwen2.5:7b", "messages": []})

    # then
    assert response.headers["content-type"] == "application/x-ndjson"
    assert response.headers["transfer-encoding"] == "chunked"
    lines = [json.loads(line) for line in response.text.splitlines()]
    assert lines[0]["message"] == {"role": "assistant", "content": "Hello"}
    assert set(lines[0]) == {"model", "created_at", "message", "done"}
    assert lines[-1]["done"] is True
    assert {"done_reason", "prompt_eval_count", "eval_count", "total_duration"} <= set(lines[-1])


def test_non_streaming_answers_one_object(fake_ollama: FakeOllama) -> None:
    # given
    fake_ollama.script("Hi, how can I help?")
    client = ollama.Client(host=fake_ollama.host)

    # when
    response = client.chat(model="qwen2.5:7b", messages=[{"role": "user", "content": "hi"}], stream=False)

    # then
    assert response.done is True
    assert response.message.content == "Hi, how can I help?"
    assert response.eval_count == len(Reply(text="Hi, how can I help?").pieces())


def test_tool_calls_in_the_message(fake_ollama: FakeOllama) -> None:
    # given
    call = {"function": {"name": "get_order_status", "arguments": {"order_id": "ABC123"}}}
    fake_ollama.script(Reply(tool_calls=[call]), Reply(tool_calls=[call]))
    client = ollama.Client(host=fake_ollama.host)
    tool = {
        "type": "function",
        "function": {
            "name": "get_order_status",
            "description": "Status of an order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        },
    }

    # when
    streamed = list(
        client.chat(model="qwen2.5:7b", messages=[{"role": "user", "content": "x"}], tools=[tool], stream=True)
    )
    single = client.chat(model="qwen2.5:7b", messages=[{"role": "user", "content": "x"}], tools=[tool])

    # then
    calls = [c for p in streamed for c in (p.message.tool_calls or [])]
    assert [(c.function.name, dict(c.function.arguments)) for c in calls] == [
        ("get_order_status", {"order_id": "ABC123"})
    ]
    assert single.message.tool_calls[0].function.name == "get_order_status"
    assert fake_ollama.chat_requests[0]["tools"][0]["function"]["name"] == "get_order_status"


def test_records_request_bodies(fake_ollama: FakeOllama) -> None:
    # given
    client = ollama.Client(host=fake_ollama.host)

    # when
    client.chat(model="qwen2.5:7b", messages=[{"role": "user", "content": "你好"}], options={"num_ctx": 8192})

    # then
    body = fake_ollama.chat_requests[-1]
    assert body["messages"] == [{"role": "user", "content": "你好"}]
    assert body["options"]["num_ctx"] == 8192
    assert body["model"] == "qwen2.5:7b"


def test_show_tags_and_version(fake_ollama: FakeOllama) -> None:
    # given
    client = ollama.Client(host=fake_ollama.host)

    # when
    shown = client.show("qwen2.5:7b")
    tags = client.list()
    version = httpx.get(f"{fake_ollama.host}/api/version").json()

    # then
    assert shown.modelinfo["qwen2.context_length"] == 32768
    assert "num_ctx                        32768" in (shown.parameters or "")
    assert [m.model for m in tags.models] == ["qwen2.5:7b"]
    assert isinstance(version["version"], str)


def test_show_without_num_ctx_parameter() -> None:
    # given
    with FakeOllama(context_length=131072, num_ctx=None) as fake:
        # when
        shown = ollama.Client(host=fake.host).show("qwen2.5:7b")

    # then
    assert "num_ctx" not in (shown.parameters or "")
    assert shown.modelinfo["qwen2.context_length"] == 131072


def test_unknown_model_is_404(fake_ollama: FakeOllama) -> None:
    # given
    client = ollama.Client(host=fake_ollama.host)

    # when / then
    with pytest.raises(ollama.ResponseError) as shown:
        client.show("llama9:1b")
    with pytest.raises(ollama.ResponseError) as chatted:
        list(client.chat(model="llama9:1b", messages=[{"role": "user", "content": "x"}], stream=True))
    assert shown.value.status_code == 404
    assert shown.value.error == "model 'llama9:1b' not found"
    assert chatted.value.status_code == 404


def test_fails_with_500_before_streaming(fake_ollama: FakeOllama) -> None:
    # given
    fake_ollama.script(Reply(status=500, error="boom"))
    client = ollama.Client(host=fake_ollama.host)

    # when / then
    with pytest.raises(ollama.ResponseError) as raised:
        list(client.chat(model="qwen2.5:7b", messages=[{"role": "user", "content": "x"}], stream=True))
    assert (raised.value.status_code, raised.value.error) == (500, "boom")


def test_closes_the_connection_after_k_deltas(fake_ollama: FakeOllama) -> None:
    # given
    fake_ollama.script(Reply(deltas=["a", "b", "c", "d"], close_after=2))
    client = ollama.Client(host=fake_ollama.host)
    received: list[str] = []

    def consume() -> None:
        for part in client.chat(model="qwen2.5:7b", messages=[{"role": "user", "content": "x"}], stream=True):
            received.append(part.message.content or "")

    # when / then
    with pytest.raises(httpx.RemoteProtocolError):
        consume()
    assert received == ["a", "b"]
    assert fake_ollama.completed == 0


def test_delay_before_first_token_trips_a_read_timeout(fake_ollama: FakeOllama) -> None:
    # given
    fake_ollama.script(Reply(text="late", first_token_delay_s=1.0))
    client = ollama.Client(host=fake_ollama.host, timeout=0.2)

    # when / then
    with pytest.raises(httpx.ReadTimeout):
        list(client.chat(model="qwen2.5:7b", messages=[{"role": "user", "content": "x"}], stream=True))
    assert fake_ollama.wait_for_disconnect()


def test_notices_a_client_that_leaves_mid_stream(fake_ollama: FakeOllama) -> None:
    # given
    fake_ollama.script(Reply(deltas=["x"] * 200, token_delay_s=0.02))
    client = ollama.Client(host=fake_ollama.host)

    # when
    stream = client.chat(model="qwen2.5:7b", messages=[{"role": "user", "content": "x"}], stream=True)
    next(stream)
    stream.close()  # leaves the `with client.stream(...)` block: the response is closed

    # then
    assert fake_ollama.wait_for_disconnect()
    assert fake_ollama.disconnects == 1
    assert fake_ollama.completed == 0


def test_a_hanging_reply_ends_when_the_client_gives_up(fake_ollama: FakeOllama) -> None:
    # given
    fake_ollama.script(Reply(hang=True))
    client = ollama.Client(host=fake_ollama.host, timeout=0.2)

    # when / then
    with pytest.raises(httpx.ReadTimeout):
        client.chat(model="qwen2.5:7b", messages=[{"role": "user", "content": "x"}], stream=False)
    assert fake_ollama.wait_for_disconnect()


def test_a_callable_script_sees_the_request() -> None:
    # given
    with FakeOllama(default_reply=lambda body: "echo: " + body["messages"][-1]["content"]) as fake:
        client = ollama.Client(host=fake.host)

        # when
        response = client.chat(model="qwen2.5:7b", messages=[{"role": "user", "content": "ping"}])

    # then
    assert response.message.content == "echo: ping"
