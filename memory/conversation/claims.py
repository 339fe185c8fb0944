"""What a memory states: the things it is about (its subjects), the attributes it gives values for, and the
values — the structure that decides which of two statements is true now (``memory.conversation.supersede``).

A **value** is a span whose kind the text's own form shows: a date (「8月21号」, "the 21st", "June 30"), a
weekday, a clock time, an amount of money, a phone number, an e-mail address, a postal address, a count with
what it counts (「4个人」, 「两晚」, "6 people", "2 nights" — what is counted is the attribute), a percentage, and
values that name their attribute with them: a quantity in a unit (「300M」, "10mg": the unit), a label's letter or
number ("Cohort A", "Gate 12": the label), a named one of a kind ("our High Street branch": the noun).
An **identifier** (「TS20240318009」, 「DX80」, "ref 7GAWK763") is never a value: it names the subject, wherever it
appears. The **masked text** is the text with each value replaced by its kind: two statements of one attribute
with different values read alike once their values are masked.

No list of change words decides anything here: which attribute a statement gives is read from the value's kind,
what a count counts and the masked words around it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from functools import lru_cache
from typing import Any

import cn2an

from memory.extraction.dates import local_tz

_CN_DIGITS = "零〇一二两三四五六七八九十百千"
_EN_NUMBERS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a single": 1,
}  # fmt: skip
_EN_NUMBER = r"(?:\d+|" + "|".join(sorted(_EN_NUMBERS, key=len, reverse=True)) + r")"
_MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7, "august": 8,
    "september": 9, "october": 10, "november": 11, "december": 12, "jan": 1, "feb": 2, "mar": 3, "apr": 4,
    "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
_MONTH = r"(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_WEEKDAYS_EN = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAYS_ZH = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}

#: Identifiers: letters and digits together (a code, not a word or a number), or a long run of digits that is
#: not a phone number. Ordinals ("21st"), clock times ("3pm") and quantities with a unit ("50kg", "5G") are not
#: identifiers: their letters only follow the digits.
_IDENT = re.compile(
    r"(?<![A-Za-z0-9])(?:[A-Za-z][A-Za-z0-9-]*\d[A-Za-z0-9-]*|\d[0-9-]*[A-Za-z]{2,}[0-9][A-Za-z0-9-]*|\d+[A-Za-z]{3,}[A-Za-z0-9]*"
    r"|\d{8,})(?![A-Za-z0-9])"
)
_NOT_IDENT = re.compile(
    r"(?i)^(?:\d+(?:st|nd|rd|th|am|pm|kg|km|gb|mb|ml|cm|mm|min|mins|hrs?|yuan|usd|gbp|rmb)|mp\d|[a-z]\d)$"
)

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("email", re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")),
    (
        "phone",
        re.compile(
            r"(?<!\d)(?:\+?86[ -]?)?1[3-9]\d(?:[ -]?\d{4}){2}(?!\d)"
            r"|(?<![\dA-Za-z])(?:\+\d{1,3}[ -]?)?(?:\(?0\d{2,4}\)?[ -]?)?\d{3,4}[ -]\d{4}(?!\d)"
            r"|(?<![\dA-Za-z])0\d{9,10}(?!\d)"
        ),
    ),
    (
        "address",
        re.compile(
            r"[\u4e00-\u9fff\dA-Za-z]{0,16}?(?:[省市区县镇]|[路街道巷])[\u4e00-\u9fff\dA-Za-z ]{0,20}?\d+\s*"
            r"(?:号楼|号院|号|栋|幢|单元|室|楼|层|座)"
            r"(?:[\u4e00-\u9fff ]{0,6}?\d+\s*(?:号楼|号院|号|栋|幢|单元|室|楼|层|座)?)*"
            r"|\b\d{1,5}\s+(?:[A-Z][a-z]+\s+){1,3}(?:Street|St|Road|Rd|Avenue|Ave|Lane|Ln|Drive|Dr|Way|Close|Court|Place|Boulevard|Blvd)\b\.?"
            # A flat in a building, without the street (「3栋2单元502」, 「5号楼1203室」): two numbered parts at least.
            r"|(?<![\dA-Za-z])\d+\s*(?:号楼|栋|幢)\s*(?:\d+\s*(?:单元|层|楼)\s*)?\d+\s*(?:室|号)?(?![\d单元层楼])"
        ),
    ),
    (
        "date",
        re.compile(
            rf"(?:\d{{4}}\s*年\s*)?(?:\d{{1,2}}|[{_CN_DIGITS}]{{1,3}})\s*月\s*(?:\d{{1,2}}|[{_CN_DIGITS}]{{1,3}})\s*[日号]"
            r"|\d{4}-\d{1,2}-\d{1,2}|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b"
            rf"|(?i:\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b)"
            r"|(?i:\bthe\s+\d{1,2}(?:st|nd|rd|th)\b)|(?<![\d月])\d{1,2}\s*[号日](?![\u4e00-\u9fff]*[楼栋单元室])"
        ),
    ),
    (
        "weekday",
        re.compile(
            r"(?:周|星期|礼拜)[一二三四五六日天]|(?i:\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b)"
        ),
    ),
    (
        "time",
        re.compile(
            rf"(?:上午|下午|晚上|中午|早上|傍晚|凌晨)?\s*(?:\d{{1,2}}|[{_CN_DIGITS}]{{1,3}})\s*[点時时](?:\s*(?:半|一刻|\d{{1,2}}\s*分?))?"
            r"|(?:(?:上午|下午|晚上|中午|早上|傍晚|凌晨)\s*)?(?<![\d:.])\d{1,2}:\d{2}(?!:?\d)(?:\s*(?i:am|pm|a\.m\.|p\.m\.))?"
            r"|\b\d{1,2}\s*(?i:am|pm|a\.m\.|p\.m\.)"
        ),
    ),
    (
        "money",
        re.compile(
            r"[¥￥$£€]\s*\d[\d,]*(?:\.\d+)?|\d[\d,]*(?:\.\d+)?\s*(?:元|块钱|块|(?i:yuan|rmb|dollars?|pounds?|euros?|usd|gbp))"
            rf"|[{_CN_DIGITS}万亿]+\s*(?:元|块钱|块)"
        ),
    ),
    ("percent", re.compile(r"\d+(?:\.\d+)?\s*%|百分之[\d{_CN_DIGITS}]+|\d+(?:\.\d+)?\s*折")),
]
#: Counts: a number and what it counts. Chinese: a measure word (「4个人」, 「两晚」, 「3张」); English: the noun after
#: the number ("6 people", "2 nights").
_COUNT_ZH = re.compile(
    rf"(?P<n>\d+(?:\.\d+)?|[{_CN_DIGITS}]{{1,3}})\s*(?P<m>个人|位|名|个月|个|晚|夜|天|小时|分钟|张|间|间房|次|件|台|份|套|星级|星|岁|口人|人|分(?!钟)"
    r"|兆|公斤|千克|斤|毫克|克|毫升|升|公里|千米|平方米|平米|米|英寸|寸|度)"
)
#: Chinese measure words that are units written in Latin letters as well: one attribute either way.
MEASURE_UNITS_ZH = {"兆": "m", "公斤": "kg", "千克": "kg", "毫克": "mg", "毫升": "ml", "公里": "km", "千米": "km"}
#: A quantity in a unit of measure written in Latin letters (「300M的」, "amlodipine 10mg", "a 2GB plan"): the unit
#: is the attribute, as a measure word is a Chinese count's. Units are a closed class.
_MEASURE = re.compile(
    r"(?i)(?<![A-Za-z0-9.])(?P<n>\d+(?:\.\d+)?)\s?"
    r"(?P<u>[mgk]bps|kwh|mah|[gm]hz|mcg|mg|kg|ml|km|cm|mm|[kmgt]b|lbs?|oz|g|l|m|w|v)(?![A-Za-z0-9])"
)
#: A thing's label and the letter or number that picks one of its kind ("Cohort A", "plan B.", "Gate 12"): the label
#: is the attribute. A lowercase label's letter ends its clause ("I think A is" names nothing); a number needs a
#: capitalised label ("Gate 12"; "for 2" is a count's, "at 5" a time's).
_LABELLED = re.compile(
    r"(?<![A-Za-z])(?P<l>[A-Z][a-z]{2,})\s+(?P<v>[A-HJ-Z])(?![A-Za-z0-9'’\-@.])"
    r"|(?<![A-Za-z])(?P<ll>[a-z]{3,})\s+(?P<lv>[A-HJ-Z])(?=\s*(?:[,;!?)]|\.(?!\w)|$))"
    r"|(?<![A-Za-z])(?P<cl>[A-Z][a-z]{2,})\s+(?P<n>\d{1,3}[A-Z]?)(?![\dA-Za-z%:'’\-]|[.,]\d)"
)
#: A named one of a kind: capitalised words after an article or preposition, then the lowercase noun they name one
#: of ("our Kingsway Station branch", "at the High Street branch"): the noun is the attribute, the name its value.
_NAMED = re.compile(
    r"\b(?:our|the|your|at|to|from|in)\s+(?P<name>[A-Z][a-z]+(?:\s+[A-Z][a-z]+){0,2})\s+(?P<head>[a-z]{4,})\b"
)
#: A criterion: a range or a bound of a number (「50-100元」, 「9点到12点」, 「4.5分以上」, 「500元以内」).
_CRITERION = re.compile(
    r"\d\s*[^\d\s，。,！？!?]{0,2}\s*(?:[-~～]|到|至)\s*\d|\d[^\d，。,！？!?]{0,3}?(?:以上|以下|以内|之间)"
)


def states_criterion(text: str) -> bool:
    """Whether ``text`` gives a range or a bound of a number: what is wanted, not what a thing is."""
    return bool(_CRITERION.search(text))


#: What follows 「十分」 when it is the adverb "very" (「十分感谢」, 「十分满意」) rather than ten points
#: (「评分是十分」, 「打了十分，」): a word, not the end of the clause or a particle.
_ADVERB_SHIFEN = re.compile(r"[\u4e00-\u9fff](?<![的了呢吧啊呀嘛])")
_COUNT_EN = re.compile(
    rf"(?i)\b(?P<n>{_EN_NUMBER})[ -](?:(?:more|extra|adult|single|double|twin)\s+)?(?P<m>[a-z]{{3,}})\b"
)
_COUNT_NOUNS_EN = {"person": "people", "persons": "people", "guests": "people", "guest": "people", "adults": "people",
                   "adult": "people", "people": "people", "nights": "night", "night": "night", "days": "day",
                   "day": "day", "tickets": "ticket", "ticket": "ticket", "stars": "star", "star": "star",
                   "rooms": "room", "room": "room", "seats": "seat", "seat": "seat", "weeks": "week", "week": "week",
                   "items": "item", "item": "item", "bags": "bag", "bag": "bag", "children": "child",
                   "kids": "child"}  # fmt: skip
#: The English words that name what a count counts ("people", "nights", "tickets"): an attribute, never a choice.
COUNTED_WORDS_EN = frozenset(_COUNT_NOUNS_EN)
_COUNT_MEASURES_ZH = {
    "个人": "人",
    "个月": "月",
    "位": "人",
    "名": "人",
    "口人": "人",
    "人": "人",
    "夜": "晚",
    "间房": "间",
    "星级": "星",
}
#: Words before a letter or a number that are no label of a thing: months and weekdays (dates), and words a
#: number follows as an amount or a time ("Room for 2", "Flat 4" is an address's).
_NOT_LABELS = frozenset({*_MONTHS, *_WEEKDAYS_EN, "flat", "unit", "apartment", "suite", "and", "but", "than", "over",
                         "under", "about", "around", "until", "till", "between", "after", "before", "from", "plus",
                         "minus", "only", "also", "then", "call", "text", "dial", "press", "option", "step",
                         "page", "line", "number", "no"})  # fmt: skip
#: Words after a name that are not the noun it names one of: prepositions, conjunctions, adverbs, a closed class.
_NOT_HEADS = frozenset({"before", "after", "until", "till", "since", "around", "about", "near", "into", "onto", "over",
                        "under", "then", "than", "when", "where", "which", "while", "that", "what", "whom", "whose",
                        "instead", "please", "because", "though", "also", "only", "either", "neither", "both",
                        "tomorrow", "tonight", "today", "yesterday", "area", "leaving", "going", "arriving",
                        "departing", "would", "could", "should", "will", "shall", "must", "might"})  # fmt: skip
_NOT_COUNTED_EN = frozenset({"am", "pm", "and", "the", "for", "minutes", "minute", "hours", "hour", "percent",
                             "pounds", "pound", "dollars", "yuan", "euros", "st", "nd", "rd", "th", "times", "this",
                             "was", "yes", "its", "has", "does", "always", "less", "plus", "minus",
                             "thus"})  # fmt: skip

#: Words that end a statement's validity at a date (a coupon's, an offer's, a quote's): the date that follows.
_VALID_UNTIL = re.compile(
    r"(?:有效期|有效|截止|截至|期限|过期|到期)(?:日期|时间)?(?:为|是|至|到|：|:)?\s*(?:至|到)?\s*$"
    r"|(?i:\b(?:valid|good|expires?|expiring|ends?|lasts?|runs?|available)\s+(?:until|till|through|thru|on|by)\s*$)"
    r"|(?i:\b(?:until|till|through|before|by)\s*$)"
)
_VALID_AFTER_DATE = re.compile(r"^\s*(?:前|之前|以前)?\s*(?:有效|到期|过期|截止)")
_VALID_DAYS = re.compile(
    rf"(?P<n>\d+|[{_CN_DIGITS}]{{1,3}})\s*(?P<u>天|日|个月|周|小时)内(?:有效|使用|用完)"
    r"|(?i:\b(?:valid|good)\s+for\s+(?P<en>\d+|one|two|three|seven|ten|thirty)\s+(?P<eu>days?|weeks?|months?|hours?)\b)"
)

_HOUSE_NUMBER = re.compile(r"[路街道巷弄村里]\s*$")
_BUILDING_AFTER = re.compile(r"\s*\d|\s*[\u4e00-\u9fff]{0,3}[楼栋幢座单元室院]")
_ADDRESS_LEAD = re.compile(r"^.*(?:为|是|到|在|成|：|:|住|送|寄|发|地址)(?=.*?[省市区县路街])")
#: At most this many English content words and Chinese characters besides its values: a brief follow-up.
BRIEF_WORDS = 5
BRIEF_CHARACTERS = 10
_MASK_TOKEN = re.compile(r"⟨\w+⟩")
_WORD = re.compile(r"[A-Za-z]+|[\u4e00-\u9fff]")
EN_STOP = frozenset(
    "a an the is are was were be been to of in on at for and or it its it's that this my me i you your we our "
    "us they them he she his her can could would will shall should do does did have has had please just so "
    "there here with from as by".split()
)


@dataclass(frozen=True)
class Value:
    """One value a text states: its ``kind``, the attribute it gives (``attr``: what a count counts, else the
    kind), its text as said and a normalised form for comparing (``norm``)."""

    kind: str
    attr: str
    text: str
    norm: str
    start: int
    end: int

    def to_data(self) -> dict[str, str]:
        return {"kind": self.kind, "attr": self.attr, "text": self.text, "value": self.norm}


@dataclass(frozen=True)
class Claim:
    """What one memory states: ``subjects`` (identifiers, upper-cased without separators), ``values``, the
    ``masked`` text, and when its validity ends by its own words (``valid_until``), if it says."""

    text: str
    subjects: frozenset[str]
    values: tuple[Value, ...]
    masked: str
    valid_until: datetime | None = None
    words: frozenset[str] = field(default_factory=frozenset)

    @property
    def attrs(self) -> dict[str, set[str]]:
        """Each attribute it gives, with the values it gives it."""
        out: dict[str, set[str]] = {}
        for v in self.values:
            out.setdefault(v.attr, set()).add(v.norm)
        return out

    def to_data(self) -> dict[str, Any]:
        """The stored form (a memory's ``data["about"]``)."""
        out: dict[str, Any] = {"subjects": sorted(self.subjects), "values": [v.to_data() for v in self.values]}
        if self.valid_until is not None:
            out["valid_until"] = self.valid_until.isoformat()
        return out


def _number(raw: str) -> int | None:
    raw = raw.strip().lower()
    if raw.isdigit():
        return int(raw)
    if raw in _EN_NUMBERS:
        return _EN_NUMBERS[raw]
    try:
        return int(cn2an.cn2an(raw, "smart"))
    except (ValueError, KeyError, TypeError):
        return None


def _norm_date(text: str, said: date | None) -> str:
    digits = [int(d) for d in re.findall(r"\d+", text)]
    low = text.lower()
    month = next((n for name, n in _MONTHS.items() if re.search(rf"\b{name}\b", low)), None)
    if "月" in text:
        parts = re.split(r"月", re.sub(r"^\d{4}\s*年", "", text))
        m, d = _number(parts[0].strip()), _number(re.sub(r"[日号\s]", "", parts[1]))
        return f"{m:02d}-{d:02d}" if m and d else text
    if re.match(r"\d{4}-", text):
        return f"{digits[1]:02d}-{digits[2]:02d}"
    if "/" in text and len(digits) >= 2:
        return f"{digits[0]:02d}-{digits[1]:02d}"
    if month and digits:
        return f"{month:02d}-{digits[0]:02d}"
    if digits:
        return f"--{digits[0]:02d}"  # a day of an unnamed month
    return text


def _norm_weekday(text: str) -> str:
    low = text.lower()
    for i, name in enumerate(_WEEKDAYS_EN):
        if name in low:
            return str(i)
    return str(_WEEKDAYS_ZH.get(text[-1], text))


def _norm_time(text: str) -> str:
    low = text.lower().replace(".", "")
    m = re.search(r"(\d{1,2}):(\d{2})", low)
    if m:
        hour, minute = int(m.group(1)), int(m.group(2))
    else:
        head = re.search(rf"(\d{{1,2}}|[{_CN_DIGITS}]{{1,3}})", text)
        hour = _number(head.group(1)) if head else None
        if hour is None:
            return text
        minute = (
            30 if "半" in text else 15 if "一刻" in text else int((re.search(r"(\d{1,2})\s*分", text) or [0, 0])[1])
        )
    if ("pm" in low or any(w in text for w in ("下午", "晚上", "傍晚"))) and hour < 12:
        hour += 12
    return f"{hour:02d}:{minute:02d}"


def _norm_money(text: str) -> str:
    digits = re.sub(r"[^\d.]", "", text)
    if digits:
        return digits.rstrip("0").rstrip(".") if "." in digits else digits
    n = _number(re.sub(r"[元块钱\s]", "", text))
    return str(n) if n is not None else text


def _squash(text: str) -> str:
    return re.sub(r"[\s\-()（）,，.:：]", "", text).casefold()


def _normalise(kind: str, text: str, said: date | None) -> str:
    if kind == "date":
        return _norm_date(text, said)
    if kind == "weekday":
        return _norm_weekday(text)
    if kind == "time":
        return _norm_time(text)
    if kind == "money":
        return _norm_money(text)
    if kind == "phone":
        return re.sub(r"\D", "", text)[-11:]
    return _squash(text)


def _free(taken: list[tuple[int, int]], start: int, end: int) -> bool:
    return all(end <= s or start >= e for s, e in taken)


def identifiers(text: str) -> set[str]:
    """The identifiers ``text`` names, upper-cased without separators (「工单TS20240318009」 → ``TS20240318009``)."""
    found = set()
    for m in _IDENT.finditer(text):
        raw = m.group(0).strip("-")
        if len(raw) < 4 or _NOT_IDENT.match(raw):
            continue
        if raw.isdigit() and re.fullmatch(r"1[3-9]\d{9}", raw):  # a mobile number is a value, not an id
            continue
        found.add(raw.replace("-", "").upper())
    return found


def values_of(text: str, said: date | None = None) -> list[Value]:
    """The values ``text`` states, in order, none overlapping another (an identifier's span is never one)."""
    taken: list[tuple[int, int]] = []
    for m in _IDENT.finditer(text):
        raw = m.group(0)
        if len(raw) >= 4 and not _NOT_IDENT.match(raw) and not re.fullmatch(r"1[3-9]\d{9}", raw):
            taken.append(m.span())
    out: list[Value] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            start, end = m.span()
            raw = m.group(0).strip()
            if not raw or not _free(taken, start, end):
                continue
            bare_day = kind == "date" and re.fullmatch(r"\d{1,2}\s*[号日]", raw)
            if bare_day and (_HOUSE_NUMBER.search(text[:start]) or _BUILDING_AFTER.match(text, end)):
                continue  # 「湖南路 15 号」, 「15 号 3 栋」: a house number, not a day
            if (
                kind == "time"
                and re.fullmatch(r"\d{1,2}\s*点", raw)
                and re.search(r"\d\s*点\s*\d", text[start : end + 2])
            ):
                continue  # 「3点5折」 aside, a decimal point read as 点 is no time
            if kind == "time" and raw == "一点" and not re.match(r"\s*(?:钟|整|到|至|前|后|左右|[-~～])", text[end:]):
                continue  # 「近一点」, 「便宜一点的」: "a little", not one o'clock (「下午一点」, 「一点钟」 are)
            if kind == "address":  # 「地址已更新为朝阳区…」: the address starts after the words that introduce it
                lead = _ADDRESS_LEAD.match(raw)
                if lead and lead.end() < len(raw):
                    start += lead.end()
                    raw = raw[lead.end() :]
            taken.append((start, end))
            out.append(Value(kind, kind, raw, _normalise(kind, raw, said), start, end))
    for m in _COUNT_ZH.finditer(text):
        if not _free(taken, m.start(), m.end()):
            continue
        raw_n = m.group("n")
        n = raw_n if re.fullmatch(r"\d+(?:\.\d+)?", raw_n) else _number(raw_n)
        if n is None or (m.group("m") == "个" and str(n) == "1"):
            continue  # 「找一个…」: an article, not a count
        if raw_n == "十" and m.group("m") == "分" and _ADVERB_SHIFEN.match(text, m.end()):
            continue  # 「十分感谢」: the adverb "very", one word, not ten points
        measure = _COUNT_MEASURES_ZH.get(m.group("m"), m.group("m"))
        taken.append(m.span())
        if measure in MEASURE_UNITS_ZH:  # 「500兆」 is 500M: a quantity in a unit, as the Latin one is
            out.append(Value("measure", f"measure:{MEASURE_UNITS_ZH[measure]}", m.group(0), str(n), *m.span()))
            continue
        out.append(Value("count", f"count:{measure}", m.group(0), str(n), m.start(), m.end()))
    for m in _MEASURE.finditer(text):
        if _free(taken, m.start(), m.end()):
            taken.append(m.span())
            n = m.group("n").rstrip("0").rstrip(".") if "." in m.group("n") else str(int(m.group("n")))
            out.append(Value("measure", f"measure:{m.group('u').lower()}", m.group(0), n, m.start(), m.end()))
    for m in _COUNT_EN.finditer(text):
        if not _free(taken, m.start(), m.end()):
            continue
        n = _number(m.group("n"))
        counted, end = _counted_en(text, m.start("m"))
        if n is None or counted is None:
            continue
        taken.append((m.start(), end))
        out.append(Value("count", f"count:{counted}", text[m.start() : end], str(n), m.start(), end))
    for m in _LABELLED.finditer(text):
        label = (m.group("l") or m.group("ll") or m.group("cl")).lower()
        if not _free(taken, m.start(), m.end()) or label in EN_STOP or label in _NOT_LABELS:
            continue
        taken.append(m.span())
        value = (m.group("v") or m.group("lv") or m.group("n")).lower()
        out.append(Value("label", f"label:{label}", m.group(0), value, m.start(), m.end()))
    for m in _NAMED.finditer(text):
        head = m.group("head")
        if head in EN_STOP or head in _NOT_HEADS or head.endswith("ly"):
            continue
        if not _free(taken, m.start("name"), m.end("name")):
            continue
        taken.append(m.span("name"))
        name = m.group("name")
        out.append(Value("name", f"name:{head}", name, _squash(name), m.start("name"), m.end("name")))
    return sorted(out, key=lambda v: v.start)


def _counted_en(text: str, start: int) -> tuple[str | None, int]:
    """What an English count counts: of the (at most three) words after the number, the first that names a
    unit of counting or is a plural noun ("9 Indian restaurants" → restaurant; "one that serves" → nothing)."""
    for m in re.finditer(r"[A-Za-z]+", text[start : start + 40]):
        word = m.group(0).lower()
        if word in _COUNT_NOUNS_EN:
            return _COUNT_NOUNS_EN[word], start + m.end()
        if word in EN_STOP or word in _NOT_COUNTED_EN or m.start() > 30:
            return None, start
        if word.endswith("s") and not word.endswith("ss") and len(word) > 3:
            return word[:-1], start + m.end()
    return None, start


def _end_of_day(day: date, tz: Any) -> datetime:
    return datetime.combine(day + timedelta(days=1), time(0), tzinfo=tz)


def _resolve_day(value: Value, said: datetime) -> date | None:
    """The calendar day a date value names, said at ``said``: a month and day without a year is the nearest such
    day (a coupon said in December to run to 「1月5日」 runs into the next year)."""
    if value.kind != "date" or not re.fullmatch(r"\d{2}-\d{2}", value.norm):
        return None
    month, day = (int(p) for p in value.norm.split("-"))
    year_match = re.search(r"(\d{4})", value.text)
    today = said.astimezone(local_tz(said)).date()
    if year_match:
        try:
            return date(int(year_match.group(1)), month, day)
        except ValueError:
            return None
    best = None
    for year in (today.year - 1, today.year, today.year + 1):
        try:
            candidate = date(year, month, day)
        except ValueError:
            continue
        if best is None or abs((candidate - today).days) < abs((best - today).days):
            best = candidate
    return best


def valid_until(text: str, values: list[Value], said: datetime) -> datetime | None:
    """When the statement's own words end its validity (「有效期到6月30日」, "valid until June 30", 「7天内有效」),
    resolved against ``said`` (when it was said, not the server's clock): the end of that day in the message's
    time zone. None when it says no such thing."""
    tz = local_tz(said)
    for value in values:
        if value.kind != "date":
            continue
        before, after = text[: value.start], text[value.end :]
        if _VALID_UNTIL.search(before[-12:]) or _VALID_AFTER_DATE.match(after):
            day = _resolve_day(value, said)
            if day is not None:
                return _end_of_day(day, tz)
    m = _VALID_DAYS.search(text)
    if m:
        n = _number(m.group("n") or m.group("en") or "")
        unit = (m.group("u") or m.group("eu") or "").lower()
        if n:
            days = n * (
                30 if "月" in unit or unit.startswith("month") else 7 if "周" in unit or unit.startswith("week") else 1
            )
            if "小时" in unit or unit.startswith("hour"):
                return said + timedelta(hours=n)
            return said + timedelta(days=days)
    return None


def words_of(masked: str) -> frozenset[str]:
    """The words of a masked text that carry meaning: English words other than function words, Chinese
    characters and character pairs, and the value kinds themselves."""
    tokens = set(_MASK_TOKEN.findall(masked))
    plain = _MASK_TOKEN.sub(" ", masked)
    en = [w.lower() for w in re.findall(r"[A-Za-z]+", plain)]
    tokens |= {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in en if w not in EN_STOP}
    for run in re.findall(r"[\u4e00-\u9fff]+", plain):
        tokens |= _pairs(run)
        tokens |= set(run)
    return frozenset(tokens)


def _pairs(run: str) -> set[str]:
    """The character pairs of a run of Chinese characters."""
    return {run[i : i + 2] for i in range(len(run) - 1)}


def claim_of(text: str, said: datetime | None = None) -> Claim:
    """What ``text`` states (see the module's docstring); ``said`` resolves dates without a year and validity."""
    values = values_of(text, said.date() if said else None)
    masked, last = [], 0
    for v in values:
        masked.append(text[last : v.start])
        masked.append(f"⟨{v.kind}⟩")
        last = v.end
    masked.append(text[last:])
    masked_text = "".join(masked)
    subjects = frozenset(identifiers(text))
    for ident in subjects:
        masked_text = re.sub(re.escape(ident), "⟨id⟩", masked_text, flags=re.I)
    until = valid_until(text, values, said) if said is not None else None
    return Claim(text, subjects, tuple(values), masked_text, until, words_of(masked_text))


#: How far before a value its label is read: Chinese characters, English words (within the value's clause).
LABEL_CHARACTERS = 6
LABEL_WORDS = 3
_CLAUSE_END = re.compile(r"[，。！？；,.!?;:：、\n]")


def label_of(claim: Claim, value: Value) -> frozenset[str]:
    """What names a value in its statement: the words just before it in its clause (「门票价格⟨money⟩」 → 门票, 票价,
    价格; "a budget of ⟨money⟩" → budget), as Chinese character pairs and English content words. Two values of
    one kind with a label in common give the same attribute (a ticket's price twice); a card's limit and its
    bill, both amounts, share none."""
    # A label lies between the value before this one and this one, when words stand there: 「门票100-150元能玩3小时」
    # labels the hours 能玩, not 门票 (the amount's). "a table for 2 on Saturday" has none between: the words before
    # both label both.
    start = max((v.end for v in claim.values if v.end <= value.start), default=0)
    return _label(claim.text[start : value.start]) or _label(claim.text[: value.start])


def clause_label(claim: Claim, value: Value) -> frozenset[str]:
    """The words just before a value in its clause, other values' words included ("the 4 instalments are now
    ⟨money⟩" → instalments, now): what names it when another value stands between it and its label."""
    return _label(claim.text[: value.start])


def _label(before: str) -> frozenset[str]:
    clause = _CLAUSE_END.split(before)[-1] if _CLAUSE_END.search(before) else before
    clause = _MASK_TOKEN.sub(" ", clause)
    pairs = _pairs("".join(re.findall(r"[\u4e00-\u9fff]", clause[-LABEL_CHARACTERS * 2 :]))[-LABEL_CHARACTERS:])
    en = [w.lower() for w in re.findall(r"[A-Za-z]+", clause) if w.lower() not in EN_STOP][-LABEL_WORDS:]
    return frozenset(pairs | set(en))


@lru_cache(maxsize=256)
def _zh_pairs(text: str) -> frozenset[str]:
    """The character pairs of ``text``'s Chinese characters, joined (a question's, read once for all candidates)."""
    return frozenset(_pairs("".join(re.findall(r"[\u4e00-\u9fff]+", text))))


def names_a_label(question: str, text: str) -> bool:
    """Whether ``question`` names the label of one of ``text``'s values (``names_label``). A text sharing no
    Chinese character pair with the question names none of its labels, and is not read further."""
    if not _zh_pairs(question) & _pairs("".join(re.findall(r"[\u4e00-\u9fff]+", text))):
        return False
    claim = claim_of(text)
    return any(names_label(question, claim, value.attr) for value in claim.values)


def names_label(question: str, claim: Claim, attr: str) -> bool:
    """Whether ``question`` names what labels a value of ``attr`` in ``claim`` (「景点门票是什么价位」 names 门票, the
    label of 「门票价格20-50元」's amount; a statement with one value of ``attr``): a Chinese question asks for a
    value by its label as often as by its kind.
    Chinese labels only: an English label is often the thing booked ("a table for 4 people"), which a question
    about the booking's day names as well."""
    values = [v for v in claim.values if v.attr == attr]
    if len(values) != 1:
        return False  # which of several amounts changed is not known: only the attribute asked by kind counts
    return bool(_zh_pairs(question) & {w for w in label_of(claim, values[0]) if re.fullmatch(r"[\u4e00-\u9fff]{2}", w)})


def masked_similarity(a: Claim, b: Claim) -> float:
    """How alike two statements read once their values are masked: the Dice overlap of their words."""
    if not a.words or not b.words:
        return 0.0
    return 2 * len(a.words & b.words) / (len(a.words) + len(b.words))


_ASKS_COUNT_EN = re.compile(r"(?i)\bhow\s+many\s+(?P<m>[a-z]+)|\bnumber\s+of\s+(?P<m2>[a-z]+)")
_ASKS_COUNT_ZH = re.compile(
    r"(?:几|多少)\s*个?(?P<m>小时|分钟)|(?:几|多少)\s*(?P<m2>个人|位|名|个月|个|晚|夜|天|张|间|次|件|台|份|套|星|人|分(?!钟)"
    r"|兆|公斤|千克|斤|毫克|克|毫升|升|公里|千米|平方米|平米|米|英寸|寸|度)"
)
_ASKS = (
    # how long: a duration is a count of hours, minutes, days, weeks or months (「能玩3小时 - 4小时」, "2 nights",
    # "valid for 6 months", 「有效期3个月」; an English count of hours is a clock time, not a count)
    (
        {"count:小时", "count:分钟", "count:天", "count:月", "count:day", "count:night", "count:week", "count:month"},
        re.compile(r"多长时间|多久|多长|(?i:\bhow\s+long\b)"),
    ),
    (
        {"date", "weekday"},
        re.compile(
            r"哪天|哪一天|几号|日期|星期几|周几|礼拜几|什么时候|哪日|(?i:\b(?:what|which)\s+(?:day|date)|\bwhen\b)"
        ),
    ),
    ({"time"}, re.compile(r"几点|什么时间|时间|(?i:\bwhat\s+time\b|\bwhen\b)")),
    (
        {"money"},
        re.compile(
            r"多少钱|价格|价位|费|价钱|多少元|金额|人均|(?i:\bhow\s+much\b|\bprice\b|\bcost\b|\bfee\b|\bfare\b)"
        ),
    ),
    ({"phone"}, re.compile(r"电话|手机|号码|(?i:\bphone\b|\bnumber\b)")),
    ({"email"}, re.compile(r"邮箱|邮件|(?i:\be-?mail\b)")),
    ({"address"}, re.compile(r"地址|住哪|送到哪|寄到哪|门牌|房号|哪栋|哪个单元|(?i:\baddress\b|\bwhere\b)")),
    ({"percent"}, re.compile(r"折扣|几折|(?i:\bdiscount\b|\bpercent)")),
    # what still holds: a coupon's, an offer's validity (``supersede._ends_validity`` changes it)
    (
        {"validity"},
        re.compile(r"能用|可用|有效|过期|失效|(?i:\bvalid\b|\bexpire|\bstill\s+(?:use|work|good)|\busable\b)"),
    ),
)


def asked_attrs(question: str) -> set[str]:
    """The attributes ``question`` asks for (「几个人」 → ``count:人``, "what time" → ``time``), in the attribute
    names of :func:`values_of`: how a question about a changed attribute finds the units that gave its old
    value."""
    out: set[str] = set()
    for m in _ASKS_COUNT_EN.finditer(question):
        noun = (m.group("m") or m.group("m2") or "").lower()
        out.add("count:" + _COUNT_NOUNS_EN.get(noun, noun[:-1] if noun.endswith("s") and len(noun) > 3 else noun))
    for m in _ASKS_COUNT_ZH.finditer(question):
        measure = m.group("m") or m.group("m2")
        measure = _COUNT_MEASURES_ZH.get(measure, measure)
        out.add(f"measure:{MEASURE_UNITS_ZH[measure]}" if measure in MEASURE_UNITS_ZH else f"count:{measure}")
    # A thing asked for by its label or its kind ("which cohort", "which branch"): the attribute of a labelled or
    # a named value (``_LABELLED``, ``_NAMED``).
    for word in re.findall(r"[A-Za-z]{3,}", question):
        word = word.lower()
        if word not in EN_STOP:
            singular = word[:-1] if word.endswith("s") and len(word) > 3 else word
            out |= {f"label:{word}", f"name:{word}", f"label:{singular}", f"name:{singular}"}
    for attrs, pattern in _ASKS:
        if pattern.search(question):
            out |= attrs
    return out


def is_brief(claim: Claim) -> bool:
    """Whether a statement says little besides its values (「调到周三晚上7点」, "How about 18:45 instead?"): a
    follow-up whose attribute is the one the conversation was just settling."""
    plain = _MASK_TOKEN.sub(" ", claim.masked)
    words = [w for w in re.findall(r"[A-Za-z]+", plain) if w.lower() not in EN_STOP]
    return len(words) <= BRIEF_WORDS and len(re.findall(r"[\u4e00-\u9fff]", plain)) <= BRIEF_CHARACTERS
