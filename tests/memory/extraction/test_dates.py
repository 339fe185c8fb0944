"""Dates in chat text resolved against the message's own time: a table of Chinese and English phrases, said on
Thursday 3 December 2026 in Shanghai, each with the day it means; for the Chinese ones a well-kept library
(jionlp) is the oracle. Where memdesk reads a phrase otherwise, the test says so and why."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from memory.extraction import extract_facts

SHANGHAI = ZoneInfo("Asia/Shanghai")
#: A Thursday.
NOW = datetime(2026, 12, 3, 10, 0, tzinfo=SHANGHAI)

#: (what the customer says, the phrase that names the day, the day)
CHINESE = [
    ("今天能发货吗", "今天", "2026-12-03"),
    ("明天下午送到", "明天", "2026-12-04"),
    ("后天有人在家", "后天", "2026-12-05"),
    ("大后天再联系我", "大后天", "2026-12-06"),
    ("昨天就该到了", "昨天", "2026-12-02"),
    ("前天下的单", "前天", "2026-12-01"),
    ("大前天付的款", "大前天", "2026-11-30"),
    ("我上周五下的订单", "上周五", "2026-11-27"),
    ("上星期三打过电话", "上星期三", "2026-11-25"),
    ("上个星期天退的货", "上个星期天", "2026-11-29"),
    ("上礼拜二收到的", "上礼拜二", "2026-11-24"),
    ("上上周五就申请了", "上上周五", "2026-11-20"),
    ("本周一提交的工单", "本周一", "2026-11-30"),
    ("这周五之前要到", "这周五", "2026-12-04"),
    ("这个星期六上门", "这个星期六", "2026-12-05"),
    ("下周日有空", "下周日", "2026-12-13"),
    ("下个星期一再安装", "下个星期一", "2026-12-07"),
    ("下下周三回访", "下下周三", "2026-12-16"),
    ("下下星期五出结果", "下下星期五", "2026-12-18"),
    ("3天后再查", "3天后", "2026-12-06"),
    ("5天前就寄出了", "5天前", "2026-11-28"),
    ("下个月15号再说", "下个月15号", "2027-01-15"),
    ("上个月15号扣的费", "上个月15号", "2026-11-15"),
    ("上上个月1号开的户", "上上个月1号", "2026-10-01"),
    ("12月25日送达", "12月25日", "2026-12-25"),
    ("周五送到就行", "周五", "2026-12-04"),
    ("礼拜四能到吗", "礼拜四", "2026-12-03"),
]

#: Read otherwise than jionlp, on purpose: a coupon "valid to the end of the month" is valid on its last day
#: (jionlp starts 「月底」 on the 25th); a bare weekday in customer service is the coming one (「星期三送到」 said
#: on a Thursday is next Wednesday; jionlp takes this week's, yesterday).
OWN_READING = [
    ("有效期到本月底", "本月底", "2026-12-31"),
    ("星期三送到", "星期三", "2026-12-09"),
]

ENGLISH = [
    ("can you ship it today", "2026-12-03"),
    ("deliver it tomorrow please", "2026-12-04"),
    ("it should have come yesterday", "2026-12-02"),
    ("I ordered it the day before yesterday", "2026-12-01"),
    ("call me the day after tomorrow", "2026-12-05"),
    ("I placed the order last Friday", "2026-11-27"),
    ("it was last Thursday", "2026-11-26"),
    ("the refund was requested last Monday", "2026-11-30"),
    ("please deliver it next Monday", "2026-12-07"),
    ("let's talk next Friday", "2026-12-11"),
    ("can it arrive on Friday", "2026-12-04"),
    ("check again in 3 days", "2026-12-06"),
    ("I sent it 3 days ago", "2026-11-30"),
    ("by the end of next month", "2027-01-31"),
    ("it must arrive by Dec 25", "2026-12-25"),
]


def _day(text: str) -> str:
    dates = [fact for fact in extract_facts(text, now=NOW) if fact.key == "date"]
    assert len(dates) == 1, (text, dates)
    return dates[0].data["local_date"]


def test_the_table_has_forty_phrases_in_both_languages():
    assert len(CHINESE) + len(OWN_READING) + len(ENGLISH) >= 40
    assert len(ENGLISH) >= 10


@pytest.mark.parametrize(("text", "phrase", "day"), CHINESE + OWN_READING, ids=lambda v: v if "-" not in v else "")
def test_a_chinese_phrase_means_its_day(text, phrase, day):
    assert _day(text) == day


@pytest.mark.parametrize(("text", "day"), ENGLISH, ids=lambda v: v if "-" not in v else "")
def test_an_english_phrase_means_its_day(text, day):
    assert _day(text) == day


@pytest.mark.parametrize(("text", "phrase", "day"), CHINESE, ids=lambda v: v if "-" not in v else "")
def test_the_chinese_table_agrees_with_jionlp(text, phrase, day):
    jio = pytest.importorskip("jionlp", reason="jionlp is the oracle (requirements-dev.txt)")
    parsed = jio.parse_time(phrase, time_base=NOW.replace(tzinfo=None).timestamp())
    assert parsed["time"][0][:10] == day


def test_a_message_dated_last_week_reads_its_own_week():
    # the same words, said a week earlier, mean a week earlier: the message's own time, not the server's
    earlier = datetime(2026, 11, 26, 10, 0, tzinfo=SHANGHAI)
    (fact,) = [f for f in extract_facts("我上周五下的订单", now=earlier) if f.key == "date"]
    assert fact.data["local_date"] == "2026-11-20"
