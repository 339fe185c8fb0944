"""Dates and times in chat text, resolved against the message's ``now`` (part of the rule extractor, S2).

:func:`extract_dates` finds absolute dates (2026-12-02, 12月5日, 三月十二号, Dec 5), relative ones (明天, 大前天,
上周五, 下下周三, 本周一, 3天后, 5天前, 上个月15号, 本月底, "next Monday", "last Friday", "the day before
yesterday", "3 days ago", "end of next month"; docs/memory-intelligence.md § Dates has the rules) and a clock time
right after them (下午3点, 下午三点到五点, "at 2 pm"); each becomes a ``date`` :class:`Found` whose value is the
moment in UTC. A date without a zone is read in ``now``'s zone; a month and day without a year take the nearest year.

:func:`parse_expiry` reads a validity right after a coupon (「有效期至 12 月 31 日」, 「7天内有效」, 「有效期到本月底」,
"valid for 7 days", "expires on Dec 10") and claims its date so it is not reported twice. Pure.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, date, datetime, time, timedelta, tzinfo

from memory.extraction.state import A, Extraction, Found, Z
from memory.text.numerals import parse_int

__all__ = ["DATE_PATTERNS", "extract_dates", "local_tz", "parse_expiry", "resolve"]

_MONTH_NAMES = {
    name: index
    for index, names in enumerate(
        (
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ),
        start=1,
    )
    for name in names
}
#: Month names; only an abbreviation takes a full stop ("Aug. 8"): "I moved in August. 8 Beech Terrace, …" is a
#: sentence's end, then an address, not the 8th of August.
_FULL_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
                "november", "december")  # fmt: skip
_MONTH_RE = (
    r"(?:"
    + "|".join(sorted(_FULL_MONTHS, key=len, reverse=True))
    + r"|(?:"
    + "|".join(sorted((n for n in _MONTH_NAMES if n not in _FULL_MONTHS), key=len, reverse=True))
    + r")\.?)"
)
_WEEKDAYS_ZH = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_WEEKDAYS_EN = {
    name: index
    for index, name in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))
}
_RELATIVE_DAYS_ZH = {
    "大后天": 3,
    "后天": 2,
    "明天": 1,
    "明早": 1,
    "明晚": 1,
    "今天": 0,
    "今晚": 0,
    "昨天": -1,
    "昨晚": -1,
    "大前天": -3,
    "前天": -2,
    "前晚": -2,
}
_RELATIVE_DAYS_EN = {"today": 0, "tonight": 0, "tomorrow": 1, "yesterday": -1}
# Small Chinese numerals for months, days and hours (三月十二号, 下午三点); larger ones are amounts, not dates.
_CN_SMALL = "[一二两三四五六七八九十]{1,3}"
_NUM = rf"(?:\d{{1,2}}|{_CN_SMALL})"
_MONTH_OFFSET = {
    "下下": 2, "下下个": 2, "下": 1, "下个": 1, "本": 0, "这": 0, "这个": 0, "上": -1, "上个": -1, "上上": -2,
    "上上个": -2, "": 0,
}  # fmt: skip
#: A weekday named with its week (「上周五」, 「下下星期三」, 「本周一」): that week's day, weeks starting on Monday.
_WEEK_OFFSET = {"上上": -2, "上": -1, "这": 0, "本": 0, "下": 1, "下下": 2}

_TIME_ZH = re.compile(
    rf"\s*(?P<period>上午|下午|晚上|早上|中午|凌晨|傍晚)?\s*(?P<hour>{_NUM})\s*(?:[点时](?:\s*(?P<minute>\d{{1,2}})\s*分?|"
    r"(?P<half>半))?|[:：](?P<minute2>\d{2}))"
)
_TIME_EN = re.compile(
    r"\s*(?:at\s+)?(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>a\.m\.|p\.m\.|am|pm)(?![A-Za-z])|"
    r"\s*(?:at\s+)?(?P<hour2>\d{1,2}):(?P<minute2>\d{2})",
    re.IGNORECASE,
)
_UNTIL_ZH = re.compile(rf"\s*(?:到|至|-|~|～|—)\s*(?:上午|下午|晚上|中午)?\s*(?P<hour>{_NUM})\s*[点时]")

DATE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "ymd",
        re.compile(r"(?<!\d)(?P<y>\d{4})\s*[-/.年]\s*(?P<m>\d{1,2})\s*[-/.月]\s*(?P<d>\d{1,2})(?:\s*[日号])?(?!\d)"),
    ),
    ("month_rel_zh", re.compile(rf"(?P<which>下下个?|下个?|本|这个?|上上个?|上个?)月\s*(?P<d>{_NUM})\s*[日号]")),
    (
        "month_end_zh",
        re.compile(
            rf"(?<![\d一二三四五六七八九十两])(?P<m>{_NUM})\s*月[底末]|(?P<which>下个?|本|这个?)月[底末]|"
            r"(?<![\d一二三四五六七八九十两个上])月[底末]"
        ),
    ),
    ("md_zh", re.compile(rf"(?<![\d一二三四五六七八九十两])(?P<m>{_NUM})\s*月\s*(?P<d>{_NUM})\s*[日号]")),
    ("mdy_en", re.compile(r"(?<!\d)(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4})(?!\d)")),
    (
        "month_day",
        re.compile(
            A + r"(?P<mon>" + _MONTH_RE + r")\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(?P<y>\d{4}))?" + Z,
            re.IGNORECASE,
        ),
    ),
    (
        "day_month",
        re.compile(
            A + r"(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>" + _MONTH_RE + r")(?:,?\s+(?P<y>\d{4}))?" + Z,
            re.IGNORECASE,
        ),
    ),
    ("rel_zh", re.compile("|".join(_RELATIVE_DAYS_ZH))),
    ("week_zh", re.compile(r"(?P<which>上上|下下|上|下|这|本)?(?:个)?(?:周|星期|礼拜)(?P<wd>[一二三四五六日天])")),
    ("after_zh", re.compile(r"(?P<n>\d{1,3})\s*天[后以]后?")),
    ("ago_zh", re.compile(r"(?P<n>\d{1,3})\s*天(?:之|以)?前")),
    (
        "two_days_en",
        re.compile(A + r"(?:the\s+)?day\s+(?P<dir>before\s+yesterday|after\s+tomorrow)" + Z, re.IGNORECASE),
    ),
    ("rel_en", re.compile(A + r"(?:today|tonight|tomorrow|yesterday)" + Z, re.IGNORECASE)),
    (
        "week_en",
        re.compile(
            A + r"(?:(?P<which>next|this|last|on|for|by|until|before)\s+)"
            r"(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)" + Z,
            re.IGNORECASE,
        ),
    ),
    ("in_days_en", re.compile(A + r"in\s+(?P<n>\d{1,3})\s+days?" + Z, re.IGNORECASE)),
    ("days_ago_en", re.compile(A + r"(?P<n>\d{1,3})\s+days?\s+ago" + Z, re.IGNORECASE)),
    ("month_end_en", re.compile(A + r"(?:the\s+)?end\s+of\s+(?P<which>the|this|next)\s+month" + Z, re.IGNORECASE)),
)


def _nearest_year(month: int, day: int, today: date) -> date | None:
    """A month and day without a year: the occurrence closest to today (last December, next January)."""
    options = []
    for year in (today.year - 1, today.year, today.year + 1):
        try:
            options.append(date(year, month, day))
        except ValueError:
            continue
    return min(options, key=lambda d: (abs((d - today).days), d)) if options else None


def _month_shift(today: date, months: int) -> tuple[int, int]:
    index = today.year * 12 + today.month - 1 + months
    return index // 12, index % 12 + 1


def _number(text: str) -> int:
    value = parse_int(text)
    if value is None:
        raise ValueError(text)
    return value


def resolve(kind: str, match: re.Match[str], today: date) -> date | None:
    """The calendar day a match of ``DATE_PATTERNS[kind]`` means on ``today``; None when it is no real date."""
    groups = match.groupdict()
    try:
        if kind in ("ymd", "mdy_en"):
            return date(int(groups["y"]), int(groups["m"]), int(groups["d"]))
        if kind == "md_zh":
            return _nearest_year(_number(groups["m"]), _number(groups["d"]), today)
        if kind in ("month_day", "day_month"):
            month = _MONTH_NAMES[groups["mon"].lower().rstrip(".")]
            if groups.get("y"):
                return date(int(groups["y"]), month, int(groups["d"]))
            return _nearest_year(month, int(groups["d"]), today)
        if kind == "month_rel_zh":
            year, month = _month_shift(today, _MONTH_OFFSET[groups["which"]])
            return date(year, month, _number(groups["d"]))
    except ValueError:
        return None
    if kind in ("month_end_zh", "month_end_en"):
        if groups.get("m"):
            month = parse_int(groups["m"]) or 0
            if not 1 <= month <= 12:
                return None
            year = today.year if month >= today.month else today.year + 1  # 「12月底」 is the coming one
        else:
            which = (groups.get("which") or "").lower()
            year, month = _month_shift(today, 1 if which in ("下", "下个", "next") else 0)
        return date(year, month, calendar.monthrange(year, month)[1])
    if kind == "rel_zh":
        return today + timedelta(days=_RELATIVE_DAYS_ZH[match.group(0)])
    if kind == "rel_en":
        return today + timedelta(days=_RELATIVE_DAYS_EN[match.group(0).lower()])
    if kind == "two_days_en":
        return today + timedelta(days=-2 if groups["dir"].lower().startswith("before") else 2)
    if kind in ("week_zh", "week_en"):
        weekday = (_WEEKDAYS_ZH if kind == "week_zh" else _WEEKDAYS_EN)[groups["wd"].lower()]
        which = (groups.get("which") or "").lower()
        monday = today - timedelta(days=today.weekday())
        if which in _WEEK_OFFSET:
            # 「下周三」 is the Wednesday of next week, 「上周五」 the Friday of last week, 「本周一」 this week's
            # Monday (past or not): the week is named, whatever today is.
            return monday + timedelta(days=7 * _WEEK_OFFSET[which] + weekday)
        if which == "next":
            return monday + timedelta(days=7 + weekday)
        if which == "last":
            # "last Friday": the latest Friday before today
            return today - timedelta(days=(today.weekday() - weekday - 1) % 7 + 1)
        # a bare weekday (「周三送到」, "on Friday") is the coming one, today included
        return today + timedelta(days=(weekday - today.weekday()) % 7)
    if kind in ("after_zh", "in_days_en"):
        return today + timedelta(days=int(groups["n"]))
    if kind in ("ago_zh", "days_ago_en"):
        return today - timedelta(days=int(groups["n"]))
    return None


def _clock(hour: int, minute: int, period: str, ampm: str) -> time | None:
    if (period in ("下午", "晚上", "傍晚") or ampm == "pm") and hour < 12:
        hour += 12
    if ampm == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59:
        return None
    return time(hour, minute)


def _time_after(text: str, position: int) -> tuple[time, int, time | None] | None:
    """A clock time right after a date, its end, and the end of a range (「下午3点到5点」) when one follows."""
    for pattern in (_TIME_ZH, _TIME_EN):
        match = pattern.match(text, position)
        if not match:
            continue
        groups = match.groupdict()
        hour = parse_int(groups.get("hour") or groups.get("hour2") or "0")
        if hour is None:
            return None
        minute = int(groups.get("minute") or groups.get("minute2") or (30 if groups.get("half") else 0))
        period = (groups.get("period") or "").strip()
        clock = _clock(hour, minute, period, (groups.get("ampm") or "").lower().replace(".", ""))
        if clock is None:
            return None
        until = None
        end = match.end()
        if pattern is _TIME_ZH and (later := _UNTIL_ZH.match(text, end)):
            later_hour = parse_int(later.group("hour"))
            if later_hour is not None:
                until = _clock(later_hour, 0, period, "")
                if until is not None and until > clock:
                    end = later.end()
                else:
                    until = None
        return clock, end, until
    return None


def local_tz(now: datetime) -> tzinfo:
    return now.tzinfo or UTC


def extract_dates(state: Extraction) -> None:
    """Every unclaimed date in the message as a ``date`` fact (value: the moment in UTC, ISO 8601)."""
    today = state.now.astimezone(local_tz(state.now)).date()
    for kind, pattern in DATE_PATTERNS:
        for match in pattern.finditer(state.text):
            if not state.free(*match.span()):
                continue
            day = resolve(kind, match, today)
            if day is None:
                continue
            end = match.end()
            clock = _time_after(state.text, end)
            granularity = "day"
            moment = datetime.combine(day, time(0, 0), tzinfo=local_tz(state.now))
            until: datetime | None = None
            if clock is not None:
                moment = datetime.combine(day, clock[0], tzinfo=local_tz(state.now))
                end = clock[1]
                granularity = "minute"
                if clock[2] is not None:
                    until = datetime.combine(day, clock[2], tzinfo=local_tz(state.now))
            iso = moment.astimezone(UTC).isoformat()
            spoken = state.text[match.start() : end].strip()
            data = {"date": iso, "local_date": day.isoformat(), "granularity": granularity, "text": spoken}
            if until is not None:
                data["until"] = until.astimezone(UTC).isoformat()
            state.add(Found(match.start(), end, "date", iso, data))


_VALID_UNTIL = re.compile(
    r"有效期\s*(?:至|到|截至|截止到?)|(?:有效期|使用期限)?(?:至|到)\s*(?=[本下这]?个?月[底末])|"
    r"(?:valid|good)\s+(?:until|till|through|thru)|expires?(?:\s+on)?|到期(?:日|时间)?[:：]?",
    re.IGNORECASE,
)
_VALID_DAYS = re.compile(
    rf"有效期\s*(?:为|是|:|：)?\s*(?P<zh>\d{{1,3}}|{_CN_SMALL})\s*天|(?P<zh2>\d{{1,3}}|{_CN_SMALL})\s*天内(?:有效|可用|使用)|"
    r"(?:valid|good)\s+for\s+(?P<en>\d{1,3})\s+days?|expires?\s+in\s+(?P<en2>\d{1,3})\s+days?",
    re.IGNORECASE,
)


def parse_expiry(state: Extraction, position: int) -> datetime | None:
    """When the coupon just before ``position`` expires: 「有效期至 12 月 31 日」, 「7天内有效」, "valid until"."""
    window = state.text[position : position + 40]
    match = _VALID_UNTIL.search(window)
    today = state.now.astimezone(local_tz(state.now)).date()
    if match:
        rest = window[match.end() :]
        for kind, pattern in DATE_PATTERNS:
            found = pattern.match(rest.lstrip())
            if found:
                day = resolve(kind, found, today)
                if day is not None:
                    if kind == "md_zh" and day < today:
                        day = _nearest_year(day.month, day.day, today + timedelta(days=183))
                    assert day is not None
                    offset = position + match.end() + (len(rest) - len(rest.lstrip()))
                    state.claimed.append((offset, offset + found.end()))
                    return datetime.combine(day, time(23, 59, 59), tzinfo=local_tz(state.now))
    days = _VALID_DAYS.search(window)
    if days:
        count = parse_int(next(group for group in days.groups() if group))
        if count is not None:
            return datetime.combine(today + timedelta(days=count), time(23, 59, 59), tzinfo=local_tz(state.now))
    return None
