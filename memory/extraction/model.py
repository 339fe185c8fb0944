"""Ollama-assisted fact extraction: optional, off by default, for the facts the
rules of ``memory.extraction.rules`` miss (a name said without 「我叫」, a free-form
address, a company or a landmark the POS tagger does not tag).

Contract of :func:`extract_facts_with_model`:

- runs only for the end user's messages, and only when enabled: per tenant
  with ``Tenant.settings["llm_extraction"]`` (a JSON boolean; it wins either
  way) or for every tenant with ``MEMDESK_LLM_EXTRACTION=1``;
- the model sees the message **redacted** (``memory.text.redaction``) and never
  anything else of the tenant's: no secret is sent, and none can come back;
- one non-streaming model request whose ``format`` is a JSON schema
  (:func:`answer_schema`), so Ollama constrains decoding to it. Memory does
  not call the model itself: the caller hands it ``ask`` (a
  :data:`StructuredAsk`; the chat runtime's is ``chat.llm.structured_answer``),
  and without one nothing is asked. The answer is
  still validated strictly (:func:`parse_answer`) because a schema-following
  decoder does not stop a model from inventing values. Any failure rejects the
  **whole** answer: not JSON, wrong shape, a key that was not asked for, a type
  that is not the key's, content over 150 characters, a value that is not in
  the message text (the hallucination guard), a content that does not state
  its value or holds a number the message does not. A rejection is logged as
  a warning with its reason, never with the message text or the model's
  output;
- the model only fills gaps: it is asked only for keys that neither the rules
  found in this message nor a live memory of this session already holds, so a
  model fact never replaces what the rules or staff stored;
- a model error or timeout is logged and gives no facts; it never fails the
  turn (the rule facts are stored either way).

The facts it returns are ordinary :class:`memory.extraction.rules.Fact` objects that
``memory.extraction.run`` writes in the same batch as the rule facts (same source
message, same actor), with ``data["extracted_by"] = {"method": "llm",
"model": …}`` marking them (a nested object, so it stays out of the search
text). Cost, when enabled: one extra model call before every reply, made
inside the turn's database step; see docs/memory-intelligence.md.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, get_args

from django.conf import settings
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from conversations.models import ChatSession, Message
from memory.extraction.rules import CONTENT_LIMIT, LIFETIMES, Fact
from memory.store import read as fetch
from memory.store.schema import MemoryTypeName
from memory.text.redaction import PLACEHOLDER_RE, redact
from tenants.models import Tenant
from tenants.rls import tenant_scope

logger = logging.getLogger(__name__)

__all__ = [
    "ALLOWED_KEYS",
    "StructuredAsk",
    "ModelAnswer",
    "RejectedAnswer",
    "answer_schema",
    "extract_facts_with_model",
    "is_enabled",
    "parse_answer",
]

#: One schema-constrained model request: (system prompt, user prompt, JSON schema of the answer) →
#: (the model's name, its raw answer text). May raise anything; a failure gives no facts.
StructuredAsk = Callable[[str, str, dict[str, Any]], tuple[str, str]]

FactKey = Literal["name", "address", "product", "organization", "place"]

#: What the model may propose: facts stated in free text. Keys with structured
#: data or lifetimes of their own (phone, order and tracking numbers, coupons,
#: amounts, dates, the session topic) stay with the rules.
ALLOWED_KEYS: tuple[str, ...] = get_args(FactKey)

#: Each key's memory type, as the rules assign it.
KEY_TYPES: dict[str, str] = {key: LIFETIMES[key][0] for key in ALLOWED_KEYS}

MAX_FACTS = 8
MAX_VALUE = 100
#: Longer messages are cut before they are sent (and checked against).
MAX_INPUT_CHARS = 2000

SETTING = "llm_extraction"

SYSTEM_PROMPT = """\
You extract facts about the customer from one message of a customer-service chat.
Answer only with JSON that matches the given schema: {"facts": [...]}, or {"facts": []} when there is nothing.
Each fact has:
- key: one of the allowed keys below;
- type: the memory type given for that key;
- value: the fact exactly as it is written in the message (copy it, do not translate or complete it);
- content: one short sentence (at most 150 characters) in the message's language that states the fact
  and contains the value.
Only facts the customer states about themself or their own matter; never guess; never a greeting or a generic word.
Text such as [REDACTED:password] hides a secret: never use it."""

_KEY_HINTS = {
    "name": "the customer's own name",
    "address": "the customer's delivery or home address",
    "product": "a product or model the customer asks about or bought",
    "organization": "a company, brand, shop, bank or other organisation the customer names",
    "place": "a city, district or landmark that matters to the customer's request",
}


class ModelFact(BaseModel):
    """One fact as the model must give it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    key: FactKey
    type: MemoryTypeName
    content: str = Field(min_length=1, max_length=CONTENT_LIMIT)
    value: str = Field(min_length=1, max_length=MAX_VALUE)


class ModelAnswer(BaseModel):
    """The model's whole answer."""

    model_config = ConfigDict(extra="forbid", strict=True)

    facts: list[ModelFact] = Field(max_length=MAX_FACTS)


class RejectedAnswer(Exception):
    """The model's answer is not to be trusted; ``reason`` says why without
    quoting the message or the answer."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def is_enabled(tenant: Tenant) -> bool:
    """Whether this tenant's user messages go to the model for extraction: the
    tenant's ``settings["llm_extraction"]`` when it is a JSON boolean, else
    the deployment's ``MEMDESK_LLM_EXTRACTION`` (default off)."""
    conf = tenant.settings if isinstance(tenant.settings, dict) else {}
    flag = conf.get(SETTING)
    if isinstance(flag, bool):
        return flag
    if flag is not None:
        logger.warning("tenant %s: settings[%r] must be true or false; ignored", tenant.pk, SETTING)
    return settings.MEMDESK_LLM_EXTRACTION


def answer_schema(keys: Sequence[str] = ALLOWED_KEYS) -> dict[str, Any]:
    """The JSON schema sent as Ollama's ``format``, limited to ``keys``.
    Written out (no ``$ref``) so every Ollama version's grammar converter
    takes it; :class:`ModelAnswer` checks the same rules and more."""
    return {
        "type": "object",
        "properties": {
            "facts": {
                "type": "array",
                "maxItems": MAX_FACTS,
                "items": {
                    "type": "object",
                    "properties": {
                        "key": {"type": "string", "enum": list(keys)},
                        "type": {"type": "string", "enum": sorted({KEY_TYPES[key] for key in keys})},
                        "content": {"type": "string", "minLength": 1, "maxLength": CONTENT_LIMIT},
                        "value": {"type": "string", "minLength": 1, "maxLength": MAX_VALUE},
                    },
                    "required": ["key", "type", "content", "value"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["facts"],
        "additionalProperties": False,
    }


_NUMBER = re.compile(r"\d{2,}")


def _normalise(text: str) -> str:
    """For the containment checks: width, case and spacing do not count
    (「ＡＢＣ 123」 holds "abc123")."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def parse_answer(raw: str, text: str, *, keys: Iterable[str] = ALLOWED_KEYS) -> ModelAnswer:
    """Validate the model's raw answer against the schema and against
    ``text``, the (redacted) message it was given. Raises RejectedAnswer."""
    try:
        answer = ModelAnswer.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_input=False, include_url=False)
        if any(error["type"] == "json_invalid" for error in errors):
            raise RejectedAnswer("not_json") from None
        where = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['type']}" for e in errors[:3])
        raise RejectedAnswer(f"schema ({where})") from None
    asked = set(keys)
    source = _normalise(text)
    for index, fact in enumerate(answer.facts):
        if fact.key not in asked:
            raise RejectedAnswer(f"facts.{index}: key {fact.key} was not asked for")
        if fact.type != KEY_TYPES[fact.key]:
            raise RejectedAnswer(f"facts.{index}: type {fact.type} is not {KEY_TYPES[fact.key]} for {fact.key}")
        value = _normalise(fact.value)
        if not value or PLACEHOLDER_RE.search(fact.value):
            raise RejectedAnswer(f"facts.{index}: empty or redacted value")
        if value not in source:
            raise RejectedAnswer(f"facts.{index}: value not in the message (hallucinated)")
        content = _normalise(fact.content)
        if value not in content:
            raise RejectedAnswer(f"facts.{index}: content does not state the value")
        # Invented numbers are the costly hallucination (a phone, an order):
        # every run of digits in the content must be in the message too.
        if any(number not in source for number in _NUMBER.findall(content)):
            raise RejectedAnswer(f"facts.{index}: content has a number not in the message (hallucinated)")
    return answer


def extract_facts_with_model(
    tenant: Tenant, session: ChatSession, message: Message, rule_facts: Sequence[Fact], ask: StructuredAsk | None
) -> list[Fact]:
    """The facts the model (through ``ask``) finds in ``message`` beyond
    ``rule_facts`` (see the module docstring for the contract). Never raises:
    a disabled feature, no ``ask``, a model failure or a rejected answer all
    give ``[]``."""
    if ask is None or message.role != Message.Role.USER or not is_enabled(tenant):
        return []
    try:
        return _extract(tenant, session, message, rule_facts, ask)
    except RejectedAnswer as exc:
        logger.warning("llm extraction: answer rejected for message %s: %s", message.pk, exc.reason)
    except Exception as exc:  # the model is an optional helper: no failure of it may cost the turn
        logger.warning("llm extraction: skipped for message %s: %s", message.pk, _describe(exc))
    return []


def _extract(
    tenant: Tenant, session: ChatSession, message: Message, rule_facts: Sequence[Fact], ask: StructuredAsk
) -> list[Fact]:
    text = redact(message.text or "")[:MAX_INPUT_CHARS]
    if not text.strip():
        return []
    keys = [key for key in ALLOWED_KEYS if key not in _known_keys(tenant, session, rule_facts)]
    if not keys:
        return []
    model, raw = ask(SYSTEM_PROMPT, _user_prompt(text, rule_facts, keys), answer_schema(keys))
    answer = parse_answer(raw, text, keys=keys)
    facts: list[Fact] = []
    seen: set[str] = set()
    for item in answer.facts:
        if item.key in seen:
            continue  # one memory per key and message: the model's first answer for it
        seen.add(item.key)
        value = item.value.strip()
        facts.append(
            Fact(
                key=item.key,
                type=item.type,
                value=value,
                content=item.content.strip(),
                expires_in=LIFETIMES[item.key][1],
                data={item.key: value, "extracted_by": {"method": "llm", "model": model}},
            )
        )
    return facts


def _known_keys(tenant: Tenant, session: ChatSession, rule_facts: Sequence[Fact]) -> set[str]:
    """Keys the model is not asked for: found by the rules in this message, or
    held by a live memory this session sees (the model never replaces one)."""
    with tenant_scope(tenant):
        live = set(
            fetch.visible_memories(tenant, session)
            .filter(fetch.valid_q(timezone.now()), key__in=ALLOWED_KEYS)
            .values_list("key", flat=True)
        )
    return {fact.key for fact in rule_facts} | live


def _user_prompt(text: str, rule_facts: Sequence[Fact], keys: Sequence[str]) -> str:
    allowed = "\n".join(f"- {key} (type {KEY_TYPES[key]}): {_KEY_HINTS[key]}" for key in keys)
    found = [{"key": fact.key, "value": redact(fact.value)} for fact in rule_facts]
    return (
        f"Allowed keys:\n{allowed}\n\n"
        f"Already found (do not repeat): {json.dumps(found, ensure_ascii=False)}\n\n"
        f"Message:\n{text}"
    )


def _describe(exc: BaseException) -> str:
    """An exception, for the log, without a body that might echo the prompt: the model client's own
    error code and message (they never quote it), else the HTTP status, else the exception's type."""
    code, message = getattr(exc, "code", None), getattr(exc, "message", None)
    if isinstance(code, str) and isinstance(message, str):
        return f"{code}: {message}"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return f"the model answered {status}"
    return type(exc).__name__
