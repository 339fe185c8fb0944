"""The API's one JSON parser (``REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]``)."""

from __future__ import annotations

from typing import IO, Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser with a depth limit.

    Contract: a body nested deeper than ``config.text_input.MAX_JSON_DEPTH``
    raises ``InvalidJson`` (400 ``invalid_json``) before it is parsed, so no
    body can drive the parser or anything after it into ``RecursionError``;
    malformed JSON, bytes not in the declared charset and ``NaN``/``Infinity``
    raise ``ParseError`` (400 ``malformed_json``), as before."""

    def parse(self, stream: IO[bytes], media_type: str | None = None, parser_context: Any = None) -> Any:
        # Imported here: DRF imports this class while ``config.errors`` (which ``config.text_input`` needs) is
        # still importing ``rest_framework.views``.
        from config.text_input import loads_bounded

        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = stream.read().decode(encoding) if stream is not None else ""
            return loads_bounded(text, parse_constant=_refuse_constant if self.strict else None)
        except (ValueError, LookupError) as exc:  # UnicodeDecodeError is a ValueError; LookupError: unknown charset
            raise ParseError(f"JSON parse error - {exc}") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")
