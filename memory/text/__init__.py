"""Pure text functions: no Django, no database (import-linter's "memory.text is pure" contract), so a benchmark
or a test runs them without settings.

- ``language`` — CJK ranges, language detection, the one word segmenter (rjieba), segmentation for lexical search.
- ``phones`` — phone numbers in chat text: Chinese mobiles and landlines, international numbers, hotlines.
- ``numerals`` — numbers in Chinese numerals (三百五十) or digits inside text.
- ``redaction`` — the one place that decides what must never be stored, summarised or logged (secrets).
- ``masking`` — personal data shown in part: 「手机号 138****1234」.
- ``mood`` — a message's mood, and which memories are care.
- ``compression`` — semantic compression to 150 characters: keep the facts, drop the noise, never slice.
"""

from memory.text.compression import clean, compress, compress_tool_result, entities, is_filler
from memory.text.language import (
    CJK_RE,
    TS_CONFIG,
    Language,
    cut,
    detect_language,
    document_text,
    language_of,
    query_terms,
    segment,
)
from memory.text.masking import MASK_CHAR, mask_obj, mask_text, masked_pairs, unmask_obj
from memory.text.mood import detect_mood
from memory.text.phones import find_phones
from memory.text.redaction import PLACEHOLDER_RE, redact, redact_obj

__all__ = [
    "CJK_RE",
    "Language",
    "MASK_CHAR",
    "PLACEHOLDER_RE",
    "TS_CONFIG",
    "clean",
    "compress",
    "compress_tool_result",
    "cut",
    "detect_language",
    "detect_mood",
    "document_text",
    "entities",
    "find_phones",
    "is_filler",
    "language_of",
    "mask_obj",
    "mask_text",
    "masked_pairs",
    "query_terms",
    "redact",
    "redact_obj",
    "segment",
    "unmask_obj",
]
