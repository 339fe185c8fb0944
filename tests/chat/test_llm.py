"""chat.llm against the fake Ollama (a real HTTP server): streaming, usage,
num_ctx, context size and its cache, and every failure as a typed LLMError."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time

import pytest

from chat import llm as llm_module
from chat.llm import LLMChunk, LLMError, LLMUnavailable, ModelNotFound, OllamaChat, get_llm, parse_context_size
from testkit.fake_ollama import FakeOllama, Reply

MESSAGES = [{"role": "system", "content": "你是客服助手。"}, {"role": "user", "content": "我的订单到哪了？"}]


async def _collect(chat: OllamaChat, **kwargs: object) -> list[LLMChunk]:
    return [chunk async for chunk in chat.stream(MESSAGES, num_ctx=kwargs.pop("num_ctx", 4096), **kwargs)]  # type: ignore[arg-type]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def chat(fake_ollama: FakeOllama) -> OllamaChat:
    return OllamaChat(fake_ollama.host, "qwen2.5:7b", timeout_s=2.0)


async def test_streams_deltas_and_reports_usage_on_the_last_chunk(fake_ollama: FakeOllama, chat: OllamaChat) -> None:
    # given
    fake_ollama.script(Reply(deltas=["您的", "订单", "已发货"], prompt_eval_count=57, eval_count=3))

    # when
    chunks = await _collect(chat)

    # then
    assert [c.text for c in chunks] == ["您的", "订单", "已发货", ""]
    assert [c.done for c in chunks] == [False, False, False, True]
    assert (chunks[-1].prompt_tokens, chunks[-1].completion_tokens) == (57, 3)
    assert all(c.prompt_tokens is None for c in chunks[:-1])


async def test_every_request_carries_num_ctx_and_the_messages(fake_ollama: FakeOllama, chat: OllamaChat) -> None:
    # when
    await _collect(chat, num_ctx=32768)

    # then
    body = fake_ollama.chat_requests[-1]
    assert body["options"]["num_ctx"] == 32768
    assert body["stream"] is True
    assert body["model"] == "qwen2.5:7b"
    assert body["messages"] == MESSAGES


async def test_tools_go_out_and_tool_calls_come_back(fake_ollama: FakeOllama, chat: OllamaChat) -> None:
    # given
    tool = {
        "type": "function",
        "function": {
            "name": "get_order_status",
            "description": "Look up an order",
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        },
    }
    call = {"function": {"name": "get_order_status", "arguments": {"order_id": "ABC123"}}}
    fake_ollama.script(Reply(tool_calls=[call]))

    # when
    chunks = await _collect(chat, tools=[tool])

    # then
    assert fake_ollama.chat_requests[-1]["tools"][0]["function"]["name"] == "get_order_status"
    assert [c.tool_calls for c in chunks if c.tool_calls] == [[call]]
    assert chunks[-1].done


async def test_context_size_prefers_the_modelfile_num_ctx() -> None:
    # given
    llm_module.clear_context_cache()
    with FakeOllama(context_length=32768, num_ctx=16384) as fake:
        # when
        size = await OllamaChat(fake.host, "qwen2.5:7b", timeout_s=2.0).context_size()

    # then
    assert size == 16384
    assert fake.show_requests == [{"model": "qwen2.5:7b"}]


async def test_context_size_falls_back_to_the_trained_context_length() -> None:
    # given
    llm_module.clear_context_cache()
    with FakeOllama(context_length=32768, num_ctx=None) as fake:
        # when
        size = await OllamaChat(fake.host, "qwen2.5:7b", timeout_s=2.0).context_size()

    # then
    assert size == 32768


def test_parse_context_size() -> None:
    assert parse_context_size('num_ctx                        8192\nstop "<|im_end|>"', {}) == 8192
    assert parse_context_size('stop "<|im_end|>"', {"llama.context_length": 131072}) == 131072
    assert parse_context_size(None, {"general.architecture": "x"}) is None


async def test_context_size_is_cached_across_instances_until_the_ttl(
    fake_ollama: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given
    first = OllamaChat(fake_ollama.host, "qwen2.5:7b", timeout_s=2.0)
    second = OllamaChat(fake_ollama.host + "/", "qwen2.5:7b", timeout_s=2.0)

    # when
    sizes = [await first.context_size(), await second.context_size()]

    # then
    assert sizes == [32768, 32768]
    assert len(fake_ollama.show_requests) == 1

    # when the TTL has passed
    later = time.monotonic() + llm_module.CONTEXT_CACHE_TTL_S + 1
    monkeypatch.setattr(llm_module.time, "monotonic", lambda: later)
    await second.context_size()

    # then
    assert len(fake_ollama.show_requests) == 2


async def test_unknown_model_is_model_not_found(fake_ollama: FakeOllama) -> None:
    # given
    chat = OllamaChat(fake_ollama.host, "qwen9:1b", timeout_s=2.0)

    # when
    with pytest.raises(ModelNotFound) as shown:
        await chat.context_size()
    with pytest.raises(ModelNotFound) as streamed:
        await _collect(chat)

    # then
    for error in (shown.value, streamed.value):
        assert error.code == "model_not_found"
        assert error.retryable is False
        assert "qwen9:1b" in str(error)
        assert fake_ollama.host in str(error)
        assert "ollama pull qwen9:1b" in str(error)
        assert fake_ollama.host not in error.public_message


async def test_unreachable_host_is_llm_unavailable() -> None:
    # given
    chat = OllamaChat(f"http://127.0.0.1:{_closed_port()}", "qwen2.5:7b", timeout_s=2.0)

    # when
    with pytest.raises(LLMUnavailable) as streamed:
        await _collect(chat)
    with pytest.raises(LLMUnavailable) as shown:
        await chat.context_size()
    with pytest.raises(LLMUnavailable):
        await chat.version()

    # then
    assert streamed.value.code == shown.value.code == "llm_unavailable"
    assert streamed.value.retryable is True
    assert streamed.value.status == 503


async def test_http_500_is_llm_unavailable(fake_ollama: FakeOllama, chat: OllamaChat) -> None:
    # given
    fake_ollama.script(Reply(status=500, error="llama runner process has terminated"))

    # when / then
    with pytest.raises(LLMUnavailable, match="llama runner process has terminated"):
        await _collect(chat)


async def test_other_4xx_is_a_non_retryable_llm_error(fake_ollama: FakeOllama, chat: OllamaChat) -> None:
    # given
    fake_ollama.script(Reply(status=400, error="invalid options"))

    # when
    with pytest.raises(LLMError) as raised:
        await _collect(chat)

    # then
    assert not isinstance(raised.value, LLMUnavailable)
    assert raised.value.retryable is False


async def test_a_stream_cut_mid_reply_is_llm_unavailable(fake_ollama: FakeOllama, chat: OllamaChat) -> None:
    # given
    fake_ollama.script(Reply(deltas=["您", "的", "订", "单"], close_after=2))
    received: list[str] = []

    async def consume() -> None:
        async for chunk in chat.stream(MESSAGES, num_ctx=4096):
            received.append(chunk.text)

    # when / then
    with pytest.raises(LLMUnavailable):
        await consume()
    assert received == ["您", "的"]


async def test_a_stream_cut_before_its_final_line_is_llm_unavailable(fake_ollama: FakeOllama, chat: OllamaChat) -> None:
    # given: every delta arrives, but not the done line
    fake_ollama.script(Reply(deltas=["ok"], close_after=5))

    # when / then
    with pytest.raises(LLMUnavailable):
        await _collect(chat)


async def test_a_slow_first_token_times_out(fake_ollama: FakeOllama) -> None:
    # given
    fake_ollama.script(Reply(text="late", first_token_delay_s=5.0))
    chat = OllamaChat(fake_ollama.host, "qwen2.5:7b", timeout_s=0.3)
    started = time.monotonic()

    # when
    with pytest.raises(LLMUnavailable) as raised:
        await _collect(chat)

    # then
    assert time.monotonic() - started < 2.0
    assert raised.value.retryable is True
    assert await asyncio.to_thread(fake_ollama.wait_for_disconnect)


async def test_a_hanging_server_times_out(fake_ollama: FakeOllama) -> None:
    # given
    fake_ollama.script(Reply(hang=True))
    chat = OllamaChat(fake_ollama.host, "qwen2.5:7b", timeout_s=0.3)

    # when / then
    with pytest.raises(LLMUnavailable):
        await _collect(chat)
    assert await asyncio.to_thread(fake_ollama.wait_for_disconnect)


async def test_a_reply_that_never_ends_hits_the_overall_timeout(fake_ollama: FakeOllama) -> None:
    # given: each token is quick, but the whole reply takes far longer than 3 × timeout_s
    fake_ollama.script(Reply(deltas=["x"] * 1000, token_delay_s=0.05))
    chat = OllamaChat(fake_ollama.host, "qwen2.5:7b", timeout_s=0.3)
    started = time.monotonic()

    # when / then
    with pytest.raises(LLMUnavailable):
        await _collect(chat)
    assert time.monotonic() - started < 3.0
    assert await asyncio.to_thread(fake_ollama.wait_for_disconnect)


async def test_cancelling_the_consumer_closes_the_stream(fake_ollama: FakeOllama, chat: OllamaChat) -> None:
    # given
    fake_ollama.script(Reply(deltas=["x"] * 500, token_delay_s=0.02))
    first = asyncio.Event()

    async def relay() -> None:
        async for _chunk in chat.stream(MESSAGES, num_ctx=4096):
            first.set()

    task = asyncio.create_task(relay())
    await asyncio.wait_for(first.wait(), timeout=2)

    # when
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task

    # then
    assert await asyncio.to_thread(fake_ollama.wait_for_disconnect)
    assert fake_ollama.completed == 0


async def test_closing_the_generator_early_closes_the_stream(fake_ollama: FakeOllama, chat: OllamaChat) -> None:
    # given
    fake_ollama.script(Reply(deltas=["x"] * 500, token_delay_s=0.02))

    # when
    async with contextlib.aclosing(chat.stream(MESSAGES, num_ctx=4096)) as chunks:
        async for _chunk in chunks:
            break

    # then
    assert await asyncio.to_thread(fake_ollama.wait_for_disconnect)


async def test_version_probe(chat: OllamaChat) -> None:
    assert await chat.version()


def test_get_llm_reads_settings(fake_ollama: FakeOllama, settings: object) -> None:
    # when
    chat = get_llm()

    # then
    assert (chat.host, chat.model, chat.timeout_s) == (fake_ollama.host, "qwen2.5:7b", 5.0)


def test_httpcore_learns_the_async_library_without_searching_sys_path():
    # httpcore imports sniffio for every lock it makes; missing, it must fail at once (chat.llm records that)
    import sys

    import chat.llm  # noqa: F401

    assert "sniffio" in sys.modules


# --- one client per event loop ---------------------------------------------------


async def test_replies_on_one_event_loop_reuse_one_connection(fake_ollama: FakeOllama, chat: OllamaChat) -> None:
    # given
    fake_ollama.script("第一", "第二", "第三")

    # when three replies and a context-size lookup run one after another on this loop
    texts = ["".join(c.text for c in await _collect(chat)) for _ in range(3)]
    await chat.context_size()

    # then they all went over the one connection the first opened
    assert texts == ["第一", "第二", "第三"]
    assert fake_ollama.connections_opened == 1


async def test_a_reply_dropped_midway_leaves_the_next_one_working(fake_ollama: FakeOllama, chat: OllamaChat) -> None:
    # given a reply the client abandons after its first delta
    fake_ollama.script(Reply(deltas=["一", "二", "三"], token_delay_s=0.5), "好的")
    async with contextlib.aclosing(chat.stream(MESSAGES, num_ctx=4096)) as stream:
        first = await anext(stream)
    assert first.text == "一"
    assert await asyncio.to_thread(fake_ollama.wait_for_disconnect)

    # when the next reply is asked for
    chunks = await _collect(chat)

    # then it streams in full, over a new connection (the abandoned one was closed, not reused)
    assert "".join(c.text for c in chunks) == "好的"
    assert fake_ollama.connections_opened == 2


def test_the_clients_of_an_event_loop_close_when_it_ends(fake_ollama: FakeOllama) -> None:
    # given a reply made on a loop of its own, as async_to_sync does outside the server
    chat = OllamaChat(fake_ollama.host, "qwen2.5:7b", timeout_s=2.0)

    async def one_reply() -> tuple[str, asyncio.AbstractEventLoop]:
        return "".join(c.text for c in await _collect(chat)), asyncio.get_running_loop()

    # when that loop ends
    text, loop = asyncio.run(one_reply())

    # then its connection to Ollama was closed with it, and nothing is kept for the dead loop
    assert text == "你好！"
    deadline = time.monotonic() + 5
    while fake_ollama.connections_closed < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake_ollama.connections_closed == fake_ollama.connections_opened == 1
    assert loop not in llm_module._loop_clients


# --- the reply's overall deadline --------------------------------------------------


async def test_a_consumer_slower_than_the_deadline_is_not_interrupted_and_the_next_part_fails(
    fake_ollama: FakeOllama,
) -> None:
    # given a reply of three deltas and a consumer that dawdles past the whole reply's deadline (3 × 0.2 s)
    fake_ollama.script(Reply(deltas=["一", "二", "三"]))
    chat = OllamaChat(fake_ollama.host, "qwen2.5:7b", timeout_s=0.2)
    got: list[str] = []
    slept = 0.0

    async def consume() -> None:
        nonlocal slept
        async with contextlib.aclosing(chat.stream(MESSAGES, num_ctx=4096)) as stream:
            async for chunk in stream:
                got.append(chunk.text)
                started = time.monotonic()
                await asyncio.sleep(0.8)  # the consumer's own work: the deadline must not cancel it
                slept = time.monotonic() - started

    # when
    with pytest.raises(LLMUnavailable, match="did not finish its reply within 0.6s"):
        await consume()

    # then the consumer's sleep ran to its end, and the reply stopped at the next part
    assert got == ["一"]
    assert slept >= 0.8


async def test_cancelling_the_reader_while_it_waits_is_a_cancellation_not_a_timeout(fake_ollama: FakeOllama) -> None:
    # given a reply whose second token is slow, read by a task that gets cancelled (the client went away)
    fake_ollama.script(Reply(deltas=["一", "二"], token_delay_s=1.0))
    chat = OllamaChat(fake_ollama.host, "qwen2.5:7b", timeout_s=2.0)
    first = asyncio.Event()

    async def read() -> None:
        async for _ in chat.stream(MESSAGES, num_ctx=4096):
            first.set()

    reader = asyncio.create_task(read())
    await first.wait()

    # when
    reader.cancel()

    # then it ends cancelled (no LLMUnavailable), and Ollama sees the client leave
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert await asyncio.to_thread(fake_ollama.wait_for_disconnect)
