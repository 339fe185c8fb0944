"""Hostile input stops here: JSON depth and the text that may be stored.

Every JSON document memdesk accepts (a REST body through
``config.parsers.BoundedJSONParser``, a WebSocket frame through
``chat.consumers``) goes through :func:`loads_bounded`, and every piece of
client text that may be stored (chat messages, ``client_msg_id``,
``end_user_id``, session ``metadata``, memory ``content``/``data``, tool
definitions and batch items) through :func:`clean_text` or
:func:`clean_json` before it reaches a service.

The dangers they guard:

- Python's ``json`` module, the JSON encoders that write to PostgreSQL and
  every walker of a parsed document recurse once per level: a body of
  ``[[[[…`` a hundred thousand deep raises ``RecursionError`` (a 500, or a
  WebSocket dropped without a close frame). The depth is therefore counted
  *before* parsing, by a flat scan that never recurses, and refused past
  ``MAX_JSON_DEPTH`` (400 ``invalid_json``).
- PostgreSQL stores neither NUL (``text`` and ``jsonb`` both refuse it) nor
  lone surrogates (they are not UTF-8): such text used to fail deep inside
  the ORM, sometimes after part of a turn was written. They and the other
  C0 control characters (tab, newline and carriage return excepted) are
  refused up front (400 ``invalid_text``).
- The same words in two Unicode forms (NFD「Café」 from macOS, NFC from
  everything else; full-width ``ＡＢＣ１２３`` from CJK input methods) must
  match in recall and in keyed facts, so text is stored in NFC with
  full-width ASCII letters and digits folded to ASCII. CJK punctuation
  (，。「」) is left alone: it is meaningful text, not a variant.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from rest_framework import serializers

from config.errors import ApiError

#: The deepest JSON nesting accepted anywhere (objects and arrays count
#: alike). Real payloads (metadata, memory data, JSON Schemas of tools) stay
#: far below it; it is low enough that every recursive encoder and walker
#: downstream stays clear of Python's recursion limit.
MAX_JSON_DEPTH = 64

# Strings are skipped whole (their brackets do not count); a string that
# never ends is left to the parser to refuse.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)

# Full-width ASCII digits and letters → ASCII; nothing else (U+FF01–FF0F,
# U+FF1A–FF20, … are punctuation that CJK text uses on purpose).
_FULLWIDTH_FOLD = {
    cp: cp - 0xFEE0 for lo, hi in ((0xFF10, 0xFF19), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A)) for cp in range(lo, hi + 1)
}

# Refused characters: C0 controls except tab, newline, carriage return;
# and surrogates, which in a Python str can only be lone ones.
_FORBIDDEN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")


class InvalidJson(ApiError):
    """The document is nested deeper than ``MAX_JSON_DEPTH``."""

    code = "invalid_json"


class InvalidText(ApiError):
    """Text holds a character memdesk will not store (NUL, a lone surrogate,
    another C0 control character)."""

    code = "invalid_text"


def json_too_deep(raw: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text ``raw`` opens more than ``limit`` nested objects
    or arrays. A flat scan over brackets outside strings: it never recurses,
    whatever the input, and does not check the syntax (the parser does)."""
    depth = 0
    for match in _JSON_TOKEN.finditer(raw):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                return True
        elif token in ("]", "}"):
            depth -= 1
    return False


def loads_bounded(raw: str | bytes, **kwargs: Any) -> Any:
    """``json.loads`` that refuses documents nested deeper than
    ``MAX_JSON_DEPTH`` with :class:`InvalidJson` before parsing. Malformed
    JSON raises ``ValueError`` as ``json.loads`` does (bytes that are not
    UTF-8: ``UnicodeDecodeError``, a ``ValueError`` too)."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    if json_too_deep(text):
        raise InvalidJson(f"JSON must not be nested more than {MAX_JSON_DEPTH} levels deep")
    return json.loads(text, **kwargs)


def clean_text(value: str, *, field: str = "text") -> str:
    """``value`` in NFC with full-width ASCII letters and digits folded to
    ASCII. Raises :class:`InvalidText` (naming ``field``) for NUL, lone
    surrogates and C0 control characters other than tab, CR and LF."""
    bad = _FORBIDDEN.search(value)
    if bad is not None:
        raise InvalidText(
            f"{field} must not contain the character U+{ord(bad.group()):04X} (control characters other than "
            "tab and newlines, NUL and lone surrogates are refused)"
        )
    return unicodedata.normalize("NFC", value).translate(_FULLWIDTH_FOLD)


def clean_json(value: Any, *, field: str) -> Any:
    """A copy of the JSON value ``value`` with every string (object keys
    included) passed through :func:`clean_text`. Raises :class:`InvalidJson`
    past ``MAX_JSON_DEPTH`` and when two keys of one object become the same
    key, :class:`InvalidText` for a refused character. Walks with an
    explicit stack: a value built in Python (not parsed) may be arbitrarily
    deep."""
    holder: list[Any] = [None]
    # (source, the container to write into, the key or index to write at, depth)
    stack: list[tuple[Any, Any, Any, int]] = [(value, holder, 0, 0)]
    while stack:
        item, parent, slot, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= MAX_JSON_DEPTH:
                raise InvalidJson(f"{field} must not be nested more than {MAX_JSON_DEPTH} levels deep")
            if isinstance(item, dict):
                copy: Any = {}
                for key, child in item.items():
                    clean_key = clean_text(str(key), field=f"{field} key")
                    if clean_key in copy:
                        raise InvalidJson(f"{field} has two keys that are the same text once normalised: {clean_key!r}")
                    copy[clean_key] = None
                    stack.append((child, copy, clean_key, depth + 1))
            else:
                copy = [None] * len(item)
                stack.extend((child, copy, index, depth + 1) for index, child in enumerate(item))
            parent[slot] = copy
        elif isinstance(item, str):
            parent[slot] = clean_text(item, field=field)
        else:
            parent[slot] = item
    return holder[0]


def field_text(value: str, *, field: str) -> str:
    """:func:`clean_text` for a serializer's ``validate_<field>``: a refusal
    becomes a field ``ValidationError`` carrying its code, so ``is_valid()``
    reports it like any other field error."""
    try:
        return clean_text(value, field=field)
    except ApiError as exc:
        raise serializers.ValidationError(exc.message, code=exc.code) from None


def field_json(value: Any, *, field: str) -> Any:
    """:func:`clean_json` for a serializer's ``validate_<field>`` (see :func:`field_text`)."""
    try:
        return clean_json(value, field=field)
    except ApiError as exc:
        raise serializers.ValidationError(exc.message, code=exc.code) from None


class TextField(serializers.CharField):
    """A ``CharField`` whose text is cleaned (:func:`clean_text`) before
    DRF's own checks, so a NUL or a lone surrogate is refused with code
    ``invalid_text`` and lengths are counted on the stored (NFC) form."""

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, str):
            data = field_text(data, field=self.field_name or "text")
        return super().to_internal_value(data)
