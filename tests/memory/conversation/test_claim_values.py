"""What values a statement gives (memory.conversation.claims.values_of): words that only look like values."""

from __future__ import annotations

from memory.conversation.claims import values_of


def _said(text: str) -> list[tuple[str, str]]:
    return [(v.kind, v.text) for v in values_of(text)]


def test_a_little_is_no_one_oclock():
    assert _said("车位离电梯太远了，有没有近一点的？") == []
    assert _said("能便宜一点吗") == []


def test_one_oclock_said_as_a_time_is_still_a_time():
    assert _said("下午一点到") == [("time", "下午一点")]
    assert _said("明天一点到三点都行") == [("time", "一点"), ("time", "三点")]
    assert _said("一点半") == [("time", "一点半")]


def test_a_chinese_time_with_digits_keeps_its_part_of_the_day():
    # 「下午3:30」 and 「下午3点半」 are one time: read without its part of the day it was 03:30
    assert [(v.text, v.norm) for v in values_of("周五下午3:30上门") if v.kind == "time"] == [("下午3:30", "15:30")]
    assert [v.norm for v in values_of("周五下午3点半上门") if v.kind == "time"] == ["15:30"]
    assert [v.norm for v in values_of("周三上午9:30，刘医生") if v.kind == "time"] == ["09:30"]
