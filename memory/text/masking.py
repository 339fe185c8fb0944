"""Masking: personal data shown in part, 「手机号 138****1234」 (seed §4.2).

Redaction (:mod:`memory.text.redaction`) removes what must never be stored; masking hides part of what is stored and
shown. The store keeps a phone number, an e-mail address or an identity number whole, and what shows it to a model
or to staff who may not see it whole (the prompt's anchor, the summary channel, the admin) shows it masked:
:func:`mask_text`, :func:`mask_obj`. Masking only hides characters (``*``), never their number's meaning: the masked
form of a value is deterministic, so a masked value a model repeats can be matched back to the one stored value it
stands for, and a tool that needs the whole value gets it back (:func:`masked_pairs`, :func:`unmask_obj`).

What is masked and how much stays visible:

- phone numbers (:func:`memory.text.phones.find_phones`, not a company's hotline): the first 3 and the last 4 digits
  of 10 or more (138****1234, +44 7*** **0123), the last 4 of fewer; separators and ``+`` stay;
- e-mail addresses: the first character of the local part, then ``***`` whatever its length (z***@example.com);
- Chinese resident ID numbers (18 characters) and passport numbers after their label: the first character
  and the last 4 (1*************123X). The region code and the birth date are exactly what must not show.

Order, tracking and account numbers and coupons are not masked: the customer and the agent read them back to
each other, and they say nothing about who a person is.

All functions are pure and deterministic; :func:`mask_text` is idempotent.
"""

from __future__ import annotations

import re
from typing import Any

from memory.text.phones import find_phones
from memory.text.redaction import ID_NUMBER_RE, is_resident_id

__all__ = ["MASK_CHAR", "mask_email", "mask_identifier", "mask_obj", "mask_text", "masked_pairs", "unmask_obj"]

MASK_CHAR = "*"

_MASK_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_MASK_PASSPORT = re.compile(
    r"(?:护照(?:号码?)?|(?<![A-Za-z])passport(?:\s*(?:no\.?|number|#))?)[\"']?\s*(?:(?:is|[:=：])\s*|[是为][:：]?\s*)?"
    r"[\"']?(?P<v>(?-i:[A-Z]{1,2}\d{6,9}|\d{8,9}))(?![A-Za-z0-9])",
    re.IGNORECASE,
)
#: Keys of structured data (``MemoryUnit.data``) whose whole value is an identity number.
_IDENTITY_KEYS = frozenset(
    {"id_number", "id_card", "身份证", "身份证号", "passport", "passport_number", "护照", "护照号"}
)


def _mask_digits(written: str) -> str:
    """A phone number as written with its middle digits hidden: the first 3 and last 4 of 10 or more digits,
    the last 4 of fewer (the last 2 of 6 or fewer)."""
    count = sum(char.isdigit() for char in written)
    head = 3 if count >= 10 else 0
    tail = 4 if count > 6 else 2
    out, seen = [], 0
    for char in written:
        if char.isdigit():
            seen += 1
            out.append(char if seen <= head or seen > count - tail else MASK_CHAR)
        else:
            out.append(char)
    return "".join(out)


def mask_email(value: str) -> str:
    """``zhang.wei@example.com`` → ``z***@example.com``: the domain stays, the local part's length never shows."""
    local, _, domain = value.partition("@")
    return f"{local[:1]}{MASK_CHAR * 3}@{domain}"


def mask_identifier(value: str) -> str:
    """An identity number with its first character and last 4 visible (``1*************123X``); one of 8
    characters or fewer keeps only its last 2."""
    if len(value) <= 8:
        return MASK_CHAR * max(len(value) - 2, 1) + value[-2:]
    return value[0] + MASK_CHAR * (len(value) - 5) + value[-4:]


def _mask_spans(text: str) -> list[tuple[int, int, str]]:
    """The personal values of ``text``: ``(start, end, masked)``, in order, never overlapping."""
    spans: list[tuple[int, int, str]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= s or start >= e for s, e, _ in spans)

    for match in ID_NUMBER_RE.finditer(text):
        if is_resident_id(match):  # an order number with a date inside is not masked as an identity number
            spans.append((match.start(), match.end(), mask_identifier(match.group(0))))
    for match in _MASK_PASSPORT.finditer(text):
        if free(*match.span("v")):
            spans.append((*match.span("v"), mask_identifier(match.group("v"))))
    for match in _MASK_EMAIL.finditer(text):  # before phones: 13812341234@qq.com is an address
        if free(*match.span()):
            spans.append((match.start(), match.end(), mask_email(match.group(0))))
    for phone in find_phones(text):
        if not phone.hotline and free(phone.start, phone.end):
            spans.append((phone.start, phone.end, _mask_digits(text[phone.start : phone.end])))
    return sorted(spans)


def mask_text(text: str) -> str:
    """``text`` with its phone numbers, e-mail addresses and identity numbers masked (see above). Idempotent;
    text without personal values comes back unchanged."""
    if not text:
        return text
    out, done = [], 0
    for start, end, masked in _mask_spans(text):
        out += [text[done:start], masked]
        done = end
    return "".join(out) + text[done:]


def mask_obj(obj: Any) -> Any:
    """A masked copy of a JSON-like structure: every string through :func:`mask_text`, and the whole value under
    an identity key (``id_number``, ``passport`` …) through :func:`mask_identifier`. The input is not modified."""
    if isinstance(obj, dict):
        return {
            key: mask_identifier(value)
            if isinstance(key, str) and key.strip().lower() in _IDENTITY_KEYS and isinstance(value, str) and value
            else mask_obj(value)
            for key, value in obj.items()
        }
    if isinstance(obj, list):
        return [mask_obj(item) for item in obj]
    if isinstance(obj, str):
        return mask_text(obj)
    return obj


def masked_pairs(texts: list[str]) -> dict[str, str]:
    """What each masked form in ``texts`` stands for: ``{masked: full}``, only for the masked forms that stand
    for exactly one value (two stored numbers that both read 138****1234 give neither)."""
    found: dict[str, set[str]] = {}
    for text in texts:
        for start, end, masked in _mask_spans(text or ""):
            found.setdefault(masked, set()).add(text[start:end])
    return {masked: next(iter(full)) for masked, full in found.items() if len(full) == 1}


def unmask_obj(obj: Any, pairs: dict[str, str]) -> Any:
    """A copy of a JSON-like structure in which every masked form of ``pairs`` (:func:`masked_pairs`) is the
    full value again, wherever it stands in a string (``"138****1234"``, ``"call 138****1234"``). Keys, other
    strings and a masked form ``pairs`` does not know are left as they are. The input is not modified."""
    if not pairs:
        return obj
    if isinstance(obj, dict):
        return {key: unmask_obj(value, pairs) for key, value in obj.items()}
    if isinstance(obj, list):
        return [unmask_obj(item, pairs) for item in obj]
    if isinstance(obj, str) and MASK_CHAR in obj:
        if obj in pairs:
            return pairs[obj]
        pattern = re.compile("|".join(re.escape(m) for m in sorted(pairs, key=len, reverse=True)))
        return pattern.sub(lambda match: pairs[match.group(0)], obj)
    return obj
