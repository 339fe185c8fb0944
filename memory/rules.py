"""Rule extractors: the pure, model-free part of fact extraction (S2, S7 stage 1, S13).

:func:`extract_facts` turns one chat message into typed :class:`Fact` objects for customer-service entities —
names, phone numbers, e-mails, order and tracking numbers, coupons, amounts, dates, addresses, products and the
session topic — in Chinese and English. Each fact carries its memory type and lifetime from :data:`LIFETIMES`, a
compressed human sentence (≤150 characters, in the message's language) and structured ``data``.

Secrets are redacted before extraction: a password or card number never becomes a fact. No database access.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from decimal import Decimal, InvalidOperation
from typing import Any

from memory.compression import (
    SURNAMES,
    Language,
    compress,
    detect_language,
    is_chinese_name,
    pos_cut,
)
from memory.redaction import redact

__all__ = ["LIFETIMES", "Fact", "detect_language", "extract_facts", "is_confirmation"]

DAY = 86_400

LIFETIMES: dict[str, tuple[str, int]] = {
    # Who the user is: stable for weeks, replaced only by an explicit change (S13).
    "name": ("user_profile", 30 * DAY),
    "phone": ("user_profile", 30 * DAY),
    "email": ("user_profile", 30 * DAY),
    "address": ("user_profile", 30 * DAY),
    # References to things outside the chat: an order lives through its return and refund window, a parcel
    # through its delivery, a product the user asked about only while the interest is fresh.
    "order_id": ("fact_reference", 30 * DAY),
    "tracking_number": ("fact_reference", 14 * DAY),
    "product": ("fact_reference", 7 * DAY),
    "coupon": ("fact_reference", 30 * DAY),  # replaced by the coupon's own expiry when the message states it
    "organization": ("fact_reference", 30 * DAY),
    # Meaningful only inside the current conversation: cleared on a topic switch (S10).
    "amount": ("session_state", DAY),
    "date": ("session_state", DAY),
    "place": ("session_state", DAY),
    "current_topic": ("session_state", DAY),
}

CONTENT_LIMIT = 150


@dataclass(frozen=True)
class Fact:
    """One extracted fact, ready to become a MemoryUnit (upserted by ``key``).

    ``type`` and ``expires_in`` come from :data:`LIFETIMES`; ``content`` is a compressed sentence of at most 150
    characters in the message's language; ``data`` holds the structured fields (``{"phone": "13912345678"}``);
    ``change`` is true when the user explicitly replaces an earlier value (「我换号了」, "my new number is").
    """

    key: str
    type: str
    value: str
    content: str
    expires_in: int
    data: dict[str, Any] = field(hash=False)
    change: bool = False


# --------------------------------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------------------------------

_CJK = "\u4e00-\u9fff"
_A = r"(?<![A-Za-z0-9_])"
_Z = r"(?![A-Za-z0-9_])"
_SEP = r"\s*(?:是|为|:|：|=|is|was)?\s*"
_CLAUSE_END = "，。；！？,;!?\n"


@dataclass
class _Found:
    start: int
    end: int
    key: str
    value: str
    data: dict[str, Any]
    label: str = ""  # overrides the content template's label, e.g. a landline instead of a mobile
    display: str = ""  # how the value is shown in content when it differs from the normalised value
    expires_in: int | None = None


class _Extraction:
    """The state of one message's extraction: text, spans already claimed, facts found."""

    def __init__(self, text: str, role: str, now: datetime) -> None:
        self.text = text
        self.role = role
        self.now = now
        self.claimed: list[tuple[int, int]] = []
        self.found: list[_Found] = []

    def free(self, start: int, end: int) -> bool:
        return not any(start < e and s < end for s, e in self.claimed)

    def add(self, item: _Found) -> None:
        self.claimed.append((item.start, item.end))
        self.found.append(item)

    def clause(self, start: int, end: int) -> str:
        left = max(self.text.rfind(char, 0, start) for char in _CLAUSE_END) + 1
        rights = [i for i in (self.text.find(char, end) for char in _CLAUSE_END) if i >= 0]
        return self.text[left : min(rights) if rights else len(self.text)]

    def about_user(self, start: int, end: int) -> bool:
        """A profile fact stated by the agent counts only when it is the user's (「您的手机」, "your address")."""
        if self.role != "assistant":
            return True
        return bool(re.search(r"您|(?<![A-Za-z])your?(?![A-Za-z])", self.clause(start, end), re.IGNORECASE))


def _digits(value: str) -> str:
    return re.sub(r"\D", "", value)


# --------------------------------------------------------------------------------------------------------------
# Dates
# --------------------------------------------------------------------------------------------------------------

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
_MONTH_RE = r"(?:" + "|".join(sorted(_MONTH_NAMES, key=len, reverse=True)) + r")\.?"
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
    "前天": -2,
}
_RELATIVE_DAYS_EN = {"today": 0, "tonight": 0, "tomorrow": 1, "yesterday": -1}

_TIME_ZH = re.compile(
    r"\s*(?P<period>上午|下午|晚上|早上|中午|凌晨|傍晚)?\s*(?P<hour>\d{1,2})\s*(?:[点时](?:\s*(?P<minute>\d{1,2})\s*分?|"
    r"(?P<half>半))?|[:：](?P<minute2>\d{2}))"
)
_TIME_EN = re.compile(
    r"\s*(?:at\s+)?(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>a\.m\.|p\.m\.|am|pm)(?![A-Za-z])|"
    r"\s*(?:at\s+)?(?P<hour2>\d{1,2}):(?P<minute2>\d{2})",
    re.IGNORECASE,
)

_DATE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "ymd",
        re.compile(r"(?<!\d)(?P<y>\d{4})\s*[-/.年]\s*(?P<m>\d{1,2})\s*[-/.月]\s*(?P<d>\d{1,2})(?:\s*[日号])?(?!\d)"),
    ),
    ("md_zh", re.compile(r"(?<!\d)(?P<m>\d{1,2})\s*月\s*(?P<d>\d{1,2})\s*[日号]")),
    ("mdy_en", re.compile(r"(?<!\d)(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4})(?!\d)")),
    (
        "month_day",
        re.compile(
            _A + r"(?P<mon>" + _MONTH_RE + r")\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(?P<y>\d{4}))?" + _Z,
            re.IGNORECASE,
        ),
    ),
    (
        "day_month",
        re.compile(
            _A + r"(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>" + _MONTH_RE + r")(?:,?\s+(?P<y>\d{4}))?" + _Z,
            re.IGNORECASE,
        ),
    ),
    ("rel_zh", re.compile("|".join(_RELATIVE_DAYS_ZH))),
    ("week_zh", re.compile(r"(?P<which>下|这|本)?(?:个)?(?:周|星期|礼拜)(?P<wd>[一二三四五六日天])")),
    ("after_zh", re.compile(r"(?P<n>\d{1,3})\s*天[后以]后?")),
    ("rel_en", re.compile(_A + r"(?:today|tonight|tomorrow|yesterday)" + _Z, re.IGNORECASE)),
    (
        "week_en",
        re.compile(
            _A + r"(?:(?P<which>next|this|on)\s+)(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|"
            r"sunday)" + _Z,
            re.IGNORECASE,
        ),
    ),
    ("in_days_en", re.compile(_A + r"in\s+(?P<n>\d{1,3})\s+days?" + _Z, re.IGNORECASE)),
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


def _resolve(kind: str, match: re.Match[str], today: date) -> date | None:
    groups = match.groupdict()
    try:
        if kind in ("ymd", "mdy_en"):
            return date(int(groups["y"]), int(groups["m"]), int(groups["d"]))
        if kind == "md_zh":
            return _nearest_year(int(groups["m"]), int(groups["d"]), today)
        if kind in ("month_day", "day_month"):
            month = _MONTH_NAMES[groups["mon"].lower().rstrip(".")]
            if groups.get("y"):
                return date(int(groups["y"]), month, int(groups["d"]))
            return _nearest_year(month, int(groups["d"]), today)
    except ValueError:
        return None
    if kind == "rel_zh":
        return today + timedelta(days=_RELATIVE_DAYS_ZH[match.group(0)])
    if kind == "rel_en":
        return today + timedelta(days=_RELATIVE_DAYS_EN[match.group(0).lower()])
    if kind in ("week_zh", "week_en"):
        weekday = (_WEEKDAYS_ZH if kind == "week_zh" else _WEEKDAYS_EN)[groups["wd"].lower()]
        ahead = (weekday - today.weekday()) % 7
        if (groups.get("which") or "").lower() in ("下", "next"):
            # 「下周三」 is the Wednesday of next week, whatever today is.
            return today - timedelta(days=today.weekday()) + timedelta(days=7 + weekday)
        return today + timedelta(days=ahead)
    if kind in ("after_zh", "in_days_en"):
        return today + timedelta(days=int(groups["n"]))
    return None


def _time_after(text: str, position: int) -> tuple[time, int] | None:
    for pattern in (_TIME_ZH, _TIME_EN):
        match = pattern.match(text, position)
        if not match:
            continue
        groups = match.groupdict()
        hour = int(groups.get("hour") or groups.get("hour2") or 0)
        minute = int(groups.get("minute") or groups.get("minute2") or (30 if groups.get("half") else 0))
        period = (groups.get("period") or "").strip()
        ampm = (groups.get("ampm") or "").lower().replace(".", "")
        if (period in ("下午", "晚上", "傍晚") or ampm == "pm") and hour < 12:
            hour += 12
        if ampm == "am" and hour == 12:
            hour = 0
        if hour > 23 or minute > 59:
            return None
        return time(hour, minute), match.end()
    return None


def _local_tz(now: datetime) -> tzinfo:
    return now.tzinfo or UTC


def _extract_dates(state: _Extraction) -> None:
    today = state.now.astimezone(_local_tz(state.now)).date()
    for kind, pattern in _DATE_PATTERNS:
        for match in pattern.finditer(state.text):
            if not state.free(*match.span()):
                continue
            day = _resolve(kind, match, today)
            if day is None:
                continue
            end = match.end()
            clock = _time_after(state.text, end)
            granularity = "day"
            moment = datetime.combine(day, time(0, 0), tzinfo=_local_tz(state.now))
            if clock is not None:
                moment = datetime.combine(day, clock[0], tzinfo=_local_tz(state.now))
                end = clock[1]
                granularity = "minute"
            iso = moment.astimezone(UTC).isoformat()
            spoken = state.text[match.start() : end].strip()
            state.add(
                _Found(
                    match.start(),
                    end,
                    "date",
                    iso,
                    {"date": iso, "local_date": day.isoformat(), "granularity": granularity, "text": spoken},
                )
            )


def _parse_expiry(state: _Extraction, position: int) -> datetime | None:
    """When the coupon just before ``position`` expires: 「有效期至 12 月 31 日」, 「有效期 7 天」, "valid until"."""
    window = state.text[position : position + 40]
    match = re.search(
        r"有效期\s*(?:至|到|截至|截止到?)|(?:valid|good)\s+(?:until|till|through)|expires?(?:\s+on)?|到期(?:日|时间)?[:：]?",
        window,
        re.IGNORECASE,
    )
    today = state.now.astimezone(_local_tz(state.now)).date()
    if match:
        rest = window[match.end() :]
        for kind, pattern in _DATE_PATTERNS:
            found = pattern.match(rest.lstrip())
            if found:
                day = _resolve(kind, found, today)
                if day is not None:
                    if kind == "md_zh" and day < today:
                        day = _nearest_year(day.month, day.day, today + timedelta(days=183))
                    assert day is not None
                    offset = position + match.end() + (len(rest) - len(rest.lstrip()))
                    state.claimed.append((offset, offset + found.end()))
                    return datetime.combine(day, time(23, 59, 59), tzinfo=_local_tz(state.now))
    days = re.search(r"有效期\s*(\d{1,3})\s*天|valid\s+for\s+(\d{1,3})\s+days?", window, re.IGNORECASE)
    if days:
        count = int(days.group(1) or days.group(2))
        return datetime.combine(today + timedelta(days=count), time(23, 59, 59), tzinfo=_local_tz(state.now))
    return None


# --------------------------------------------------------------------------------------------------------------
# Extractors, in the order they claim text
# --------------------------------------------------------------------------------------------------------------

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_CODE = r"#?(?P<v>[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){3,39})" + _Z
_TRACKING_KEYWORD = re.compile(
    r"(?:快递单号|运单号|物流单号|快递号|运单编号|(?<![A-Za-z])tracking(?:\s*(?:number|no\.?|#|id|code))?)"
    + _SEP
    + _CODE,
    re.IGNORECASE,
)
_TRACKING_BARE = re.compile(_A + r"(?P<v>(?:SF|YT|ZTO|STO|YD|JT|EMS)\d{9,15}|1Z[0-9A-Z]{16})" + _Z)
_ORDER = re.compile(
    r"(?:订单号|订单编号|订单|(?<![" + _CJK + r"])单号|(?<=[的我您你个那这])单号|"
    r"(?<![A-Za-z])order(?:\s*(?:number|no\.?|#|id|code))?)" + _SEP + _CODE,
    re.IGNORECASE,
)
_COUPON = re.compile(
    r"(?:优惠券|优惠码|折扣码|券码|兑换码|红包码|(?<![A-Za-z])(?:coupon(?:\s*code)?|promo(?:tion)?\s*code|"
    r"discount\s*code|voucher(?:\s*code)?))" + _SEP + r"[「“\"']?(?P<v>[A-Z0-9][A-Za-z0-9_-]{3,29})" + _Z,
    re.IGNORECASE,
)
_CN_MOBILE = re.compile(r"(?<![\d+])(?:(?:\+|00)86[ -]?)?(?P<v>1[3-9]\d(?:[ -]?\d){8})(?![\d])")
_CN_LANDLINE = re.compile(r"(?<![\d+])(?P<v>0\d{2,3}[ -]\d{3,4}[ -]?\d{4})(?![\d])")
_INTL_PHONE = re.compile(r"(?<![\w+])(?P<v>\+(?!86)\d{1,3}(?:[ -]?\(?\d{1,4}\)?){2,5})(?![\d])")
_KEYWORD_PHONE = re.compile(
    r"(?:电话|手机|号码|(?<![A-Za-z])(?:phone|number|call|tel|mobile|cell|reach me at))[^0-9\n]{0,12}?"
    r"(?<![\d+])(?!\(?[48]00)(?P<v>\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4})(?![\d])",  # 400/800: a company's hotline
    re.IGNORECASE,
)
_AMOUNT_SYMBOL = re.compile(
    r"(?P<sym>[¥￥$€£]|(?<![A-Za-z])(?:USD|CNY|RMB|EUR|GBP|US\$))\s?(?P<num>\d[\d,]*(?:\.\d+)?)(?P<mult>\s?[万千kK])?"
    + _Z
)
_AMOUNT_UNIT = re.compile(
    r"(?<![\d.,])(?P<num>\d[\d,]*(?:\.\d+)?)\s?(?P<mult>万|千)?\s?(?P<unit>元|块钱?|美元|美金|欧元|英镑|"
    r"(?:dollars?|bucks|yuan|euros?|pounds?|USD|CNY|RMB|EUR|GBP)(?![A-Za-z]))",
    re.IGNORECASE,
)
_CURRENCIES = {
    "¥": "CNY",
    "￥": "CNY",
    "元": "CNY",
    "块": "CNY",
    "块钱": "CNY",
    "cny": "CNY",
    "rmb": "CNY",
    "yuan": "CNY",
    "$": "USD",
    "us$": "USD",
    "usd": "USD",
    "dollar": "USD",
    "dollars": "USD",
    "bucks": "USD",
    "美元": "USD",
    "美金": "USD",
    "€": "EUR",
    "eur": "EUR",
    "euro": "EUR",
    "euros": "EUR",
    "欧元": "EUR",
    "£": "GBP",
    "gbp": "GBP",
    "pound": "GBP",
    "pounds": "GBP",
    "英镑": "GBP",
}
_CURRENCY_SYMBOL = {"CNY": "¥", "USD": "$", "EUR": "€", "GBP": "£"}
_ADDRESS_KEYWORD = re.compile(
    r"(?:收货地址|收件地址|送货地址|地址|住址|住在|寄到|送到|发到|改成|改为|改到|搬到|位于|在)"
    r"(?:是|为|:|：|改成|改为)?\s*(?P<v>[^，。；！？,;!?\n]{4,60})"
)
# Without a keyword, an address must open with a province or a city right after a pause or a copula:
# 「不是这个地址，是杭州市西湖区文三路 259 号」.
_ADDRESS_BARE = re.compile(
    r"(?:(?<![" + _CJK + r"])|(?<=[是在到为往]))(?![是在到为往])"
    r"(?P<v>[" + _CJK + r"]{2,8}?(?:省|自治区|市)[^，。；！？,;!?\n]{2,50})"
)
_ADDRESS_MARKERS = re.compile(r"省|自治区|市|区|县|镇|乡|村|路|街|道|巷|胡同|号|栋|单元|室|楼|小区|大厦")
_ADDRESS_TAIL = re.compile(r"^.*(?:号楼|号院|号|室|楼|栋|单元|层|座|大厦|小区|广场|中心|[路街道巷](?=\s*$))", re.S)
_EN_ADDRESS = re.compile(
    r"(?<![\w])\d{1,6}\s+(?:[A-Z][a-z]+\.?\s+){1,4}(?:Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|"
    r"Way|Court|Ct|Place|Pl|Terrace|Parkway|Pkwy)\.?(?:,?\s*(?:Apt|Apartment|Suite|Ste|Unit|#)\.?\s*[A-Za-z0-9-]+)?"
    r"(?:,\s*[A-Z][a-zA-Z]+(?:\s[A-Z][a-zA-Z]+)*)?(?:,\s*[A-Z]{2})?(?:\s+\d{5}(?:-\d{4})?)?"
)
_PRODUCT_KEYWORD = re.compile(
    r"(?:产品型号|型号|机型|货号|(?<![A-Za-z])model(?:\s*(?:number|no\.?))?)"
    + _SEP
    + r"(?P<v>[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){1,29})"
    + _Z,
    re.IGNORECASE,
)
_MODEL_PART = r"(?:\d+[A-Za-z]*|Pro|Max|Plus|Ultra|Mini|mini|Air|SE|Lite|Carbon|Paperwhite|Nova|Mate|X\d+|M\d|[A-Z]\d+)"
_PRODUCT_BRAND = re.compile(
    r"(?<![A-Za-z])(?P<v>(?:iPhone|iPad|MacBook|iMac|AirPods|Apple\sWatch|Galaxy|Pixel|Redmi|Xiaomi|ThinkPad|Surface|"
    r"Kindle|PlayStation|PS5|Nintendo\sSwitch|Mate|华为|小米|荣耀|OPPO|vivo|戴森|Dyson)(?:\s?"
    + _MODEL_PART
    + r")*)"
    + _Z
)
_NAME_SURNAME_ZH = re.compile(r"(?:本人|我|免贵)姓\s*(?P<v>[" + _CJK + r"]{1,2})")
_NAME_INTRO_ZH = re.compile(
    r"(?P<strength>我叫|我的名字(?:是|叫)|名字(?:是|叫)|姓名(?:是|为|:|：)?|叫我|我是|本人是?)\s*"
)
_NAME_EN = re.compile(
    r"(?i:(?P<strength>my name is|my name's|name's|call me|this is|i am|i'm|i’m))\s+"
    r"(?P<v>[A-Z][a-z]+(?:[ -][A-Z][a-z]+){0,2})" + _Z
)
_SURNAME_EN = re.compile(r"(?i:my (?:last name|surname|family name) is)\s+(?P<v>[A-Z][a-z]+)" + _Z)
_NOT_NAMES_EN = frozenset(
    "Fine Good Okay Ok Sorry Here Back Not Happy Glad Just So Very Really Sure Done Ready Afraid Calling Looking "
    "Chinese American British English French German Japanese Korean Indian Canadian Australian New Still Also "
    "Interested Trying Going Having Writing Wondering Unable Available Busy Tired Home Out In On The A An".split()
)
_TOPIC_ZH = re.compile(
    r"(?:在查|查一下|查询|查查|查|咨询|问一下|想问|想了解|了解一下|办理|我要|我想)\s*"
    r"(?P<v>[^，。；！？,;!?\n]{0,20}?(?:账单|订单|退款|退货|换货|物流|快递|发票|会员|优惠券?|套餐|宽带|话费|流量|投诉|"
    r"售后|维修|保修|积分|账户|账号|支付|付款|续费|预约|改签|理赔|充值|提额|分期|还款|报名|体检|课程|水费|电费|燃气费))"
)
_TOPIC_EN = re.compile(
    r"(?i:checking|check on|looking into|asking about|a question about|question about|help with|calling about|"
    r"here about|inquiring about|want to (?:ask about|check|complain about|return|cancel|change|update)|"
    r"need to (?:check|return|cancel|change))\s+(?P<v>(?i:my |the |a |an |your )?[\w -]{0,25}?(?i:bill|invoice|refund|"
    r"return|order|delivery|shipping|shipment|subscription|plan|account|payment|complaint|warranty|repair|exchange|"
    r"membership|coupon|password|package|parcel|booking|reservation)s?)" + _Z
)
_ORGANIZATION_ZH = re.compile(
    r"(?:公司名称|抬头|单位|公司)(?:是|为|:|：)\s*(?P<v>[^，。；,;\s]{2,40}?(?:有限公司|公司|集团|银行|医院|大学|学院))"
)


def _extract_emails(state: _Extraction) -> None:
    for match in _EMAIL.finditer(state.text):
        if state.free(*match.span()) and state.about_user(*match.span()):
            local, _, domain = match.group(0).partition("@")
            value = f"{local}@{domain.lower()}"
            state.add(_Found(match.start(), match.end(), "email", value, {"email": value}))


def _extract_codes(state: _Extraction) -> None:
    for pattern, key in (
        (_TRACKING_KEYWORD, "tracking_number"),
        (_TRACKING_BARE, "tracking_number"),
        (_ORDER, "order_id"),
    ):
        for match in pattern.finditer(state.text):
            value = match.group("v")
            start, end = match.span("v")
            if not re.search(r"\d", value) or not state.free(start, end):
                continue
            state.add(_Found(start, end, key, value.upper() if key == "tracking_number" else value, {key: value}))


def _extract_coupons(state: _Extraction) -> None:
    for match in _COUPON.finditer(state.text):
        value = match.group("v")
        start, end = match.span("v")
        if not (re.search(r"\d", value) or value.isupper()) or not state.free(start, end):
            continue
        data: dict[str, Any] = {"coupon": value}
        expires_in = None
        expiry = _parse_expiry(state, end)
        if expiry is not None:
            expires_in = int((expiry - state.now).total_seconds())
            if expires_in <= 0:
                continue  # an expired coupon is no memory worth recalling
            data["expires_at"] = expiry.astimezone(UTC).isoformat()
            data["valid_until"] = expiry.date().isoformat()
        data["issued_by_agent"] = state.role == "assistant"
        state.add(_Found(start, end, "coupon", value, data, expires_in=expires_in))


def _extract_phones(state: _Extraction) -> None:
    for pattern, label in ((_CN_MOBILE, ""), (_CN_LANDLINE, "landline"), (_INTL_PHONE, ""), (_KEYWORD_PHONE, "")):
        for match in pattern.finditer(state.text):
            start, end = match.span("v") if pattern is not _CN_MOBILE else match.span()
            if not state.free(start, end) or not state.about_user(start, end):
                continue
            shown = match.group("v").strip()
            digits = _digits(shown)
            if pattern is _CN_MOBILE:
                value = digits
                shown = digits
            elif pattern is _INTL_PHONE:
                if not 8 <= len(digits) <= 15:
                    continue
                value = "+" + digits
            else:
                value = digits
            state.add(_Found(start, end, "phone", value, {"phone": value}, label=label, display=shown))


def _extract_amounts(state: _Extraction) -> None:
    for pattern in (_AMOUNT_SYMBOL, _AMOUNT_UNIT):
        for match in pattern.finditer(state.text):
            if not state.free(*match.span()):
                continue
            raw = (match.groupdict().get("sym") or match.groupdict().get("unit") or "").lower()
            currency = _CURRENCIES.get(raw, "CNY")
            try:
                number = Decimal(match.group("num").replace(",", ""))
            except InvalidOperation:
                continue
            multiplier = (match.group("mult") or "").strip()
            number *= {"万": 10_000, "千": 1_000, "k": 1_000, "K": 1_000}.get(multiplier, 1)
            amount = format(number.normalize(), "f") if number == number.to_integral() else format(number, "f")
            value = f"{_CURRENCY_SYMBOL[currency]}{amount}"
            state.add(_Found(match.start(), match.end(), "amount", value, {"amount": amount, "currency": currency}))


def _extract_addresses(state: _Extraction) -> None:
    for match in (*_ADDRESS_KEYWORD.finditer(state.text), *_ADDRESS_BARE.finditer(state.text)):
        candidate = match.group("v")
        tail = _ADDRESS_TAIL.match(candidate)
        if not tail:
            continue
        value = tail.group(0).strip()
        markers = set(_ADDRESS_MARKERS.findall(value))
        road_number = re.search(r"[路街道巷].*\d+\s*号", value)
        if len(markers) < 2 and not road_number:
            continue
        if not re.match(f"[{_CJK}]", value):
            continue
        start = match.start("v")
        end = start + len(tail.group(0).rstrip())
        if state.free(start, end) and state.about_user(start, end):
            state.add(_Found(start, end, "address", value, {"address": value}))
    for match in _EN_ADDRESS.finditer(state.text):
        if state.free(*match.span()) and state.about_user(*match.span()):
            value = match.group(0).strip()
            state.add(_Found(match.start(), match.end(), "address", value, {"address": value}))


def _extract_products(state: _Extraction) -> None:
    for pattern in (_PRODUCT_KEYWORD, _PRODUCT_BRAND):
        for match in pattern.finditer(state.text):
            start, end = match.span("v")
            value = match.group("v").strip()
            if pattern is _PRODUCT_KEYWORD and not re.search(r"\d|[A-Z]{2}", value):
                continue
            if state.free(start, end):
                state.add(_Found(start, end, "product", value, {"product": value}))


def _extract_names(state: _Extraction) -> None:
    if state.role != "user":
        return
    for match in _NAME_SURNAME_ZH.finditer(state.text):
        surname = match.group("v")
        surname = surname if surname in SURNAMES else surname[:1]
        if surname in SURNAMES and state.free(*match.span("v")):
            state.add(
                _Found(
                    match.start("v"),
                    match.start("v") + len(surname),
                    "name",
                    surname,
                    {"surname": surname},
                    label="surname",
                )
            )
    for match in _NAME_INTRO_ZH.finditer(state.text):
        rest = state.text[match.end() : match.end() + 12]
        tokens = pos_cut(re.split(f"[^{_CJK}·]", rest, maxsplit=1)[0]) if rest else []
        if not tokens:
            continue
        word, flag = tokens[0]
        if len(word) == 1 and word in SURNAMES and len(tokens) > 1 and len(tokens[1][0]) <= 2:
            word, flag = word + tokens[1][0], "nr"  # jieba split an unknown given name: 「吴」「丽」
        strong = match.group("strength") not in ("我是", "本人", "本人是")
        if not (is_chinese_name(word) or (strong and flag.startswith("nr") and 2 <= len(word) <= 4)):
            continue
        start = match.end()
        if state.free(start, start + len(word)):
            state.add(_Found(start, start + len(word), "name", word, {"name": word}))
    for pattern, label in ((_SURNAME_EN, "surname"), (_NAME_EN, "")):
        for match in pattern.finditer(state.text):
            value = match.group("v")
            if value.split()[0] in _NOT_NAMES_EN or not state.free(*match.span("v")):
                continue
            data = {"surname": value} if label else {"name": value}
            state.add(_Found(match.start("v"), match.end("v"), "name", value, data, label=label))


def _extract_topic(state: _Extraction) -> None:
    if state.role != "user":
        return
    for pattern in (_TOPIC_ZH, _TOPIC_EN):
        match = pattern.search(state.text)
        if match:
            value = match.group("v").strip()
            value = re.sub(r"^(?:一下|下|的|my |the |a |an |your )", "", value, flags=re.IGNORECASE).strip()
            if value:
                start, end = match.span("v")
                state.found.append(_Found(start, end, "current_topic", value, {"topic": value}))
            return


def _extract_entities_by_pos(state: _Extraction) -> None:
    """jieba's POS fallback: ``ns`` → place, ``nt`` → organisation (``nr`` counts only when introduced).

    From the user's own words only: the agent naming a warehouse, a city on a parcel's route or a courier
    company states no fact about the user — and POS tagging is the costliest step of a message's extraction
    (~1.3 ms), run for every reply. A full company name (「…有限公司」) still counts from either side.

    Measured caveat: jieba tags some well-known places wrongly (「国贸」 comes back as ``j``, an abbreviation), so
    a place missing here is not proof that none was said.
    """
    for match in _ORGANIZATION_ZH.finditer(state.text):
        if state.free(*match.span("v")):
            value = match.group("v")
            state.add(_Found(match.start("v"), match.end("v"), "organization", value, {"organization": value}))
    if state.role != "user" or not re.search(f"[{_CJK}]", state.text):
        return
    offset = 0
    for word, flag in pos_cut(state.text):
        start, end = offset, offset + len(word)
        offset = end
        if len(word) < 2 or not state.free(start, end):
            continue
        if flag == "ns" and word not in _NOT_PLACES:
            state.add(_Found(start, end, "place", word, {"place": word}))
        elif flag == "nt":
            state.add(_Found(start, end, "organization", word, {"organization": word}))


# Words jieba 0.42 tags ``ns`` that are not places in customer-service talk (「上门」 is a home visit,
# 「东西」 "stuff", 「福利」 "perks"; the last two found by bench/zh_ner.py).
_NOT_PLACES = frozenset({"上门", "入门", "出门", "门店", "中文", "英文", "中方", "南方", "北方", "东西", "福利"})

_EXTRACTORS: tuple[Callable[[_Extraction], None], ...] = (
    _extract_emails,
    _extract_coupons,
    _extract_codes,
    _extract_phones,
    _extract_amounts,
    _extract_dates,
    _extract_addresses,
    _extract_products,
    _extract_names,
    _extract_topic,
    _extract_entities_by_pos,
)

# --------------------------------------------------------------------------------------------------------------
# Change and confirmation
# --------------------------------------------------------------------------------------------------------------

_CHANGE = re.compile(
    r"换号|换了|新号|新的(?:号码|手机|地址|邮箱)|新(?:手机|地址|邮箱|电话)|改成|改为|改到|更改|更换|变更|修改|更新为|更正|"
    r"不是这个|不是那个|搬家|搬到|以后(?:联系|用|发到?)|现在(?:用|改)|"
    r"(?<![A-Za-z])(?:new (?:phone|number|mobile|cell|e-?mail|address)|changed?(?: (?:my|the) [\w-]+)? to|"
    r"updated?(?: (?:my|the) [\w-]+)? to|moved to|not that one|correction|instead|no longer)(?![A-Za-z])",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[。！？!?\n]|\.(?:\s|$)")


def _is_change(text: str, start: int) -> bool:
    """A change marker precedes the value inside the same sentence."""
    sentence_start = 0
    for match in _SENTENCE_END.finditer(text, 0, start):
        sentence_start = match.end()
    return bool(_CHANGE.search(text, sentence_start, start))


_CONFIRM_STRONG = re.compile(
    r"对的|对呀|对啊|对|是的|是啊|是|没错|正确|确认|无误|确定|(?<![A-Za-z])(?:yes|yeah|yep|yup|correct|right|"
    r"exactly|confirmed?|affirmative|indeed|absolutely|that'?s (?:the one|it))(?![A-Za-z])",
    re.IGNORECASE,
)
_CONFIRM_FILLER = re.compile(
    r"没错儿?|没问题|完全正确|一点没错|就是这个|就是它|就这个|就是|这个|那个|号码|号|手机号?|电话|地址|邮箱|订单号?|它|"
    r"嗯+|好的|了|呢|呀|啊|的|哈|吧|"
    r"(?<![A-Za-z])(?:that's|that is|it's|it is|this|that|the|one|number|address|email|e-mail|phone|order|all|"
    r"good|perfect|sure|ok|okay|is|it|so|that one|you got it|spot on)(?![A-Za-z])",
    re.IGNORECASE,
)


def is_confirmation(text: str) -> bool:
    """True for a bare confirmation of what the agent just said: 「对，就是这个号」「没错」「是的」, "yes that's right".

    A confirmation must not lower a fact's score (S13). Anything that adds or changes information is not a bare
    confirmation: 「是的，不过我换号了」, "yes, but my new number is …", 「对了，我想问…」, 「不对」, "no".
    """
    bare = redact(text).strip()
    if not bare or len(bare) > 40 or _CHANGE.search(bare):
        return False
    if re.match(r"对了", bare):  # 「对了」 means "by the way", not "right"
        return False
    without_idioms = re.sub(r"没错儿?|没问题|无误", "", bare)
    if re.search(
        r"[不没未别无非]|(?<![A-Za-z])(?:no|not|nope|wrong|but|however)(?![A-Za-z])|n't", without_idioms, re.IGNORECASE
    ):
        return False
    if not (_CONFIRM_STRONG.search(bare) or re.search(r"没错|没问题", bare)):
        return False
    residue = _CONFIRM_FILLER.sub(" ", bare)
    residue = _CONFIRM_STRONG.sub(" ", residue)
    # What is left may only be punctuation or the fact being confirmed (a number or code repeated back).
    residue = re.sub(r"[\s\W_]+", "", re.sub(r"[A-Za-z0-9][A-Za-z0-9@.+-]*\d[A-Za-z0-9@.+-]*", "", residue))
    return residue == ""


# --------------------------------------------------------------------------------------------------------------
# Content sentences
# --------------------------------------------------------------------------------------------------------------

_LABELS: dict[str, tuple[str, str]] = {
    "name": ("用户姓名", "User's name"),
    "surname": ("用户姓氏", "User's surname"),
    "phone": ("用户手机号", "User's phone"),
    "landline": ("用户电话", "User's phone"),
    "email": ("用户邮箱", "User's e-mail"),
    "address": ("用户地址", "User's address"),
    "order_id": ("订单号", "Order number"),
    "tracking_number": ("快递单号", "Tracking number"),
    "coupon": ("优惠券", "Coupon"),
    "amount": ("涉及金额", "Amount mentioned"),
    "date": ("提到日期", "Date mentioned"),
    "product": ("咨询的产品", "Product asked about"),
    "current_topic": ("当前咨询", "Current topic"),
    "place": ("提到地点", "Place mentioned"),
    "organization": ("相关机构", "Organization"),
}


def _content(item: _Found, language: Language, change: bool) -> str:
    zh, en = _LABELS[item.label or item.key]
    shown = item.display or item.value
    if item.key == "date":
        shown = item.data["local_date"]
        if item.data["granularity"] == "minute":
            shown = f"{shown} {item.data['date'][11:16]} UTC"
        text = item.data["text"]
        if text != item.data["local_date"]:
            shown += f"（{text}）" if language == "zh" else f" ({text})"
    if item.key == "coupon":
        until = item.data.get("valid_until")
        if language == "zh":
            verb = "已发放优惠券 " if item.data.get("issued_by_agent") else "优惠券："
            sentence = f"{verb}{item.value}" + (f"，有效期至 {until}" if until else "")
        else:
            verb = "Coupon issued: " if item.data.get("issued_by_agent") else "Coupon: "
            sentence = f"{verb}{item.value}" + (f", valid until {until}" if until else "")
        return compress(sentence, limit=CONTENT_LIMIT, language=language)
    if item.key == "name" and item.label == "surname" and language == "zh":
        sentence = f"用户姓{shown}"
    elif change:
        sentence = f"{zh}已更新为：{shown}" if language == "zh" else f"{en} updated to: {shown}"
    else:
        sentence = f"{zh}：{shown}" if language == "zh" else f"{en}: {shown}"
    return compress(sentence, limit=CONTENT_LIMIT, language=language)


# --------------------------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------------------------


def extract_facts(
    text: str,
    *,
    role: str = "user",
    language: str | None = None,
    now: datetime | None = None,
) -> list[Fact]:
    """Extract the customer-service facts stated in one message, in the order they appear.

    ``role`` is ``"user"``, ``"assistant"`` or ``"tool"`` (read like the assistant): names and the session topic
    are taken from the user only; profile facts the agent states (phone, e-mail, address) count only when
    addressed to the user (「您的…」, "your …"); coupons are typically the agent's. ``language`` (``"zh"``/``"en"``)
    chooses the language of ``content``; anything else, or ``None``, means the message's own language.

    ``now`` anchors relative dates (明天, "next Monday") and coupon expiry; it defaults to the current UTC time, a
    naive value is taken as UTC, and a date without a zone is read in ``now``'s zone, then stored in UTC.
    Duplicate ``(key, value)`` pairs are reported once. Pure: no I/O.
    """
    role = "user" if role == "user" else "assistant"  # a tool's output is read like the agent's words
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    cleaned = re.sub(r"[ \t\u3000]+", " ", redact(text or "")).strip()
    if not cleaned:
        return []
    code = (language or "").lower()
    lang: Language = "zh" if code.startswith("zh") else "en" if code.startswith("en") else detect_language(cleaned)
    state = _Extraction(cleaned, role, now)
    for extractor in _EXTRACTORS:
        extractor(state)

    facts: list[Fact] = []
    seen: set[tuple[str, str]] = set()
    for item in sorted(state.found, key=lambda f: (f.start, f.key)):
        if (item.key, item.value) in seen:
            continue
        seen.add((item.key, item.value))
        memory_type, lifetime = LIFETIMES[item.key]
        change = item.key != "current_topic" and _is_change(cleaned, item.start)
        facts.append(
            Fact(
                key=item.key,
                type=memory_type,
                value=item.value,
                content=_content(item, lang, change),
                expires_in=item.expires_in if item.expires_in is not None else lifetime,
                data=dict(item.data),
                change=change,
            )
        )
    return facts
