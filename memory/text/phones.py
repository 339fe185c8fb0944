"""Phone numbers in chat text: Chinese mobiles and landlines, international numbers, and hotlines that are nobody's.

:func:`find_phones` lists candidates in the order the rule extractor claims them: Chinese mobiles (an optional
+86/0086 prefix dropped, eleven digits kept), Chinese landlines written with a separator (0755-8888 6666),
international numbers with a ``+`` or ``00`` prefix — parsed by Google's ``phonenumbers`` and given in E.164
(``+442079460958``) — and North-American style numbers after a phone keyword ("phone (415) 555-0100"), written
with the area code in brackets ("(415) 555-0143"), or followed by "on file" / "as your … number".

A hotline is flagged, not dropped, so the caller can claim its span: Chinese 400/800 numbers and 95xxx service
numbers, North-American toll-free prefixes (800, 833 … 888) and whatever ``phonenumbers`` types as toll-free,
premium-rate, shared-cost or a universal access number. A hotline is never an end user's phone. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import phonenumbers
from phonenumbers import NumberParseException, PhoneNumberType

__all__ = ["PhoneMatch", "find_phones", "is_hotline"]

_CN_MOBILE = re.compile(r"(?<![\d+])(?:(?:\+|00)86[ -]?)?(?P<v>1[3-9]\d(?:[ -]?\d){8})(?![\d])")
_CN_LANDLINE = re.compile(r"(?<![\d+])(?P<v>0\d{2,3}[ -]\d{3,4}[ -]?\d{4})(?![\d])")
_INTL = re.compile(r"(?<![\w+])(?P<v>(?:\+|00(?=[1-9]))\d{1,3}(?:[ -]?\(?\d{1,4}\)?){2,5})(?![\d])")
_KEYWORD = re.compile(
    r"(?:电话|手机|号码|热线|(?<![A-Za-z])(?:phone|number|call|tel|mobile|cell|reach me at|line))[^0-9\n]{0,20}?"
    r"(?<![\d+])(?P<v>(?:1[ .-])?\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4})(?![\d])",
    re.IGNORECASE,
)
# Without a keyword before it, a North-American number still is one with its area code in brackets, or when the
# words after it say so: "We have (415) 555-0143 on file", "I've saved 415-555-0143 as your number".
_NANP_BARE = re.compile(
    r"(?<![\d+])(?P<v>(?:1[ .-])?(?:\(\d{3}\)\s?\d{3}[ .-]\d{4}(?![\d])|\d{3}[ .-]\d{3}[ .-]\d{4}(?![\d])"
    r"(?=\s+(?i:on\s+file|as\s+(?:your|my|the)\s+(?:[\w-]+\s+)?(?:number|phone|mobile|cell|contact))(?![A-Za-z]))))"
)
_CN_HOTLINE = re.compile(r"^(?:[48]00\d{7}|95\d{3,4}|1[01]\d{3})$")
_NANP_TOLL_FREE = re.compile(r"^1?(?:800|833|844|855|866|877|888)\d{7}$")
_HOTLINE_TYPES = frozenset(
    {
        PhoneNumberType.TOLL_FREE,
        PhoneNumberType.PREMIUM_RATE,
        PhoneNumberType.SHARED_COST,
        PhoneNumberType.UAN,
    }
)


@dataclass(frozen=True)
class PhoneMatch:
    """One phone number: its span, the normalised value (digits, or E.164 for an international number), the
    text as written, ``label`` ``"landline"`` for a Chinese landline, and whether it is a hotline."""

    start: int
    end: int
    value: str
    shown: str
    label: str = ""
    hotline: bool = False


def is_hotline(digits: str) -> bool:
    """A company's service number, by its digits alone: 400/800/95xxx in China, toll-free in North America."""
    return bool(_CN_HOTLINE.match(digits) or (_NANP_TOLL_FREE.match(digits) and len(digits) in (10, 11)))


def _international(written: str) -> tuple[str, bool] | None:
    """E.164 and the hotline flag of a ``+``/``00`` number, or None when it is not a possible phone number."""
    try:
        number = phonenumbers.parse("+" + written[2:] if written.startswith("00") else written, None)
    except NumberParseException:
        return None
    if not phonenumbers.is_possible_number(number):
        return None
    e164 = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    national = str(number.national_number)
    hotline = phonenumbers.number_type(number) in _HOTLINE_TYPES or (
        number.country_code in (1, 86) and is_hotline(national)
    )
    return e164, hotline


def find_phones(text: str) -> list[PhoneMatch]:
    """Every phone-number candidate in ``text``, mobiles first; overlapping candidates are left to the caller."""
    found: list[PhoneMatch] = []
    for match in _CN_MOBILE.finditer(text):
        value = re.sub(r"\D", "", match.group("v"))
        found.append(PhoneMatch(match.start(), match.end(), value, value))
    for match in _CN_LANDLINE.finditer(text):
        value = re.sub(r"\D", "", match.group("v"))
        shown = match.group("v").strip()
        found.append(PhoneMatch(*match.span("v"), value, shown, label="landline", hotline=is_hotline(value)))
    for match in _INTL.finditer(text):
        parsed = _international(match.group("v"))
        if parsed is not None:
            found.append(PhoneMatch(*match.span("v"), parsed[0], match.group("v").strip(), hotline=parsed[1]))
    for match in (*_KEYWORD.finditer(text), *_NANP_BARE.finditer(text)):
        value = re.sub(r"\D", "", match.group("v"))
        if len(value) == 11:  # "1-800-555-0199": the leading 1 is North America's country code
            value = value[1:]
        found.append(PhoneMatch(*match.span("v"), value, match.group("v").strip(), hotline=is_hotline(value)))
    return found
