"""Secret redaction: the one place that decides what must never be stored, summarised or logged.

Every text that becomes a memory, a summary or a log line passes through :func:`redact` first (S6 red line).
Secrets are replaced by typed placeholders such as ``[REDACTED:api_key]`` so a reader still sees *that* a
secret was given, never *which*.

What is a secret here: API keys, bearer tokens, JWTs, passwords and PINs, payment and bank card numbers
(Luhn-checked), CVV codes, IBANs (mod-97-checked), SWIFT/BIC codes after their label, Chinese resident ID
numbers (check digit, birth date and region checked, or labelled as one), private keys and credentials inside
URLs. What is **not** a secret: phone numbers, order numbers (an 18-digit one with a date inside included),
e-mail addresses — those are exactly the facts the memory layer keeps.

Where those facts are shown to a model or to staff, :mod:`memory.text.masking` hides part of them
(「手机号 138****1234」); redaction never does.

All functions are pure and deterministic; :func:`redact` is idempotent (``redact(redact(x)) == redact(x)``).
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from stdnum.cn import ric

__all__ = [
    "ID_NUMBER_RE", "PLACEHOLDER_RE", "RedactingFilter", "contains_secret", "is_resident_id", "placeholder", "redact",
    "redact_obj",
]  # fmt: skip

PLACEHOLDER_RE = re.compile(r"\[REDACTED:[a-z_]+\]")
#: A Chinese resident ID of 18 characters: 6-digit region, birth date 18xx-20xx, 3-digit sequence, check digit or X.
#: Redacted here, masked by :mod:`memory.text.masking`. The 15-digit form of before 1999 is left out: it cannot be
#: told from an order number.
ID_NUMBER_RE = re.compile(
    r"(?<![A-Za-z0-9])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx](?![A-Za-z0-9])"
)
#: Words just before a number that say it is an identity number, whatever its check digit: a mistyped ID is one too.
_ID_LABEL = re.compile(
    r"(?:身份证|证件|居民身份|\bid\s*card|identity\s*(?:card|number)|\bid)(?:\s*(?:no\.?|number|#))?[号码#:：\s是为]*$",
    re.IGNORECASE,
)


def is_resident_id(match: re.Match[str]) -> bool:
    """Whether an ``ID_NUMBER_RE`` match is an identity number: its check digit (ISO 7064 MOD 11-2), birth date
    and region hold (python-stdnum's ``cn.ric``), or a label just before it says so. An 18-digit order number
    with a date inside (44030420240318009X) is neither, and is kept."""
    if ric.is_valid(match.group(0)):
        return True
    return bool(_ID_LABEL.search(match.string[max(0, match.start() - 16) : match.start()]))


def _resident_id(match: re.Match[str]) -> str:
    return placeholder("id_number") if is_resident_id(match) else match.group(0)


# A value already replaced must not be matched again: keeps redact() idempotent.
_NOT_PLACEHOLDER = r"(?![\"']?\[REDACTED:)"
# A free-text secret value (a password) is printable ASCII up to whitespace, a non-ASCII character or the end,
# leaving trailing punctuation and closing quotes outside. Passwords are practically always ASCII, and stopping
# at CJK text keeps 「密码是多少」 or 「密码是abc123请帮我登录」 readable.
# (Case-insensitive matching is switched off inside: under IGNORECASE "s" would match "ſ", U+017F.)
_ASCII_VALUE = r"(?-i:[\x21-\x7e]+?(?=[\"'.,;!?)\]}]*(?:[\s\u0080-\uffff]|$)))"
# Words that follow "password is" in ordinary sentences; they describe the password, they are not one.
_NOT_A_PASSWORD = frozenset(
    "wrong incorrect correct invalid expired too not required missing empty weak strong changed reset the my your "
    "a an same different case still being now also fine ok okay working locked blank".split()
)


def placeholder(kind: str) -> str:
    """The placeholder that stands for a secret of ``kind`` (e.g. ``[REDACTED:password]``)."""
    return f"[REDACTED:{kind}]"


def _shannon_entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _looks_random(value: str) -> bool:
    """True for machine-generated tokens: long, mixed character classes, high entropy.

    A word like ``abcdefghijklmnop`` or a phrase after "token" is not redacted; ``9f8Kq2...`` is.
    """
    if len(value) < 16:
        return False
    classes = sum(bool(re.search(p, value)) for p in (r"[a-z]", r"[A-Z]", r"\d"))
    return classes >= 2 and _shannon_entropy(value) >= 3.0


def _luhn_ok(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        digit = int(char)
        if index % 2 == 1:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


_Rule = tuple[re.Pattern[str], Callable[[re.Match[str]], str]]


def _whole(kind: str) -> Callable[[re.Match[str]], str]:
    return lambda _match: placeholder(kind)


def _value_only(kind: str) -> Callable[[re.Match[str]], str]:
    """Keep the label (``password:``), replace the value group."""

    def replace(match: re.Match[str]) -> str:
        return match.group("label") + placeholder(kind)

    return replace


def _password(match: re.Match[str]) -> str:
    if match.group("value").lower() in _NOT_A_PASSWORD:
        return match.group(0)
    return match.group("label") + placeholder("password")


def _bearer(match: re.Match[str]) -> str:
    value = match.group("value")
    # "Bearer authentication" is prose; a token carries digits or symbols, or is long.
    if not (re.search(r"[\d._~+/=-]", value) or len(value) >= 24):
        return match.group(0)
    return match.group("label") + placeholder("bearer_token")


def _labelled_token(match: re.Match[str]) -> str:
    if not _looks_random(match.group("value")):
        return match.group(0)
    label = match.group("label")
    lowered = label.lower()
    if "secret" in lowered:
        kind = "secret"
    elif "token" in lowered or "令牌" in label:
        kind = "token"
    else:
        kind = "api_key"
    return label + placeholder(kind)


#: Words that name a bank card: after one, any 16-19 digit Luhn-valid number is a card, whatever its first digit
#: (Chinese debit cards are not all UnionPay 62…; older ones start with 9).
_BANK_CARD_CONTEXT = re.compile(
    r"(银行卡|借记卡|储蓄卡|信用卡|卡号|bank\s*card|debit\s*card|card\s*(?:no|number))", re.IGNORECASE
)
_ORDER_CONTEXT = re.compile(
    r"(订单|单号|运单|快递|物流|流水|交易号|工单|order|tracking|invoice|ref|transaction|serial)", re.IGNORECASE
)


def _card(text: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        digits = re.sub(r"\D", "", match.group(0))
        before = text[max(0, match.start() - 12) : match.start()]
        if 16 <= len(digits) <= 19 and _luhn_ok(digits) and _BANK_CARD_CONTEXT.search(before):
            return placeholder("card_number")
        # Real card numbers start with 2-6 (Mastercard, Amex, Visa, Mastercard, Discover/UnionPay) and pass Luhn;
        # an order number that happens to be long is spared when an order word sits right before it.
        if not (13 <= len(digits) <= 19 and digits[0] in "23456" and _luhn_ok(digits)):
            return match.group(0)
        if _ORDER_CONTEXT.search(before):
            return match.group(0)
        return placeholder("card_number")

    return replace


_STATIC_RULES: list[_Rule] = [
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL),
        _whole("private_key"),
    ),
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"), _whole("jwt")),
    (
        re.compile(r"(?P<label>\bBearer\s+)(?P<value>" + _NOT_PLACEHOLDER + r"[A-Za-z0-9._~+/=-]{8,})", re.IGNORECASE),
        _bearer,
    ),
    (
        re.compile(
            r"(?<![A-Za-z0-9])(?:"
            r"sk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{16,}"
            r"|mdk_(?:live|test)_[A-Za-z0-9_-]{8,}"
            r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
            r"|gh[pousr]_[A-Za-z0-9]{20,}"
            r"|github_pat_[A-Za-z0-9_]{20,}"
            r"|xox[abpr]-[A-Za-z0-9-]{10,}"
            r"|AIza[0-9A-Za-z_-]{35}"
            r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"
            r")"
        ),
        _whole("api_key"),
    ),
    # Credentials embedded in a URL: scheme://user:password@host
    (re.compile(r"(?P<label>://[^/\s:@]+:)" + _NOT_PLACEHOLDER + r"[^/\s@]+(?=@)"), _value_only("password")),
    (
        re.compile(
            r"(?P<label>(?:\b(?:password|passwd|passcode|pwd|pin)\b|密码|口令|PIN码)[\"']?\s*"
            r"(?:(?:is|[:=：])\s*|[是为][:：]?\s*)[\"']?)(?P<value>" + _NOT_PLACEHOLDER + _ASCII_VALUE + ")",
            re.IGNORECASE,
        ),
        _password,
    ),
    (
        re.compile(
            r"(?P<label>(?:\b(?:cvv2?|cvc2?|csc|security\s+code)\b|安全码|卡背后三位(?:数字)?)[\"']?\s*"
            r"(?:is|[:=：是为])?\s*[\"']?)\d{3,4}(?!\d)",
            re.IGNORECASE,
        ),
        _value_only("cvv"),
    ),
    (
        re.compile(
            r"(?P<label>(?:\b(?:api[_ -]?key|access[_ -]?key(?:[_ -]?id)?|secret(?:[_ -]?key)?|client[_ -]?secret"
            r"|(?:access|refresh|auth|api|session)[_ -]?token|token|key)\b|密钥|秘钥|令牌)[\"']?\s*"
            r"(?:(?:is|[:=：])\s*|[是为][:：]?\s*)?[\"']?)(?P<value>" + _NOT_PLACEHOLDER + r"[A-Za-z0-9_\-./+=]{16,})",
            re.IGNORECASE,
        ),
        _labelled_token,
    ),
    # SWIFT/BIC (bank 4 letters, country 2, location 2, branch 3 optional) only after its label: on its own it is
    # indistinguishable from an upper-case word such as "CUSTOMER". The value must be upper case.
    (
        re.compile(
            r"(?P<label>(?:(?<![A-Za-z])(?:swift|bic)(?:[ /-]?(?:code|bic))?(?:\s*代?码)?(?![A-Za-z])"
            r"|银行识别码|国际代码)[\"']?\s*"
            r"(?:(?:is|[:=：])\s*|[是为][:：]?\s*)?[\"']?)(?-i:[A-Z]{6}[A-Z0-9]{2}(?:[A-Z0-9]{3})?)(?![A-Za-z0-9])",
            re.IGNORECASE,
        ),
        _value_only("swift_bic"),
    ),
    (ID_NUMBER_RE, _resident_id),
]

# Standalone long random tokens (upper, lower and digits, 32+ chars) are secrets whatever precedes them.
_RANDOM_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_\-])(?=[A-Za-z0-9_\-]*[a-z])(?=[A-Za-z0-9_\-]*[A-Z])(?=[A-Za-z0-9_\-]*\d)"
    r"[A-Za-z0-9_\-]{32,}(?![A-Za-z0-9_\-])"
)
#: IBAN length by country (ISO 13616 registry). The exact length and the mod-97 check together keep codes that
#: merely look alike (a tracking number such as SF1234567890123: two letters, then digits) out.
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27, "BR": 29,
    "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
    "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
    "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
    "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29,
    "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24,
    "SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
    "YE": 30,
}  # fmt: skip
_IBAN_START = re.compile(r"(?<![A-Za-z0-9])([A-Za-z]{2})[0-9]{2}")


def _is_ascii_alnum(char: str) -> bool:
    return char.isascii() and char.isalnum()


def _iban_end(text: str, start: int, length: int) -> int | None:
    """Where an IBAN of ``length`` characters that starts at ``start`` ends. Its characters may be grouped by
    single spaces (the printed form, ``DE89 3704 …``). None when too few follow, or when more run on straight
    after the last one (then it is part of a longer code)."""
    taken, index = 0, start
    while index < len(text) and taken < length:
        char = text[index]
        if _is_ascii_alnum(char):
            taken += 1
        elif not (char == " " and index + 1 < len(text) and _is_ascii_alnum(text[index + 1])):
            break
        index += 1
    if taken < length or (index < len(text) and _is_ascii_alnum(text[index])):
        return None
    return index


def _iban_checksum_ok(compact: str) -> bool:
    """ISO 13616 / ISO 7064 mod 97-10: the country and check digits moved to the end, letters as 10..35."""
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in rearranged)) % 97 == 1


def _redact_ibans(text: str) -> str:
    # Candidates are tried at every start, not consumed by one regex: a look-alike that fails must not swallow a
    # real IBAN right after it.
    out: list[str] = []
    done = 0
    for match in _IBAN_START.finditer(text):
        length = _IBAN_LENGTHS.get(match.group(1).upper())
        if match.start() < done or length is None:
            continue
        end = _iban_end(text, match.start(), length)
        if end is not None and _iban_checksum_ok(text[match.start() : end].replace(" ", "").upper()):
            out += [text[done : match.start()], placeholder("iban")]
            done = end
    return "".join(out) + text[done:]


_CARD = re.compile(r"(?<![A-Za-z0-9+.\-])\d(?:[ -]?\d){12,18}(?![A-Za-z0-9.\-]|[ -]\d)")


def redact(text: str) -> str:
    """Return ``text`` with every secret replaced by a ``[REDACTED:<kind>]`` placeholder.

    Kinds: ``api_key``, ``bearer_token``, ``jwt``, ``token``, ``secret``, ``password``, ``card_number``, ``cvv``,
    ``iban``, ``swift_bic``, ``id_number``, ``private_key``. Phone numbers, order numbers and e-mail addresses
    are left untouched. Idempotent; non-secret text comes back byte for byte.
    """
    if not text:
        return text
    for pattern, replace in _STATIC_RULES:
        text = pattern.sub(replace, text)
    text = _redact_ibans(text)  # before cards: an IBAN's digit groups could pass for one
    text = _CARD.sub(_card(text), text)
    return _RANDOM_TOKEN.sub(lambda m: placeholder("token") if _looks_random(m.group(0)) else m.group(0), text)


def contains_secret(text: str) -> bool:
    """True when :func:`redact` would change ``text``."""
    return redact(text) != text


_EXACT_KEYS: dict[str, str] = {
    "password": "password",
    "passwd": "password",
    "pwd": "password",
    "pass": "password",
    "passcode": "password",
    "pin": "password",
    "密码": "password",
    "口令": "password",
    "secret": "secret",
    "client_secret": "secret",
    "secret_key": "secret",
    "private_key": "private_key",
    "token": "token",
    "access_token": "token",
    "refresh_token": "token",
    "id_token": "token",
    "auth_token": "token",
    "session_token": "token",
    "authorization": "token",
    "auth": "token",
    "cookie": "token",
    "set_cookie": "token",
    "令牌": "token",
    "credentials": "secret",
    "api_key": "api_key",
    "apikey": "api_key",
    "x_api_key": "api_key",
    "access_key": "api_key",
    "access_key_id": "api_key",
    "secret_access_key": "secret",
    "密钥": "api_key",
    "秘钥": "api_key",
    "card_number": "card_number",
    "cardnumber": "card_number",
    "card_no": "card_number",
    "pan": "card_number",
    "银行卡号": "card_number",
    "银行卡": "card_number",
    "bank_card": "card_number",
    "iban": "iban",
    "swift": "swift_bic",
    "swift_code": "swift_bic",
    "bic": "swift_bic",
    "swift_bic": "swift_bic",
    "卡号": "card_number",
    "cvv": "cvv",
    "cvv2": "cvv",
    "cvc": "cvv",
    "security_code": "cvv",
    "安全码": "cvv",
    "id_card": "id_number",
    "id_number": "id_number",
    "ssn": "id_number",
    "身份证": "id_number",
    "身份证号": "id_number",
}
_SUFFIX_KEYS: tuple[tuple[str, str], ...] = (
    ("_password", "password"),
    ("_token", "token"),
    ("_secret", "secret"),
    ("_api_key", "api_key"),
    ("_apikey", "api_key"),
    ("_private_key", "private_key"),
    ("_card_number", "card_number"),
    ("_iban", "iban"),
)


def _sensitive_kind(key: str) -> str | None:
    normalized = re.sub(r"[\s\-.]+", "_", key.strip().lower())
    if normalized in _EXACT_KEYS:
        return _EXACT_KEYS[normalized]
    for suffix, kind in _SUFFIX_KEYS:
        if normalized.endswith(suffix):
            return kind
    return None


def redact_obj(obj: Any) -> Any:
    """Return a redacted copy of a JSON-like structure; the input is not modified.

    Values under sensitive keys (password, token, secret, api_key, authorization, card_number, cvv, id_card and
    their variants such as ``access_token`` or ``db_password``) are replaced wholesale by a placeholder, whatever
    their type (``None`` and ``""`` stay as they are: there is nothing to hide). Every other string is passed
    through :func:`redact`. Tuples stay tuples; other scalars are returned unchanged.
    """
    if isinstance(obj, dict):
        result: dict[Any, Any] = {}
        for key, value in obj.items():
            kind = _sensitive_kind(key) if isinstance(key, str) else None
            if kind is not None and value not in (None, ""):
                result[key] = placeholder(kind)
            else:
                result[key] = redact_obj(value)
        return result
    if isinstance(obj, list):
        return [redact_obj(item) for item in obj]
    if isinstance(obj, tuple):
        return tuple(redact_obj(item) for item in obj)
    if isinstance(obj, str):
        return redact(obj)
    return obj


class RedactingFilter(logging.Filter):
    """A logging filter that makes records safe before any handler formats them.

    It merges ``record.args`` into the message, redacts the result and the formatted exception text, and clears
    ``args`` so a formatter cannot reintroduce the raw values. Attach it to handlers (not only loggers) so records
    propagated from child loggers are covered too. It never drops a record.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            # A malformed format string: keep both parts visible, but redacted.
            message = f"{record.msg} {record.args!r}"
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
