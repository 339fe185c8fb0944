"""Numbers written in Chinese numerals (三百五十, 两千三, 一千九百八十八) or in digits (1,280) inside chat text.

``cn2an`` converts one numeral span at a time and nothing else: fed a whole sentence it rewrites words that merely
contain numeral characters (「一下」, 「十分感谢」, 「万一」). Callers therefore locate a span with :data:`CN_NUMBER`
inside a pattern that requires a unit or a label around it (「三百五十元」, 「积分还剩两千三百分」), then call
:func:`parse_number` on that span only. Pure.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

import cn2an

__all__ = ["CN_NUMBER", "NUMBER", "parse_int", "parse_number"]

_CN_DIGITS = "零〇一二两三四五六七八九"
#: A Chinese numeral span: at least one digit character (「十」 alone is ten; 「万」 alone is no number), and not
#: preceded by an approximation word (「几千」, 「上万」, 「好几百」 are no amounts).
CN_NUMBER = (
    rf"(?<![几数多上好第])(?:[{_CN_DIGITS}十百千万亿]*[{_CN_DIGITS}十][{_CN_DIGITS}十百千万亿]*(?:点[{_CN_DIGITS}]+)?)"
)
#: A number in digits (commas as thousands separators, a decimal part) or in Chinese numerals.
NUMBER = rf"(?:\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?|{CN_NUMBER})"
_DIGITS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
_CN = re.compile(CN_NUMBER)


def parse_number(span: str) -> Decimal | None:
    """The value of one numeral span: ``"1,280"`` → 1280, ``"三百五十"`` → 350, ``"两千三"`` → 2300; else None."""
    span = span.strip()
    if _DIGITS.fullmatch(span):
        try:
            return Decimal(span.replace(",", ""))
        except InvalidOperation:
            return None
    if not _CN.fullmatch(span):
        return None
    try:
        # "smart" reads colloquial short forms (两千三 = 2300, 三万五 = 35000) that "strict" refuses.
        value = cn2an.cn2an(span, "smart")
    except (ValueError, KeyError, IndexError):
        return None
    return Decimal(str(value))


def parse_int(span: str) -> int | None:
    """:func:`parse_number` for whole numbers only (a count, a day of the month, points)."""
    value = parse_number(span)
    if value is None or value != value.to_integral_value():
        return None
    return int(value)
