"""Rule extractors, the model-free part of fact extraction (S2, S7 stage 1, S13); long: one table, one order.

:func:`extract_facts` turns one chat message into typed :class:`Fact` objects for customer-service entities —
names, phone numbers, e-mails, order and tracking numbers, coupons, amounts, dates, addresses, products and the
session topic, plus the Chinese customer-service facts of :mod:`memory.extraction.service` (dated events, account ids,
membership tiers, points balances, promised callbacks, batch progress) — in Chinese and English. Each fact carries
its memory type and lifetime from :data:`LIFETIMES`, a compressed human sentence (≤150 characters, in the message's
language) and structured ``data``.

Whose a profile fact is decides its key (:mod:`memory.extraction.ownership`). ``phone``, ``email``, ``address``,
``name`` and
``birthday`` are emitted only for the END USER's own value: the user speaking of themselves (「我的手机号是…」, a
bare number the user types) or the agent confirming the user's (「您的手机号是…」, "the address on your account").
What belongs to someone else never lands on those keys, so it can never replace the user's anchor facts:

- a number or address the agent gives for a place, a company, a shop or a courier (「您可以打010-…这个号码」,
  「门店地址在…」, "our support line is …"), hotlines (400-/800-/95xxx, toll-free), and values inside quotes or
  after 「例如」/"e.g." give no keyed fact at all (the message itself is still indexed as conversation);
- a person the user names (「我老婆的电话是…」, "my mom's address is …") gives ``contact_phone`` /
  ``contact_address`` (``data["contact"]`` holds who: 「我老婆」, "wife"); the user's workplace (「寄到我公司…」,
  "my office address") gives ``work_address``. Their e-mails, names and birthdays give nothing. A work phone or
  e-mail stays ``phone``/``email``: it is still how to reach the user. None of these keys is an anchor key; all
  three are ``fact_reference``.
- a friend's order number (「我朋友的订单号…」) or one in an example (「订单号格式如…」) gives no ``order_id``;
- a value a correction rejects (「不是 15921873306，完整的是 15921873307」, "not 646-555-0172") gives nothing; the
  value that replaces it is a change.

A Chinese address keeps its room number after the building or the unit (「7 栋 2 单元 901」) and loses the possessor
that leads it (「我姐家：」); an English one keeps its unit, floor, city, state and ZIP ("500 Boylston Street, 10th
Floor, Boston, MA 02116"). The user's name comes from the user's introduction, or from the agent reading it back
(「您登记的姓名是…」, "the name on the account is …").

:func:`disowned_keys` names the profile keys the user says are not theirs (「这不是我的电话」, "that email isn't
mine"). Secrets are redacted before extraction: a password or card number never becomes a fact. No database access.

The pipeline is spread over modules of one concept each: :mod:`memory.extraction.state` (the shared state),
:mod:`memory.extraction.dates` (dates, coupon validity), :mod:`memory.text.phones`, :mod:`memory.text.numerals`
(Chinese numerals
via ``cn2an``), :mod:`memory.extraction.ownership`, :mod:`memory.extraction.service`,
:mod:`memory.extraction.confirmation` (changes and
confirmations) and :mod:`memory.extraction.content` (the sentences); this module holds the table, the remaining
extractors, their order and the entry points.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from difflib import SequenceMatcher
from typing import Any

from django.conf import settings

from memory.extraction.confirmation import is_change, is_confirmation, is_rejected
from memory.extraction.content import CONTENT_LIMIT, content
from memory.extraction.dates import extract_dates, parse_expiry
from memory.extraction.ownership import (
    designates_contact,
    disowned_mentions,
    is_quoted_or_example,
    taken_back,
    whose,
)
from memory.extraction.service import (
    extract_accounts,
    extract_batches,
    extract_callbacks,
    extract_event_dates,
    extract_membership,
    extract_points,
)
from memory.extraction.state import SEP as _SEP
from memory.extraction.state import A as _A
from memory.extraction.state import Extraction as _Extraction
from memory.extraction.state import Found as _Found
from memory.extraction.state import Z as _Z
from memory.text.compression import SURNAMES, is_chinese_name, name_in
from memory.text.language import CJK as _CJK
from memory.text.language import Language, detect_language, is_word, pos_cut
from memory.text.numerals import CN_NUMBER, parse_number
from memory.text.phones import find_phones
from memory.text.redaction import redact

__all__ = [
    "CONTENT_LIMIT",
    "LIFETIMES",
    "Fact",
    "disowned_keys",
    "extract_facts",
    "is_confirmation",
]

DAY = 86_400

LIFETIMES: dict[str, tuple[str, int]] = {
    # Who the user is: stable for weeks, replaced only by an explicit change (S13).
    "name": ("user_profile", 30 * DAY),
    "phone": ("user_profile", 30 * DAY),
    "email": ("user_profile", 30 * DAY),
    "address": ("user_profile", 30 * DAY),
    "account_id": ("user_profile", 30 * DAY),
    "membership": ("user_profile", 30 * DAY),
    "birthday": ("user_profile", 365 * DAY),  # a birthday does not change; a year covers the next one
    # Someone else's contact details the user gave on purpose (never the anchor's phone or address).
    "contact_phone": ("fact_reference", 30 * DAY),
    "contact_address": ("fact_reference", 30 * DAY),
    "work_address": ("fact_reference", 30 * DAY),
    # References to things outside the chat: an order lives through its return and refund window, a parcel
    # through its delivery, a product the user asked about only while the interest is fresh.
    "order_id": ("fact_reference", 30 * DAY),
    "tracking_number": ("fact_reference", 14 * DAY),
    "product": ("fact_reference", 7 * DAY),
    "coupon": ("fact_reference", 30 * DAY),  # replaced by the coupon's own expiry when the message states it
    "organization": ("fact_reference", 30 * DAY),
    # Dated events (memory.extraction.service): a parcel's dates through its delivery, a booking up to a month ahead, a
    # renewal or an expiry a season ahead; a promised callback a week (or a day after its due time).
    "ship_date": ("fact_reference", 14 * DAY),
    "delivery_date": ("fact_reference", 14 * DAY),
    "pickup_time": ("fact_reference", 7 * DAY),
    "appointment": ("fact_reference", 30 * DAY),
    "renewal_date": ("fact_reference", 90 * DAY),
    "expiry_date": ("fact_reference", 90 * DAY),
    "callback": ("fact_reference", 7 * DAY),
    "points_balance": ("fact_reference", 7 * DAY),  # a balance moves with every order
    "batch_progress": ("fact_reference", 3 * DAY),
    # Meaningful only inside the current conversation: frozen on a topic switch (S10).
    "amount": ("session_state", DAY),
    "date": ("session_state", DAY),
    "place": ("session_state", DAY),
    "current_topic": ("session_state", DAY),
}

#: The profile keys whose owner decides the key; what the owner turns them into (None: no keyed fact).
_BY_OWNER: dict[str, dict[str, str | None]] = {
    "phone": {"user": "phone", "work": "phone", "contact": "contact_phone", "other": None},
    "address": {"user": "address", "work": "work_address", "contact": "contact_address", "other": None},
    "email": {"user": "email", "work": "email", "contact": None, "other": None},
}


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
    # a return, a repair, a booking, a case: the ids the customer's requests go by
    r"(?:退货|退款|售后|维修|服务|预订|预约)(?:申请|单)?号|工单(?:编)?号?|确认号|"
    # a complaint's, a claim's, an appeal's form: 「投诉单号」, 「理赔单编号」
    r"(?:投诉|理赔|申诉|报修|退换货?)单(?:编)?号|"
    r"(?<![A-Za-z])orders?(?:\s*(?:numbers?|no\.?|#|ids?|codes?))?(?:\s*,)?)" + _SEP + _CODE,
    re.IGNORECASE,
)
# The other requests an English-speaking customer's ids go by, each id at least five characters ("case number
# CAS-2026-4410", "booking ref BK-77120", "Ticket #HD-30218", "the order itself is 2026-1130-0042"); "in case 2026"
# is no case.
_REQUEST_ID = re.compile(
    r"(?:(?<![A-Za-z])(?:order|booking)\s+itself|"
    r"(?<![A-Za-z])(?<!in )(?:bookings?|reservations?|tickets?|cases?|claims?|returns?)(?:\s*(?:numbers?|no\.?|#|ids?|"
    r"codes?|ref(?:erence)?(?:\s*(?:numbers?|no\.?))?))?|"
    # a courier's or a carrier's reference is the parcel's, not the customer's request
    r"(?<![A-Za-z])(?<!courier )(?<!carrier )(?<!tracking )ref(?:erence)?(?:\s*(?:numbers?|no\.?|#))?(?![A-Za-z]))"
    + _SEP
    + r"#?(?P<v>[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){4,39})"
    + _Z,
    re.IGNORECASE,
)
# More codes of the same shape joined to the one just read: 「20261101009871 和 20261102004456」, "#US-55012 and
# #US-55019".
_AND_CODE = re.compile(r"\s*(?:和|与|及|、|,|，|and|&)\s*" + _CODE, re.IGNORECASE)
_COUPON = re.compile(
    r"(?:优惠券|优惠码|折扣码|券码|兑换码|红包码|(?<![A-Za-z])(?:coupon(?:\s*code)?|promo(?:tion)?\s*code|"
    r"discount\s*code|voucher(?:\s*code)?))" + _SEP + r"[「“\"']?(?P<v>[A-Z0-9][A-Za-z0-9_-]{3,29})" + _Z,
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
# Chinese numerals only right before a currency unit (「三百五十元」); 「一块去」 is "together", 「元旦」 a holiday.
_AMOUNT_CN = re.compile(
    rf"(?P<num>{CN_NUMBER})\s?(?P<unit>元(?![旦宵素件])|块钱|块(?=[，。！？,.!?\s]|$)|美元|美金|欧元|英镑)"
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
    r"(?:收货地址|收件地址|送货地址|地址|住址|住在|(?<=[我家])住|寄到|送到|发到|改成|改为|改到|搬到|位于|在)"
    r"(?:已?(?:更新|修改|更改|变更|调整)(?:为|成|到)|是|为|:|：|改成|改为)?\s*(?P<v>[^，。；！？,;!?\n]{4,60})"
)
# Without a keyword, an address must open with a province or a city right after a pause or a copula:
# 「不是这个地址，是杭州市西湖区文三路 259 号」.
_ADDRESS_BARE = re.compile(
    r"(?:(?<![" + _CJK + r"])|(?<=[是在到为往]))(?![是在到为往]|不是|并非)"
    r"(?P<v>[" + _CJK + r"]{2,8}?(?:省|自治区|市)[^，。；！？,;!?\n]{2,50})"
)
#: What every Chinese address has: a number (「478号」, 「三栋」) or a named division (省, 市, 区, 县, 镇, 乡, 村).
_ADDRESS_ANCHOR = re.compile(r"\d|[一二三四五六七八九十百零两]+[号栋幢楼层室]|[省市区县镇乡村]")
_CHANGED_TO = re.compile(r"[”」』\"]\s*(?:更正|改|更新|修改|变更)(?:为|成)\s*")
_ADDRESS_FLAT = re.compile(r"\s*\d{3,4}(?=\s|$)")
_ADDRESS_ROOM = re.compile(r"\s*\d{1,5}(?:-\d{1,4})?\s*(?:室|房|号房)?(?=\s|$)")
# The possessor before an address, up to a colon: 「我家：」, 「我姐家：」, 「我朋友那边的地址：」, 「公司地址：」.
_ADDRESS_LEAD = re.compile(r"[^：:\d省市区县路街]{0,10}?(?:的)?(?:地址)?\s*[：:]\s*")
_ADDRESS_MARKERS = re.compile(r"省|自治区|市|区|县|镇|乡|村|路|街|道|巷|胡同|号|栋|幢|单元|室|楼|小区|大厦")
_ADDRESS_TAIL = re.compile(
    r"^.*(?:号楼|号院|号|室|楼|栋|幢|单元|(?<=\d)门|层|座|大厦|小区|广场|中心|[路街道巷](?=\s*$))", re.S
)
# An English address: an optional flat, unit or level first ("Flat 4B, ", "Unit 5, ", "Level 9, "), a street line
# ("27 Carlisle Road", "3/118 Swan Street" — unit 3 at number 118), then the parts of the same address that follow
# it: unit or floor ("Suite 400", "10th Floor"), town, and the postal code of its country — a US state and ZIP
# ("TX 78701"), an Australian state and postcode ("NSW 2026"), a British postcode ("LS6 2AB", "M1 6FQ") or a
# Canadian one ("M5V 2T6").
_EN_STREET_TYPES = (
    r"Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Way|Court|Ct|Place|Pl|Plaza|Square|Sq|Circle|"
    r"Terrace|Parkway|Pkwy|Highway|Hwy|Grove|Close|Crescent|Cres|Row|Mews|Wharf|Parade|Walk|Gardens|Hill|View|Rise|"
    r"Park|Green|Quay|Estate"
)
_EN_UNIT = (
    r"(?:(?:(?i:Flat|Apt|Apartment|Unit|Suite|Ste|Level|Floor|Room|Tower|Block)\.?\s*(?:\d[A-Za-z0-9/-]*|[A-Z]\d*)"
    r"(?![a-z])|"
    r"\d{1,2}F\d{1,2}|"  # an Edinburgh flat by floor and door: "3F2, 19 Easter Road"
    r"\d{1,2}/F|"  # a Hong Kong floor: "Flat B, 12/F, Tower 3, 8 Harbour Road"
    r"\d{1,2}(?:st|nd|rd|th)\s+(?i:Floor))"
    r",?\s+){1,3}"
)
_EN_POSTCODE = (
    r"(?:,?\s*[A-Z]{2,3})?\s+\d{4,5}(?:-\d{4})?(?!\d)|"  # US state and ZIP, Australian state and postcode
    r"\s+[A-Z]{1,2}\d[A-Z\d]?\s?\d[A-Z]{2}(?![A-Za-z0-9])|"  # British
    r"\s+[A-Z]\d[A-Z]\s?\d[A-Z]\d(?![A-Za-z0-9])|"  # Canadian
    r"(?:\s+\d{1,2}W?)?,?\s+[A-Z]\d[\dW]\s?[\dA-Z]{4}(?![A-Za-z0-9])"  # Irish: a Dublin district, then an Eircode
)
_EN_ADDRESS = re.compile(
    r"(?<![\w/])(?:" + _EN_UNIT + r"(?:\d{1,6}[A-Za-z]?\s+)?|\d{1,6}[A-Za-z]?(?:/\d{1,6}[A-Za-z]?)?\s+)"
    r"(?:[NSEW]\.?\s+)?(?:(?:[A-Z][a-z]+\.?|\d{1,3}(?:st|nd|rd|th))\s+){1,4}(?:"
    + _EN_STREET_TYPES
    + r")(?![A-Za-z])\.?"
    r"(?:\s+(?:NE|NW|SE|SW|N|S|E|W)(?![A-Za-z]))?"
    r"(?:,?\s*(?:(?:Apt|Apartment|Suite|Ste|Unit|Room|Rm|Floor|Fl|#)\.?\s*[A-Za-z0-9-]+|"
    r"\d{1,3}(?:st|nd|rd|th)\s+Floor)(?![A-Za-z])){0,2}"
    # a town, or a suburb and its city ("Devonport, Auckland 0624", "Wan Chai, Hong Kong")
    r"(?:,\s*[A-Z][a-zA-Z]+(?![\w])(?:\s[A-Z][a-zA-Z]+(?![\w]))*)?"
    r"(?:,\s*[A-Z][a-zA-Z]+(?![\w])(?:\s[A-Z][a-zA-Z]+(?![\w]))*(?=(?:" + _EN_POSTCODE + r")|\s*(?:[.;!?\n]|$)))?"
    r"(?:" + _EN_POSTCODE + r")?"
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
#: One word of an English name: "Grace", "O'Donnell", "McDonald".
_NAME_WORD = r"[A-Z](?:[a-z]+|['’][A-Z][a-z]+|[a-z]+[A-Z][a-z]+)"
#: A name of one to three words, and a full name of two or three.
_FULL_NAME = _NAME_WORD + r"(?:[ -]" + _NAME_WORD + r"){0,2}"
_FIRST_AND_LAST = _NAME_WORD + r"(?:[ -]" + _NAME_WORD + r"){1,2}"
_NAME_SURNAME_ZH = re.compile(r"(?:本人|我|免贵)姓\s*(?P<v>[" + _CJK + r"]{1,2})")
_NAME_INTRO_ZH = re.compile(
    r"(?P<strength>我叫|我的名字(?:是|叫)|名字(?:是|叫)|姓名(?:是|为|:|：)?|叫我|我是|本人是?|我?这边是)\s*"
)
_NAME_EN = re.compile(
    r"(?<![A-Za-z])(?i:(?P<strength>my name is|my name's|name's|call me|this is|i am|i'm|i’m|im))\s+"
    r"(?P<v>" + _FULL_NAME + r")" + _Z
)
# The agent reads the user's name back only in these words: 「您登记的姓名是…」, "the name on the account is …".
_NAME_AGENT_ZH = re.compile(
    r"(?P<strength>(?:您(?:登记|预留|填写|注册|提供|留)?的?|(?:开户人|持卡人|户主|账户|实名(?:信息)?|投保人)(?:的)?)"
    r"(?:真实)?(?:姓名|名字)(?:是|为|:|：))\s*"
)
# The agent greeting the customer by full name at the start of a message: 「周明轩先生您好」, 「李女士，…」 is a surname
# and no full name; the name must be one (``is_chinese_name``).
_NAME_ADDRESSED_ZH = re.compile(
    r"^\s*(?P<v>[" + _CJK + r"]{2,3})(?=(?:(?:先生|女士|小姐)(?:您好|你好|，|,|：|:))|您好|你好)"
)
# The agent greeting or thanking the customer by full name: "Hi Sophie Turner-Blake, …", "Thank you, Eleanor
# Whitfield, I can see …", "Dear Tom Reyes". A first name alone is no full name.
_NAME_VOCATIVE_EN = re.compile(
    r"^\s*(?i:hi|hello|hey|dear|good (?:morning|afternoon|evening)|thank you|thanks)[,!]?\s+"
    r"(?P<v>" + _FIRST_AND_LAST + r")\s*[,.!—–-]"
)
# The agent changing the name on the account or order: "I've changed the name on your order from 'Dan M.' to
# Daniel Mensah", 「已将收件人姓名改为您本人谭晓东」.
_NAME_CHANGED = re.compile(
    r"(?i:(?:(?:the\s+)?spelling\s+of\s+)?(?:your|the)\s+name(?:\s+on\s+(?:your|the)\s+(?:order|account|booking|"
    r"reservation|parcel|ticket))?(?: from .{1,30}?)? to)\s+(?P<v>"
    + _FIRST_AND_LAST
    + r")"
    + _Z
    # "two names on the booking: yourself, Ms. Grace Liu, and a guest …"
    + r"|(?i:yourself|you),?\s+(?:Mr|Ms|Mrs|Miss|Mx|Dr)\.?\s+(?P<w>"
    + _FIRST_AND_LAST
    + r")"
    + _Z
)
_NAME_CHANGED_ZH = re.compile(r"(?P<strength>(?:姓名|名字)(?:已)?(?:改为|更正为|更新为|改成|修改为)(?:您本人|您)?)\s*")
# A field the customer fills in: "Name: Ibrahim Yusuf / Phone: …", "Me: Tom Reyes, (512) …".
# The customer's booking under a name: "restaurant booking for tonight under the name Ahmed Karim" (whose is still
# checked: "booked under my wife's name, Li Na" is hers).
_NAME_UNDER_EN = re.compile(r"(?i:under\s+the\s+name(?:\s+of)?:?)\s+(?P<v>" + _FIRST_AND_LAST + r")" + _Z)
_NAME_FIELD_EN = re.compile(
    r"(?:^|\n|/)\s*(?:[-*•·]\s*)?(?i:me|name|full name|my name)\s*[:：]\s*(?P<v>" + _FIRST_AND_LAST + r")" + _Z
)
_NAME_AGENT_EN = re.compile(
    r"(?i:(?P<strength>your (?:full )?name is|the name on (?:the|your) (?:account|file|booking|reservation) is|"
    r"(?:we|I) have your name as|the name (?:we have )?on file is))\s+(?P<v>" + _FULL_NAME + r")" + _Z
)
# The agent reading back whose the account or booking is: "the account holder as Kenji Tanaka", "the booking under
# Marta Kowalski", "the account is in your name, Olivia Brennan". The words say whose it is, so no other owner test.
_NAME_READBACK_EN = re.compile(
    r"(?i:(?P<strength>account holder (?:as|is)|in your name,?|(?:registered|booked) (?:to|under|in the name of)|"
    r"(?:booking|order|account|reservation|ticket|policy)s? (?:is |are |was )?(?:under|in)(?: the name(?: of)?:?)?))"
    r"\s+(?P<v>" + _FIRST_AND_LAST + r")" + _Z
)
# The user signing off — a last line after a dash or a closing word ("Thanks anyway\n— Aisha", "Regards,\nTom
# Becker") — or introducing themselves at the start with a full name ("Priya Nair speaking.", "Hi, it's Tom
# Becker, …"; one word only before "speaking": "It's Monday" and "Someone here" name no one).
_NAME_SIGNED_EN = re.compile(
    r"(?:\n\s*[-—–~]+\s*|(?i:(?:^|\n|[.!?]\s+)\s*(?:thanks|thank you|cheers|regards|best|kind regards|best regards|"
    r"many thanks|sincerely|yours)[,!.]?\s*(?:\n|[-—–]\s*)\s*))(?P<v>" + _FULL_NAME + r")\s*$"
    # a closing line of its own with a full name after a comma: "…rather than post it?\nCheers, Tom Baxter"
    r"|\n\s*(?i:thanks|thank you|cheers|regards|best|kind regards|best regards|many thanks|sincerely|yours),[ \t]*"
    r"(?P<c>" + _FIRST_AND_LAST + r")[ \t]*[.!]?\s*$"
    r"|^\s*(?i:(?:hi|hello|hey|good (?:morning|afternoon|evening))[,!.]?\s+)?"
    r"(?:(?i:it's|it’s|this is)\s+(?P<w>" + _FIRST_AND_LAST + r")(?=[\s,.!;]|$)"
    r"|(?P<u>" + _FIRST_AND_LAST + r"(?=\s+(?i:speaking|here)(?![A-Za-z]))|[A-Z][a-z]+(?=\s+speaking\b)))"
)
# The customer pasting their own signature: the first line under the announcement that is a name ("Pasting my own
# signature so you have everything:\n\nHannah Cole\nSenior Analyst", 「我把我的邮件签名贴给你：\n李婉清\n…」).
_OWN_SIGNATURE = re.compile(
    r"(?:(?i:\bmy\s+(?:own\s+)?(?:e-?mail\s+)?signature\b)|我(?:自己)?的(?:邮件)?签名)[^\n]*[:：]\s*\n\s*(?P<v>[^\n]{2,40}?)\s*(?:\n|$)"
)
# A name corrected in quotes: 「姓名由“张小雯”更正为“张晓雯”」 — the corrected one is the name.
_NAME_CORRECTED_ZH = re.compile(
    r"(?:姓名|名字)[^，。；\n]{0,6}?由?\s*[“\"「](?P<old>[\u4e00-\u9fff]{2,4})[”\"」]\s*(?:更正|改|修改|变更)(?:为|成)\s*"
    r"[“\"「](?P<v>[\u4e00-\u9fff]{2,4})[”\"」]"
)
_SURNAME_EN = re.compile(r"(?i:my (?:last name|surname|family name)(?:\s+is|'s|’s))\s+(?P<v>" + _NAME_WORD + r")" + _Z)
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


def _owned_key(state: _Extraction, key: str, start: int, end: int) -> str | None:
    """The key a profile value at ``text[start:end]`` is stored under, or None when it is nobody's profile.

    A value that is not the user's still claims its span, so no later extractor re-reads it as something else; so
    does a value a correction rejects (「不是 15921873306，是 …」).
    """
    ownership = whose(state.text, start, end, role=state.role)
    owned = None if is_rejected(state.text, start) else _BY_OWNER[key][ownership.owner]
    if owned == key and not ownership.marker:
        state.bare.add((start, end))
    if owned is not None and owned.startswith("contact_") and not designates_contact(state.text):
        owned = None  # someone's details the customer gave them no part with (a teacher's, a landlord's number)
    if owned is None:
        state.claimed.append((start, end))
    return owned


def _extract_emails(state: _Extraction) -> None:
    for match in _EMAIL.finditer(state.text):
        if not state.free(*match.span()):
            continue
        key = _owned_key(state, "email", *match.span())
        if key is not None:
            local, _, domain = match.group(0).partition("@")
            value = f"{local}@{domain.lower()}"
            state.add(_Found(match.start(), match.end(), key, value, {"email": value}))


def _extract_codes(state: _Extraction) -> None:
    for pattern, key in (
        (_TRACKING_KEYWORD, "tracking_number"),
        (_TRACKING_BARE, "tracking_number"),
        (_ORDER, "order_id"),
        (_REQUEST_ID, "order_id"),
    ):
        for match in pattern.finditer(state.text):
            value = match.group("v")
            start, end = match.span("v")
            if not re.search(r"\d", value) or not state.free(start, end):
                continue
            if is_quoted_or_example(state.text, start, end) or (
                key == "order_id" and state.role == "user" and state.owner(start, end) == "contact"
            ):
                state.claimed.append((start, end))  # 「订单号格式如 TB1234567890」, a friend's order
                continue
            state.add(_Found(start, end, key, value.upper() if key == "tracking_number" else value, {key: value}))
            if key == "order_id":
                _add_joined_codes(state, end, value)
                _add_corrected_code(state, end, value)


def _shape(code: str) -> str:
    """A code's shape: letters as A, digits as 9, the rest as written (US-55012 → AA-99999)."""
    return re.sub(r"[A-Za-z]", "A", re.sub(r"\d", "9", code))


def _add_joined_codes(state: _Extraction, end: int, first: str) -> None:
    """Order ids joined to the one read at ``text[:end]`` that have its shape: the same order key."""
    while (joined := _AND_CODE.match(state.text, end)) is not None:
        value = joined.group("v")
        start, end = joined.span("v")
        if _shape(value) != _shape(first) or not state.free(start, end):
            return
        state.add(_Found(start, end, "order_id", value, {"order_id": value}))


_NEXT_CODE = re.compile(_A + _CODE)


def _add_corrected_code(state: _Extraction, end: int, first: str) -> None:
    """An order id said again in another shape of the same kind after words that take the first back ("order
    88120457 oh sorry I meant 88120475"): the correction, kept as an order id (the first is dropped later)."""
    for match in _NEXT_CODE.finditer(state.text, end, min(len(state.text), end + 40)):
        value = match.group("v")
        if (
            _shape(value) == _shape(first)
            and state.free(*match.span("v"))
            and taken_back(state.text, end, match.start())
        ):
            state.add(_Found(match.start("v"), match.end("v"), "order_id", value, {"order_id": value}))
            return


def _extract_coupons(state: _Extraction) -> None:
    for match in _COUPON.finditer(state.text):
        value = match.group("v")
        start, end = match.span("v")
        if not (re.search(r"\d", value) or value.isupper()) or not state.free(start, end):
            continue
        data: dict[str, Any] = {"coupon": value}
        expires_in = None
        expiry = parse_expiry(state, end)
        if expiry is not None:
            expires_in = int((expiry - state.now).total_seconds())
            if expires_in <= 0:
                continue  # an expired coupon is no memory worth recalling
            data["expires_at"] = expiry.astimezone(UTC).isoformat()
            data["valid_until"] = expiry.date().isoformat()
        data["issued_by_agent"] = state.role == "assistant"
        state.add(_Found(start, end, "coupon", value, data, expires_in=expires_in))


def _extract_phones(state: _Extraction) -> None:
    for phone in find_phones(state.text, settings.PHONE_REGIONS):
        if not state.free(phone.start, phone.end):
            continue
        if phone.hotline:
            state.claimed.append((phone.start, phone.end))  # a company's line is nobody's phone
            continue
        key = _owned_key(state, "phone", phone.start, phone.end)
        if key is None:
            continue
        data = {"phone": phone.value}
        if key == "contact_phone":
            data["contact"] = state.owner_marker(phone.start, phone.end)
        state.add(_Found(phone.start, phone.end, key, phone.value, data, label=phone.label, display=phone.shown))


def _extract_amounts(state: _Extraction) -> None:
    for pattern in (_AMOUNT_SYMBOL, _AMOUNT_UNIT, _AMOUNT_CN):
        for match in pattern.finditer(state.text):
            if not state.free(*match.span()):
                continue
            raw = (match.groupdict().get("sym") or match.groupdict().get("unit") or "").lower()
            currency = _CURRENCIES.get(raw, "CNY")
            number = parse_number(match.group("num"))
            if number is None:
                continue
            multiplier = (match.groupdict().get("mult") or "").strip()
            number *= {"万": 10_000, "千": 1_000, "k": 1_000, "K": 1_000}.get(multiplier, 1)
            amount = format(number.normalize(), "f") if number == number.to_integral() else format(number, "f")
            value = f"{_CURRENCY_SYMBOL[currency]}{amount}"
            state.add(_Found(match.start(), match.end(), "amount", value, {"amount": amount, "currency": currency}))


def _extract_addresses(state: _Extraction) -> None:
    for match in (*_overlapping(_ADDRESS_KEYWORD, state.text), *_ADDRESS_BARE.finditer(state.text)):
        # 「寄到我家：广州市…」: the possessor before the address is not part of it (it still decides the owner).
        lead = _ADDRESS_LEAD.match(match.group("v"))
        skip = lead.end() if lead else 0
        # 「把地址从“朝阳路15号”更正为 北京市…」: the address is what it was changed to, after the quote and the verb
        changes = list(_CHANGED_TO.finditer(match.group("v"), skip))
        if changes:
            skip = changes[-1].end()
        skip += _address_opening(match.group("v")[skip:])
        candidate = match.group("v")[skip:]
        # 「…1104 你们上次送到隔壁单元」: an address names no one; 「… 和家庭地址 …」 starts another
        pronoun = _PRONOUN_ZH.search(candidate)
        if pronoun:
            candidate = candidate[: pronoun.start()]
        tail = _ADDRESS_TAIL.match(candidate)
        if not tail:
            continue
        room = (
            _ADDRESS_ROOM.match(candidate, tail.end())
            if re.search(r"(?:[楼栋幢座层门]|单元)$", tail.group(0))
            else None
        )
        if room is None and tail.group(0).endswith("号"):
            room = _ADDRESS_FLAT.match(candidate, tail.end())  # 「漕溪北路88弄12号602」: flat 602 of No. 12
        taken = room.end() if room else tail.end()  # 「8 号楼 1502」「2 单元 901」: the room after the building
        value = candidate[:taken].strip()
        markers = set(_ADDRESS_MARKERS.findall(value))
        road_number = re.search(r"[路街道巷].*\d+\s*号", value)
        if len(markers) < 2 and not road_number:
            continue
        if not _ADDRESS_ANCHOR.search(value):
            continue  # 「买东西就因为少写了个单元号」: an address has a number or a named division
        if not re.match(f"[{_CJK}]", value):
            continue
        start = match.start("v") + skip
        end = start + len(candidate[:taken].rstrip())
        if state.free(start, end) and (key := _owned_key(state, "address", start, end)):
            state.add(_Found(start, end, key, value, _address_data(state, key, value, start, end)))
    for match in _EN_ADDRESS.finditer(state.text):
        if state.free(*match.span()) and (key := _owned_key(state, "address", *match.span())):
            value = match.group(0).strip()
            state.add(_Found(match.start(), match.end(), key, value, _address_data(state, key, value, *match.span())))


def _overlapping(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """Every match of ``pattern``, each searched from where the last one's value began: a second keyword inside
    the first one's words (「办公地址 … 和家庭地址 …」) opens an address of its own."""
    found, position = [], 0
    while (match := pattern.search(text, position)) is not None:
        found.append(match)
        position = match.start("v") + 1
    return found


_PRONOUN_ZH = re.compile(r"[你我他她您它]|(?:和|以及|及)(?=家庭|家里|公司|单位|办公|地址)")


def _address_opening(candidate: str) -> int:
    """Where a Chinese address opens in the words after its keyword: at its first place name (rjieba's ``ns``)
    when only words of the sentence come before it (「填的浙江省…」, 「我姐家广州市…」, 「您说北京市…」), else
    where it starts already. The words before still tell whose it is."""
    offset = 0
    for word, flag in pos_cut(candidate[:16]):
        if flag == "ns":
            return offset
        if re.search(r"\d", word) or _ADDRESS_MARKERS.search(word):
            return 0
        offset += len(word)
    return 0


def _address_data(state: _Extraction, key: str, value: str, start: int, end: int) -> dict[str, Any]:
    data: dict[str, Any] = {"address": value}
    if key == "contact_address":
        data["contact"] = state.owner_marker(start, end)
    return data


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
    """The user's name: introduced by the user (「我叫…」, "my name is …"), or read back by the agent."""
    if state.role != "user":
        _extract_name_intros(state, _NAME_AGENT_ZH, ((_NAME_AGENT_EN, ""),))
        _extract_name_intros(state, _NAME_CHANGED_ZH, ())
        for pattern in (_NAME_READBACK_EN, _NAME_VOCATIVE_EN, _NAME_CHANGED):
            for match in pattern.finditer(state.text):
                group = "v" if match.group("v") else "w"
                _add_english_name(state, match.start(group), match.end(group), owner_checked=True)
        _extract_corrected_name(state)
        addressed = _NAME_ADDRESSED_ZH.match(state.text)
        if addressed:
            _add_chinese_name(state, *addressed.span("v"))
        return
    for match in _NAME_SIGNED_EN.finditer(state.text):
        group = next(name for name in ("v", "w", "u", "c") if match.group(name))
        _add_english_name(state, match.start(group), match.end(group), owner_checked=False)
    for match in (*_NAME_FIELD_EN.finditer(state.text), *_NAME_UNDER_EN.finditer(state.text)):
        _add_english_name(state, match.start("v"), match.end("v"), owner_checked=False)
    _extract_corrected_name(state)
    signature = _OWN_SIGNATURE.search(state.text)
    if signature:
        start, end = signature.span("v")
        line = signature.group("v")
        if re.fullmatch(_FULL_NAME, line) and " " in line:
            _add_english_name(state, start, end, owner_checked=True)  # "my own signature" says whose
        else:
            _add_chinese_name(state, start, end)
    for match in _NAME_SURNAME_ZH.finditer(state.text):
        surname = match.group("v")
        surname = surname if surname in SURNAMES else surname[:1]
        if surname in SURNAMES and state.free(*match.span("v")) and state.owner(*match.span("v")) == "user":
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
    _extract_name_intros(state, _NAME_INTRO_ZH, ((_SURNAME_EN, "surname"), (_NAME_EN, "")))
    _extract_self_named(state)


def _extract_corrected_name(state: _Extraction) -> None:
    """「已将实名信息中的姓名由“张小雯”更正为“张晓雯”」: the corrected name, when the sentence is about the customer
    (the customer's own words, or the agent's with 您 or 实名)."""
    for match in _NAME_CORRECTED_ZH.finditer(state.text):
        sentence = state.text[max(0, match.start() - 20) : match.end()]
        if (state.role == "user" or re.search(r"您|实名", sentence)) and _add_chinese_name(state, *match.span("v")):
            state.claimed.append(match.span("old"))  # the name it corrects is nobody's now


_HONORIFIC = re.compile(r"(?:先生|女士|小姐|老师|师傅|同学|总|经理|阿姨|大哥|大姐)$")


def _add_chinese_name(state: _Extraction, start: int, end: int) -> bool:
    """Keep ``text[start:end]`` as the user's name when it is a Chinese name not read already; whether it was."""
    name = state.text[start:end]
    if not is_chinese_name(name) or _HONORIFIC.search(name) or not state.free(start, end):
        return False  # 「刘先生您好」 greets a surname, not a full name
    state.add(_Found(start, end, "name", name, {"name": name}))
    return True


def _add_english_name(state: _Extraction, start: int, end: int, *, owner_checked: bool) -> None:
    """Keep the English name at ``text[start:end]`` as the user's, unless it is a word, not a name, or already
    read (``owner_checked``: the words that found it said whose it is)."""
    value = state.text[start:end]
    if value.split()[0] in _NOT_NAMES_EN or not state.free(start, end):
        return
    if not owner_checked and state.owner(start, end) != "user":
        return
    state.add(_Found(start, end, "name", value, {"name": value}))


def _names_the_customer(state: _Extraction, start: int, end: int) -> bool:
    """Whether a name after an introduction is the customer's: their own words say so, or the agent reads a name
    field back (「开户人姓名为…」, 「姓名改为您本人…」) and nothing around it names another owner."""
    ownership = whose(state.text, start, end, role=state.role)
    return ownership.owner == "user" or (state.role != "user" and ownership.owner == "other" and not ownership.marker)


#: The customer saying a name is theirs: 「收件人写的是孙浩然，就是我本人」, "That IS me, Nathan Brooks",
#: "Nathan Brooks, that's me".
_SELF_NAMED_ZH = re.compile(r"(?P<v>[" + _CJK + r"]{2,4})\s*[，,]?\s*(?:就是|正是)我(?:本人|自己)?")
_SELF_NAMED_EN = re.compile(
    r"(?i:(?:that|this|it)(?:'s|’s|\s+is|\s+was)\s+me)[,:]?\s+(?P<v>"
    + _FIRST_AND_LAST
    + r")"
    + _Z
    + r"|(?P<w>"
    + _FIRST_AND_LAST
    + r"),?\s+(?i:that's|that’s|that is|it's|it’s)\s+me(?![A-Za-z])"
)


def _extract_self_named(state: _Extraction) -> None:
    """A name the customer says is theirs (``_SELF_NAMED_ZH``, ``_SELF_NAMED_EN``); of Chinese characters before
    「就是我本人」, the longest ending that is a Chinese name."""
    for match in _SELF_NAMED_ZH.finditer(state.text):
        start, end = match.span("v")
        for size in (4, 3, 2):
            if end - start >= size and _add_chinese_name(state, end - size, end):
                break
    for match in _SELF_NAMED_EN.finditer(state.text):
        group = "v" if match.group("v") else "w"
        _add_english_name(state, match.start(group), match.end(group), owner_checked=True)


def _extract_name_intros(
    state: _Extraction, intro_zh: re.Pattern[str], patterns_en: tuple[tuple[re.Pattern[str], str], ...]
) -> None:
    """The name after an introduction: the Chinese word right after ``intro_zh``, the English ``v`` group."""
    for match in intro_zh.finditer(state.text):
        rest = state.text[match.end() : match.end() + 12]
        tokens = pos_cut(re.split(f"[^{_CJK}·]", rest, maxsplit=1)[0]) if rest else []
        if not tokens:
            continue
        word, flag = tokens[0]
        if len(word) == 1 and word in SURNAMES and len(tokens) > 1 and len(tokens[1][0]) <= 2:
            word, flag = word + tokens[1][0], "nr"  # the tagger split an unknown given name: 「吴」「丽」
        else:
            word = name_in(word, followed=len(tokens) > 1)
        strong = match.group("strength") not in ("我是", "本人", "本人是")
        if not (is_chinese_name(word) or (strong and flag.startswith("nr") and 2 <= len(word) <= 4)):
            continue
        if _HONORIFIC.search(word):
            continue  # 「叫我赵先生就行」: a form of address, not a name
        start = match.end()
        if state.free(start, start + len(word)) and _names_the_customer(state, start, start + len(word)):
            state.add(_Found(start, start + len(word), "name", word, {"name": word}))
    for pattern, label in patterns_en:
        for match in pattern.finditer(state.text):
            value = match.group("v")
            if value.split()[0] in _NOT_NAMES_EN or not state.free(*match.span("v")):
                continue
            if state.owner(*match.span("v")) != "user":
                continue  # "my daughter's name is …" is not the user's name
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
    """The POS fallback: ``ns`` → place, ``nt`` → organisation (``nr`` counts only when introduced).

    From the user's own words only: the agent naming a warehouse, a city on a parcel's route or a courier
    company states no fact about the user — and POS tagging is the costliest step of a message's extraction,
    run for every reply. A full company name (「…有限公司」) still counts from either side. A place must be a
    dictionary word: the tagger also guesses ``ns`` for words it does not know, and those guesses are mostly
    wrong (「新卡寄这里」 gives 「新卡」).

    Measured caveat: the dictionary tags some well-known places wrongly (「国贸」 comes back as ``j``, an
    abbreviation) and knows few brands (「中通」, 「美团」 are not ``nt``), so a place or an organisation missing
    here is not proof that none was said.
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
        if flag == "ns" and word not in _NOT_PLACES and is_word(word):
            state.add(_Found(start, end, "place", word, {"place": word}))
        elif flag == "nt":
            state.add(_Found(start, end, "organization", word, {"organization": word}))


# Dictionary words tagged ``ns`` that are not places in customer-service talk (「上门」 is a home visit,
# 「东西」 "stuff", 「福利」 "perks"; the last two found by bench/quality/zh_ner.py).
_NOT_PLACES = frozenset({"上门", "入门", "出门", "门店", "中文", "英文", "中方", "南方", "北方", "东西", "福利"})

_EXTRACTORS: tuple[Callable[[_Extraction], None], ...] = (
    _extract_emails,
    _extract_coupons,
    extract_batches,
    _extract_codes,
    extract_accounts,
    _extract_phones,
    extract_points,
    _extract_amounts,
    extract_dates,
    extract_event_dates,  # reads the dates found just before
    extract_callbacks,  # idem, for a callback's due time
    _extract_addresses,
    _extract_products,
    extract_membership,  # before the names: 「我是黄金会员」 introduces no 黄金
    _extract_names,
    _extract_topic,
    _extract_entities_by_pos,
)

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

    ``role`` is ``"user"``, ``"assistant"`` or ``"tool"`` (read like the assistant): the session topic is taken
    from the user only, a name from the user or from the agent reading it back; profile facts (phone, e-mail,
    address, birthday) count only when they are the user's own — see the module docstring for who owns what;
    coupons and callbacks are typically the agent's.
    ``language`` (``"zh"``/``"en"``) chooses the language of ``content``; anything else, or ``None``, means the
    message's own language.

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
    kept = _without_slips(state)
    marked = {item.key for item in kept if item.key in _COMPETING and (item.start, item.end) not in state.bare}
    for item in kept:
        if item.key in marked and (item.start, item.end) in state.bare:
            continue  # the message gives the customer's own value of this key in so many words; a bare one is not
        if (item.key, item.value) in seen:
            continue
        seen.add((item.key, item.value))
        memory_type, lifetime = LIFETIMES[item.key]
        change = item.key != "current_topic" and is_change(cleaned, item.start)
        facts.append(
            Fact(
                key=item.key,
                type=memory_type,
                value=item.value,
                content=content(item, lang, change),
                expires_in=item.expires_in if item.expires_in is not None else lifetime,
                data=dict(item.data),
                change=change,
            )
        )
    return facts


_COMPETING = frozenset({"phone", "email", "address"})
#: Keys a person holds one value of at a time, so two nearly equal values of one in a message are a slip and its fix.
#: Not order ids: a customer's two orders are often numbered one after the other.
_SINGLE_VALUED = frozenset({"phone", "email", "address", "name", "contact_phone", "contact_address", "work_address"})
#: How alike two values must be to be one value mistyped (a digit changed, two swapped, a letter missing).
_SLIP_RATIO = 0.8


def _slip(a: str, b: str) -> bool:
    """``a`` and ``b`` are one value, one of them mistyped: 13900001357 / 13900001375, anna.k@exmaple.com /
    anna.k@example.com, 张小雯 / 张晓雯. Values this short or this different are two values."""
    a, b = (re.sub(r"[\s\-().]", "", value).casefold() for value in (a, b))
    if a == b or min(len(a), len(b)) < 3 or abs(len(a) - len(b)) > 2:
        return False
    return SequenceMatcher(None, a, b, autojunk=False).ratio() >= _SLIP_RATIO


def _without_slips(state: _Extraction) -> list[_Found]:
    """What a message states, in order, less the values it corrects in place.

    「手机号是 139 0000 1357，不对不对，是 139 0000 1375」, "Phone is 07700 900345 - sorry, typo, it's 07700 900354",
    「由 18700002233 更正为 18700002323」, "was (619) 555-0114 and is now (619) 555-0141": one person's one phone, said
    twice nearly alike, is a slip and its fix, whatever words say so. The later value stands, unless a denial
    comes right before it ("G12 8QQ rather than G12 8QA"). Two values of one key however unlike, order ids too,
    with words between them that take the first back (:func:`taken_back`: 「哦不是」, "wait no, that's my old
    place") are a correction as well. Values of different keys (the user's and a contact's) never correct each
    other.
    """
    found = sorted(state.found, key=lambda f: (f.start, f.key))
    dropped: set[int] = set()
    for i, earlier in enumerate(found):
        if earlier.key not in _SINGLE_VALUED and earlier.key != "order_id":
            continue
        for j in range(i + 1, len(found)):
            later = found[j]
            if j in dropped or later.key != earlier.key:
                continue
            if earlier.key == "order_id" or not _slip(earlier.value, later.value):
                if not taken_back(state.text, earlier.end, later.start):
                    continue
            dropped.add(j if is_rejected(state.text, later.start) else i)
            break
    return [item for i, item in enumerate(found) if i not in dropped]


def disowned_keys(text: str) -> list[str]:
    """The profile keys (``phone``, ``email``, ``address``, ``name``) the user says are not theirs.

    「这不是我的电话」→ ``["phone"]``, 「那个地址不是我的」→ ``["address"]``, 「邮箱不对，那不是我的」→ ``["email"]``,
    "that email isn't mine" → ``["email"]``. A key for which the same message gives the user's new value is left
    out: 「不对，我的号码是139…」 and 「这不是我的号码，我的是139…」 are replacements, handled by the upsert.
    """
    cleaned = redact(text or "")
    mentioned = disowned_mentions(cleaned)
    if not mentioned:
        return []
    given = {fact.key for fact in extract_facts(cleaned, role="user")}
    return [key for key in mentioned if key not in given]
