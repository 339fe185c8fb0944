"""Phone numbers in chat text: Chinese mobiles and landlines, international numbers, and hotlines that are nobody's.

:func:`find_phones` lists candidates in the order the rule extractor claims them: Chinese mobiles (an optional
+86/0086 prefix dropped, eleven digits kept), Chinese landlines written with a separator (0755-8888 6666),
international numbers with a ``+`` or ``00`` prefix — parsed by Google's ``phonenumbers`` — and numbers written
the national way of a region the deployment serves (``MEMDESK_PHONE_REGIONS``, by default US, GB, AU): "(415)
555-0143", "07700 900417", "0491 570 156". Every number outside China is given in E.164 (``+442079460958``,
``+14155550143``); a Chinese mobile is its eleven digits.

A national number is found by ``phonenumbers``' matcher in each region. It is taken when it is a valid number of
one of the regions (the first in the order given wins when several are), or, when valid in none, when a word of
phoning comes before it in its clause ("my number's 07700 900101", "he's on …" is not enough): numbers reserved
for fiction and numbers of new ranges are valid nowhere, and a bare string of digits (an order's
"123-456-7890") must not become a phone.

A hotline is flagged, not dropped, so the caller can claim its span: Chinese 400/800 numbers and 95xxx service
numbers, North-American toll-free prefixes (800, 833 … 888) and whatever ``phonenumbers`` types as toll-free,
premium-rate, shared-cost or a universal access number. A hotline is never an end user's phone. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import phonenumbers
from phonenumbers import Leniency, NumberParseException, PhoneNumberMatcher, PhoneNumberType

from memory.text.language import has_cjk

__all__ = ["DEFAULT_REGIONS", "PhoneMatch", "find_phones", "is_hotline", "written_forms"]

#: Regions whose national way of writing a number is read when the deployment names none.
DEFAULT_REGIONS: tuple[str, ...] = ("US", "GB", "AU")

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
# A word of phoning before a national number that is valid in no region, in the same clause.
_PHONE_WORD = re.compile(
    r"(?:电话|手机|号码|(?<![A-Za-z])(?:phone|number|call|ring|text|sms|tel|mobile|cell|reach|line|contact)"
    r"(?:'s|s|ed|ing)?(?![A-Za-z]))[^.;!?\n。；！？]{0,40}$",
    re.IGNORECASE,
)
# "my real no. is 07700 900246", "Tel.: …", "ph: …": an abbreviated phoning word right before the number.
_NUMBER_ABBREVIATION = re.compile(r"(?<![A-Za-z])(?i:no|tel|ph|mob)\.?\s*(?:is\s*|:\s*)?$")
# Right after a number, words that say it is one: "We have 07700 900234 on file for you", "… as your contact number".
_SAID_TO_BE_A_NUMBER = re.compile(
    r"\s+(?i:on\s+file|as\s+(?:your|my|the)\s+(?:[\w-]+\s+)?(?:number|phone|mobile|cell|contact))(?![A-Za-z])"
)
# Fewer digits are a local number without its area code ("555-0100") or a number's last digits ("ending 5521").
_NATIONAL_DIGITS = 9
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
    text as written, ``label`` ``"landline"`` for a Chinese landline, whether it is a hotline, and ``valid`` False
    for a national number valid in no region (taken for the phoning word before it)."""

    start: int
    end: int
    value: str
    shown: str
    label: str = ""
    hotline: bool = False
    valid: bool = True


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


def written_forms(value: str) -> list[str]:
    """The ways a stored phone value is written in text, digits only: itself, and for an E.164 number its national
    number with and without the trunk prefix (+447700900417 → 447700900417, 7700900417, 07700900417;
    +14155550132 → 14155550132, 4155550132). A text that repeats any of them repeats the number."""
    forms = [re.sub(r"\D", "", value)]
    if value.startswith("+"):
        try:
            number = phonenumbers.parse(value, None)
        except NumberParseException:
            return forms
        national = str(number.national_number)
        forms.append(national)
        written = re.sub(r"\D", "", phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL))
        if written != national:
            forms.append(written)
    return forms


#: Full-width digits, plus, hyphen and the ideographic space, each to its ASCII form: one character for one, so
#: the spans found in the translated text are the original's (「１３６００００７７８２」 is a mobile like any other).
_HALF_WIDTH = str.maketrans({**{chr(0xFF10 + d): str(d) for d in range(10)}, "＋": "+", "－": "-", "\u3000": " "})


def find_phones(text: str, regions: tuple[str, ...] = DEFAULT_REGIONS) -> list[PhoneMatch]:
    """Every phone-number candidate in ``text``, mobiles first; overlapping candidates are left to the caller.
    ``regions`` are the regions whose national numbers are read, the first preferred. Full-width digits are read
    as their ASCII digits; spans are the original text's."""
    text = text.translate(_HALF_WIDTH)
    found: list[PhoneMatch] = []
    for match in _CN_MOBILE.finditer(text):
        value = re.sub(r"\D", "", match.group("v"))
        found.append(PhoneMatch(match.start(), match.end(), value, value))
    national = _national(text, regions)
    read_nationally = {(phone.start, phone.end) for phone in national if phone.valid}
    latin = not has_cjk(text)
    for match in _CN_LANDLINE.finditer(text):
        if latin and match.span("v") in read_nationally:
            continue  # "020 7946 0321" in an English message is London's, not Guangzhou's
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
        found.append(PhoneMatch(*match.span("v"), "+1" + value, match.group("v").strip(), hotline=is_hotline(value)))
    found.extend(national)
    return found


def _glued(text: str, start: int, end: int) -> bool:
    """The digits run on from a letter or a digit ("SF1234567890", a tracking number): part of a code."""
    return (start > 0 and text[start - 1].isalnum() and text[start - 1].isascii()) or (
        end < len(text) and text[end].isalnum() and text[end].isascii()
    )


def _without_trunk_zero(written: str, region: str) -> bool:
    """Where a national number is dialled with a leading 0 (GB, AU…), one written without it is not a number
    of that region: "1234567890" is no British 01234 567890."""
    metadata = phonenumbers.PhoneMetadata.metadata_for_region(region)
    prefix = metadata.national_prefix if metadata is not None else None
    return prefix == "0" and not re.sub(r"\D", "", written).startswith("0")


def _national(text: str, regions: tuple[str, ...]) -> list[PhoneMatch]:
    """Numbers written the national way of ``regions``, each once, in E.164 (see the module's docstring)."""
    if sum(char.isdigit() for char in text) < _NATIONAL_DIGITS:
        return []  # no number is there to find: spare the matcher, the costliest part of reading a message
    spans: dict[tuple[int, int], list[phonenumbers.PhoneNumber]] = {}
    for region in regions:
        for match in PhoneNumberMatcher(text, region, leniency=Leniency.POSSIBLE):
            if text.startswith(("+", "00"), match.start):
                continue  # a number with its country code is _INTL's
            if _glued(text, match.start, match.end) or _without_trunk_zero(match.raw_string, region):
                continue
            spans.setdefault((match.start, match.end), []).append(match.number)
    found = []
    for (start, end), numbers in spans.items():
        if _CN_MOBILE.fullmatch(text[start:end]) or len(re.sub(r"\D", "", text[start:end])) < _NATIONAL_DIGITS:
            continue
        valid = [n for n in numbers if phonenumbers.is_valid_number(n)]
        if valid:
            number = valid[0]
        elif (
            _PHONE_WORD.search(text[max(0, start - 60) : start])
            or _NUMBER_ABBREVIATION.search(text, 0, start)
            or _SAID_TO_BE_A_NUMBER.match(text, end)
        ):
            number = numbers[0]
        else:
            continue
        e164 = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
        hotline = phonenumbers.number_type(number) in _HOTLINE_TYPES or (
            number.country_code == 1 and is_hotline(str(number.national_number))
        )
        found.append(PhoneMatch(start, end, e164, text[start:end].strip(), hotline=hotline, valid=bool(valid)))
    return found
