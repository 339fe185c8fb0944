"""A code written with a hyphen (「BCD-470」) is found by the lexical leg with or without the hyphen, or by its number.

rjieba keeps 「BCD-470」 one word where jieba cut it at the hyphen; ``memory.text.language.segment`` splits it into
the words the index has always held for it (bcd, 470), and adds the joined form (bcd470).
"""

from __future__ import annotations

import pytest

from memory.recall.pipeline import recall
from memory.text.language import segment
from tests.factories import write_memory


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("订单BCD-470到哪了", ["订单", "bcd", "470", "bcd470", "到", "哪", "了"]),
        ("BCD-470 到哪了", ["bcd", "470", "bcd470", "到", "哪", "了"]),
        ("where is BCD-470", ["where", "is", "bcd", "470", "bcd470"]),
        ("BCD470 到了吗", ["bcd470", "到", "了", "吗"]),
    ],
)
def test_a_hyphenated_code_is_segmented_alike_with_or_without_chinese_around_it(text: str, words: list[str]) -> None:
    assert segment(text) == words


@pytest.mark.parametrize("query", ["BCD-470 到哪了", "BCD470 到哪了", "470 到哪了", "BCD-470", "BCD470"])
def test_a_hyphenated_code_is_found_by_the_lexical_leg(acme, acme_session, query: str) -> None:
    # given a Chinese memory that names a return by its hyphenated code, among others of the same user
    target = write_memory(acme, acme_session, "用户的退货单 BCD-470 已寄出，等待仓库签收")
    for content in ["用户的订单 ABC123 已付款", "用户偏好周末送货", "用户住在北京市朝阳区", "用户的会员等级是黄金会员"]:
        write_memory(acme, acme_session, content)
    trace: dict = {}
    # when the user asks with the code, written with or without its hyphen, or only its number
    result = recall(acme.tenant, acme_session, query, k=3, record=False, trace=trace)
    # then the lexical leg ranks that memory first, and recall returns it first
    lexical = {c["id"]: c["lexical_rank"] for c in trace["candidates"]}
    assert lexical[target.pk] == 1
    assert result.hits[0].memory.pk == target.pk
