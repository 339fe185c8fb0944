"""Customer-service facts beyond the profile: events with dates, accounts, memberships, points, callbacks, batch jobs.

Extractors of the rule pipeline (:mod:`memory.extraction.rules` runs them in its order), each writing :class:`Found`
items:

- :func:`extract_event_dates` gives a date its meaning from the event word next to it in its clause —
  ``birthday`` (生日, "birthday"; the user's own only), ``ship_date`` (发货), ``delivery_date`` (送达, 到货),
  ``pickup_time`` (取件), ``appointment`` (预约, 上门安装), ``renewal_date`` (续费), ``expiry_date`` (到期) — and
  reads deadlines without a date (「48小时内发货」, "within 3 business days"). The plain ``date`` fact stays: it is
  the session's "date we are talking about", the event fact is the lasting reference.
- :func:`extract_batches`: a batch job id and its progress (「批量任务 BATCH-2031 已完成 40/100」, "job JOB-88 is 60%
  done"), ``batch_progress``.
- :func:`extract_accounts`: account and member ids after a label (账号, 会员号, "account ID") or with a known prefix
  (ENT-77821, VIP20230815), ``account_id``.
- :func:`extract_points`: a points balance (「积分还有 1,280 分」, 「我的积分是两千三」, "I have 4,500 points").
- :func:`extract_membership`: the user's tier when the user or the agent says the user holds it (「我是PLUS会员」,
  「您目前是黄金会员」, "I'm a Gold member"); an offer or a question (「升级黄金会员可享…」, 「您是PLUS会员吗」)
  is none.
- :func:`extract_callbacks`: the agent's promise to call back, with its due time when stated (「我们会在24小时内给您
  回电」, 「明天上午10点前回电话给您」, "we'll call you back tomorrow").

Chinese numerals are read with :mod:`memory.text.numerals`, one numeral span at a time. Pure; no database access.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from memory.extraction.dates import local_tz
from memory.extraction.state import CLAUSE_END, SEP, A, Extraction, Found, Z
from memory.text.numerals import CN_NUMBER, NUMBER, parse_int, parse_number

__all__ = [
    "extract_accounts",
    "extract_batches",
    "extract_callbacks",
    "extract_event_dates",
    "extract_membership",
    "extract_points",
]

DAY = 86_400
_SENTENCE_END = re.compile(r"[。！？!?\n]|\.(?:\s|$)")

# --------------------------------------------------------------------------------------------------------------
# Events with dates
# --------------------------------------------------------------------------------------------------------------

#: Event words, in the order that breaks a tie of distance (「上门取件」 is a pickup, not an appointment).
_EVENTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (key, re.compile(pattern))
    for key, pattern in (
        ("birthday", r"生日|出生日期|出生|(?i:(?<![A-Za-z])(?:birthday|date of birth|DOB|born)(?![A-Za-z]))"),
        (
            "pickup_time",
            r"上门取件|取件|揽件|取货|自提|提货|上门取|(?i:(?<![A-Za-z])(?:pick(?:ed|s)?[- ]?up|"
            r"pick(?:ed|s)?\s+(?:it|them|the\s+\w+)\s+up|collection)(?![A-Za-z]))",
        ),
        (
            "ship_date",
            r"发货|发出|寄出|出库|(?i:(?<![A-Za-z])(?:ship(?:s|ped|ping)?|dispatch(?:ed|es)?|sent out)(?![A-Za-z]))",
        ),
        (
            "delivery_date",
            r"到货|送达|送到|派送|配送|签收|到达|收到货|能到|会到|(?i:(?<![A-Za-z])(?:deliver(?:s|ed|y)?|"
            r"arriv(?:e|es|ed|al)|reach you)(?![A-Za-z]))",
        ),
        (
            "appointment",
            r"预约|约了|约在|上门|安装|维修|挂号|面诊|(?i:(?<![A-Za-z])(?:appointment|booked|booking|visit|"
            r"technician)(?![A-Za-z]))",
        ),
        (
            "renewal_date",
            r"续费|续订|续约|自动扣费|下次扣[费款]|(?i:(?<![A-Za-z])(?:renew(?:s|al|ed)?|auto-?renew(?:s|al)?|"
            r"next billing)(?![A-Za-z]))",
        ),
        (
            "expiry_date",
            r"到期|过期|失效|有效期(?:至|到)|(?i:(?<![A-Za-z])(?:expir(?:e|es|ed|y|ation)|valid until)(?![A-Za-z]))",
        ),
    )
)
_DEADLINE_EVENTS = ("pickup_time", "ship_date", "delivery_date", "appointment")
_CN_SMALL = "[一二两三四五六七八九十]{1,3}"
_EN_SMALL = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "ten": 10}
_WITHIN = re.compile(
    rf"(?P<n>\d{{1,3}}|{_CN_SMALL})\s*个?\s*(?P<unit>小时|天|工作日)\s*(?:内|之内|以内)|"
    r"(?i:(?<![A-Za-z])within\s+(?P<n_en>\d{1,3}|an?|one|two|three|four|five|six|seven|ten)\s+"
    r"(?P<unit_en>hours?|days?|business days?|working days?)(?![A-Za-z]))"
)


def _sentence(text: str, start: int, end: int) -> tuple[int, int]:
    left = 0
    for match in _SENTENCE_END.finditer(text, 0, start):
        left = match.end()
    right = _SENTENCE_END.search(text, end)
    return left, right.start() if right else len(text)


def _clause_bounds(state: Extraction, start: int, end: int) -> tuple[int, int]:
    text = state.text
    left = max(text.rfind(char, 0, start) for char in CLAUSE_END) + 1
    rights = [i for i in (text.find(char, end) for char in CLAUSE_END) if i >= 0]
    return left, min(rights) if rights else len(text)


def _nearest_event(state: Extraction, start: int, end: int, keys: tuple[str, ...] | None = None) -> tuple[str, str]:
    """The event word closest to ``text[start:end]`` in its clause, as ``(key, word)``; ``("", "")`` if none."""
    left, right = _clause_bounds(state, start, end)
    best: tuple[int, int, str, str] | None = None
    for order, (key, pattern) in enumerate(_EVENTS):
        if keys is not None and key not in keys:
            continue
        for match in pattern.finditer(state.text, left, right):
            if start <= match.start() < end:
                continue  # a word inside the date itself (「出生」 in no date, but be safe)
            distance = match.start() - end if match.start() >= end else start - match.end()
            rank = (max(distance, 0), order)
            if best is None or rank < best[:2]:
                best = (*rank, key, match.group(0))
    return (best[2], best[3]) if best else ("", "")


def _add_business_days(day: datetime, count: int) -> datetime:
    while count > 0:
        day += timedelta(days=1)
        if day.weekday() < 5:
            count -= 1
    return day


def _deadline(state: Extraction, match: re.Match[str]) -> tuple[datetime, str] | None:
    """The moment a 「N小时内」/"within N days" span ends, and its granularity."""
    raw = match.group("n") or match.group("n_en")
    count = _EN_SMALL.get(raw.lower()) if raw.isalpha() and raw.isascii() else parse_int(raw)
    unit = (match.group("unit") or match.group("unit_en") or "").lower()
    if not count:
        return None
    if unit in ("小时", "hour", "hours"):
        return state.now + timedelta(hours=count), "hour"
    local = state.now.astimezone(local_tz(state.now))
    if unit in ("工作日",) or "business" in unit or "working" in unit:
        return _add_business_days(local, count), "day"
    return local + timedelta(days=count), "day"


def extract_event_dates(state: Extraction) -> None:
    """Run after the dates: each ``date`` next to an event word also becomes that event's fact."""
    for item in [found for found in state.found if found.key == "date"]:
        key, word = _nearest_event(state, item.start, item.end)
        if not key:
            continue
        data: dict[str, Any] = {**item.data, "event": word}
        value = item.value
        if key == "birthday":
            if state.owner(item.start, item.end) != "user":
                continue  # 「我妈生日是3月12号」 is a date, not the user's birthday
            # Without a year the date is only a day of the year: stored as --MM-DD (ISO 8601's form for it).
            has_year = re.search(r"\d{4}", item.data["text"]) is not None
            value = item.data["local_date"] if has_year else "--" + item.data["local_date"][5:]
            data["birthday"] = value
        expires_in = None
        if key == "expiry_date":
            # What expires on a day is current through that day, not for the key's usual season: after it, the
            # coupon or plan the message named is no longer valid, and neither is this fact.
            end = datetime.fromisoformat(item.data["local_date"]) + timedelta(days=1)
            end = end.replace(tzinfo=local_tz(state.now))
            if end > state.now:
                expires_in = int((end - state.now).total_seconds())
        state.found.append(Found(item.start, item.end, key, value, data, expires_in=expires_in))
    for match in _WITHIN.finditer(state.text):
        if not state.free(*match.span()):
            continue
        key, word = _nearest_event(state, *match.span(), keys=_DEADLINE_EVENTS)
        deadline = _deadline(state, match) if key else None
        if deadline is None:
            continue
        iso = deadline[0].astimezone(UTC).isoformat()
        local_date = deadline[0].astimezone(local_tz(state.now)).date().isoformat()
        data = {
            "date": iso,
            "local_date": local_date,
            "granularity": deadline[1],
            "text": match.group(0).strip(),
            "event": word,
            "by": True,
        }
        state.add(Found(match.start(), match.end(), key, iso, data))


# --------------------------------------------------------------------------------------------------------------
# Promised callbacks
# --------------------------------------------------------------------------------------------------------------

_CALLBACK = re.compile(
    r"(?:回电话?|回拨|致电|来电|去电|打电话|电话联系|电话回访|回访)(?:给|联系)?您|给您(?:回电话?|回拨|致电|打电话|去电|来电|"
    r"回个电话|打个电话)|"
    r"(?i:(?<![A-Za-z])(?:(?:we(?:'ll|’ll| will| are going to| can)|someone(?: from [\w ]{1,20})? will|"
    r"(?:an?|our|the) (?:agent|specialist|technician|engineer|representative|rep|colleague|supervisor|manager|"
    r"team member|courier) will|i(?:'ll|’ll| will))\s+(?:\w+\s+){0,3}?(?:call|phone|ring|give)\s+you"
    r"(?:\s+(?:back|a call|a ring))?|(?:you(?:'ll|’ll| will) (?:get|receive)|expect) a (?:call|callback|call back|"
    r"phone call)|call-?back (?:is |has been )?(?:scheduled|booked|arranged))(?![A-Za-z]))"
)
_PROMISE_ZH = re.compile(r"会|将|稍后|尽快|马上|随后|安排|之后|内|前")
_NEGATED = re.compile(r"[不别]|无需|不用|(?i:(?<![A-Za-z])(?:not|won't|will not|can't|cannot)(?![A-Za-z]))")


def extract_callbacks(state: Extraction) -> None:
    """The agent's promise to call the user back (``callback``); value: the due moment, or ``"pending"``."""
    if state.role == "user":
        return
    for match in _CALLBACK.finditer(state.text):
        left, right = _sentence(state.text, match.start(), match.end())
        before = state.text[left : match.start()]
        chinese = not match.group(0).isascii()
        if chinese and not _PROMISE_ZH.search(before):
            continue  # 「您可以打电话给您的…」-like wording without a promise
        clause_lead = re.split(f"[{CLAUSE_END}]", before)[-1]
        if _NEGATED.search(clause_lead[-12:]) or _NEGATED.search(match.group(0)):
            continue  # 「不会给您回电」, "we will not call you"
        due: datetime | None = None
        spoken = ""
        within = _WITHIN.search(state.text, left, right)
        if within is not None and (deadline := _deadline(state, within)) is not None:
            due, spoken = deadline[0], within.group(0).strip()
        else:
            dates = [f for f in state.found if f.key == "date" and left <= f.start < right]
            if dates:
                due = datetime.fromisoformat(dates[0].value)
                spoken = dates[0].data["text"]
        data: dict[str, Any] = {"due": due.astimezone(UTC).isoformat() if due else None, "text": spoken}
        expires_in = None
        if due is not None and due > state.now:
            expires_in = int((due - state.now).total_seconds()) + DAY  # a missed callback stays visible a day
        value = data["due"] or "pending"
        state.found.append(Found(match.start(), match.end(), "callback", value, data, expires_in=expires_in))
        return  # one promise per message


# --------------------------------------------------------------------------------------------------------------
# Batch jobs
# --------------------------------------------------------------------------------------------------------------

_BATCH_ID = re.compile(
    r"(?:批量任务|批处理任务|批次|任务|作业|(?i:(?<![A-Za-z])(?:batch(?:\s+job)?|bulk\s+job|job|task)))"
    r"\s*(?:号|编号|ID|id|#)?\s*[:：#]?\s*(?P<id>[A-Za-z][A-Za-z0-9_]*-?\d[A-Za-z0-9_-]*|\d{3,})" + Z
    + r"|" + A + r"(?P<bare>(?:BATCH|JOB|TASK|BULK)-?\d+)" + Z
)  # fmt: skip
_UNITS = r"(?:条|个|项|笔|单|件|行|封)?"
_PROGRESS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ratio", re.compile(rf"(?<![\d/])(?P<done>{NUMBER})\s*/\s*(?P<total>{NUMBER})(?![\d/])")),
    ("percent", re.compile(rf"(?P<pct>\d{{1,3}}(?:\.\d+)?)\s*%|百分之(?P<pct_zh>{CN_NUMBER}|\d{{1,3}})")),
    (
        "ratio",
        re.compile(
            rf"(?:完成|处理|导入|发送|同步|上传|执行)了?\s*(?P<done>{NUMBER})\s*{_UNITS}\s*[，,、]?\s*(?:共|总共|一共|总计|合计)"
            rf"\s*(?P<total>{NUMBER})"
        ),
    ),
    (
        "ratio",
        re.compile(
            rf"(?:共|总共|一共|总计|合计)\s*(?P<total>{NUMBER})\s*{_UNITS}\s*[，,、]?\s*(?:已经|已)?(?:完成|处理|导入|发送|"
            rf"同步|上传)了?\s*(?P<done>{NUMBER})"
        ),
    ),
    ("ratio", re.compile(r"(?i:(?P<done>\d[\d,]*)\s+(?:of|out of)\s+(?P<total>\d[\d,]*))")),
    (
        "complete",
        re.compile(
            r"已全部完成|全部完成|已完成(?!\s*[\d一二三四五六七八九十两])|(?i:is (?:complete|completed|done|finished))"
        ),
    ),
)


def _progress(state: Extraction, start: int, end: int) -> tuple[dict[str, Any], str, tuple[int, int]] | None:
    for kind, pattern in _PROGRESS:
        match = pattern.search(state.text, start, end)
        if match is None or not state.free(*match.span()):
            continue
        if kind == "complete":
            return {"percent": 100}, "100%", match.span()
        if kind == "percent":
            percent = parse_number(match.group("pct") or match.group("pct_zh"))
            if percent is None or percent > 100:
                continue
            shown = format(percent.normalize(), "f")
            return {"percent": float(percent) if percent % 1 else int(percent)}, f"{shown}%", match.span()
        done, total = parse_int(match.group("done")), parse_int(match.group("total"))
        if done is None or not total or done > total:
            continue
        return {"completed": done, "total": total}, f"{done}/{total}", match.span()
    return None


def extract_batches(state: Extraction) -> None:
    """A batch job id and its progress, stated in the same sentence after the id (``batch_progress``)."""
    for match in _BATCH_ID.finditer(state.text):
        group = "id" if match.group("id") else "bare"
        start, end = match.span(group)
        if not state.free(start, end):
            continue
        task_id = match.group(group).upper()
        progress = _progress(state, end, _sentence(state.text, start, end)[1])
        if progress is None:
            continue
        data, shown, span = progress
        state.claimed.append(span)
        state.add(Found(start, end, "batch_progress", f"{task_id} {shown}", {"task_id": task_id, **data}))


# --------------------------------------------------------------------------------------------------------------
# Accounts, membership, points
# --------------------------------------------------------------------------------------------------------------

_ACCOUNT_KEYWORD = re.compile(
    r"(?:企业账号|企业账户|会员卡号|会员编号|会员号|客户编号|客户号|用户编号|用户ID|账号|账户|帐号|帐户|"
    r"(?i:(?<![A-Za-z])(?:account|customer|member(?:ship)?|client)\s*(?:id|number|no\.?|#)(?![A-Za-z])))"
    + SEP
    + r"(?P<v>[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){3,29})"
    + Z
    + r"(?![ -]?\d)"
)
_ACCOUNT_BARE = re.compile(
    A + r"(?P<v>(?:ENT|ENTP|ACC|ACCT|CUST|CUS|CID|UID|MBR|MEM|VIP|ORG|BIZ|CORP)-?\d{4,12})" + Z, re.IGNORECASE
)
_CN_MOBILE = re.compile(r"1[3-9]\d{9}")


def extract_accounts(state: Extraction) -> None:
    """Account and member ids (``account_id``): after a label, or with a known prefix such as ENT- or VIP."""
    for pattern in (_ACCOUNT_KEYWORD, _ACCOUNT_BARE):
        for match in pattern.finditer(state.text):
            value = match.group("v")
            start, end = match.span("v")
            if not re.search(r"\d", value) or _CN_MOBILE.fullmatch(value) or not state.free(start, end):
                continue  # a login that is a mobile number is the user's phone, found by the phone rules
            if state.role == "user" and state.owner(start, end) == "contact":
                continue
            value = value.upper()
            state.add(Found(start, end, "account_id", value, {"account_id": value}))


_TIER_ZH = re.compile(
    r"(?P<v>PLUS|Plus|plus|SVIP|88VIP|VIP\d?|超级|黄金|白金|铂金|钻石|黑金|金卡|银卡|白银|青铜|普通|高级|年度|年费|尊享|至尊|"
    r"金牌|银牌)\s*(?:卡)?(?:会员|用户)"
)
_TIER_EN = re.compile(
    r"(?i:(?<![A-Za-z])(?P<v>gold|silver|platinum|diamond|bronze|premium|plus|prime|vip|elite|black)\s+"
    r"(?:member(?:ship)?|tier|status|level|card ?holder)(?![A-Za-z]))"
)
_HOLDER = {
    "user": re.compile(r"我|本人|作为|(?i:(?<![A-Za-z])(?:i'm|i’m|i am|i have|i've|my|as an?|i upgraded)(?![A-Za-z]))"),
    "assistant": re.compile(
        r"您|恭喜|(?i:(?<![A-Za-z])(?:you're|you’re|you are|your|you have|you've|as an?)(?![A-Za-z]))"
    ),
}
_NOT_HELD = re.compile(
    r"不是|没有|还没|可以|如果|是否|想|打算|准备|要不要|开通后|升级后|吗|？|\?|"
    r"(?i:(?<![A-Za-z])(?:not|isn't|aren't|no longer|if|can|could|would|want|wants|to become|upgrade to|join)"
    r"(?![A-Za-z]))"
)


def extract_membership(state: Extraction) -> None:
    """The tier the user holds (``membership``), only when the speaker says the user holds it."""
    role = "user" if state.role == "user" else "assistant"
    for pattern in (_TIER_ZH, _TIER_EN):
        for match in pattern.finditer(state.text):
            start, end = match.span()
            if not state.free(start, end):
                continue
            clause = state.clause(start, end)
            lead = clause[: max(0, clause.find(match.group(0)))]
            if not _HOLDER[role].search(lead) or _NOT_HELD.search(clause):
                continue
            if role == "assistant" and re.search(r"升级(?:成|为|到)?$", lead) and "已" not in lead:
                continue
            tier = match.group("v")
            value = (
                tier.upper() if tier.lower() in ("plus", "vip", "svip") else tier.title() if tier.isascii() else tier
            )
            data = {"membership": value, "text": match.group(0)}
            state.add(Found(start, end, "membership", value, data))
            return


_POINTS_ZH = re.compile(
    rf"积分(?:余额|账户)?\s*(?:目前|现在|当前|总共|一共)?\s*(?:还有|还剩|剩下|剩余|只剩|有|剩|是|为|:|：|余额为?)\s*(?:了\s*)?"
    rf"(?P<n>{NUMBER})(?:\s*(?:分|积分|点))?|(?:还有|还剩|剩下|剩余|只剩|我有|您有|共有)\s*(?P<n2>{NUMBER})\s*(?:个)?积分|"
    # 「您目前积分两千三百八十分」, 「剩余积分九百六十分」: a word of the present or of what is left, then the
    # number and its unit (分), which tells a balance from 「积分2倍」
    rf"(?:目前|现在|当前|剩余|剩下|可用|总)\s*积分\s*(?:为|是|:|：)?\s*(?P<n3>{NUMBER})\s*(?:分|点)"
)
_POINTS_EN = re.compile(
    r"(?i:(?<![A-Za-z])(?:have|has|got|with|balance of|balance is|balance:)\s+(?P<n>\d[\d,]*)\s+(?:reward |loyalty |"
    r"bonus |member(?:ship)? )?points|points balance(?: is| of|:)?\s*(?P<n2>\d[\d,]*))"
)


def extract_points(state: Extraction) -> None:
    """A points balance (``points_balance``, data ``{"points": int}``), from either side."""
    for pattern in (_POINTS_ZH, _POINTS_EN):
        for match in pattern.finditer(state.text):
            group = next(g for g in ("n", "n2", "n3") if match.groupdict().get(g))
            points = parse_int(match.group(group))
            if points is None or not state.free(*match.span()):
                continue
            # "text": the number as written (「九百六十」), how a conversation unit's text shows the balance
            data = {"points": points, "text": match.group(group)}
            state.add(Found(match.start(), match.end(), "points_balance", str(points), data))
            return
