"""A name introduced without punctuation after it ends where the name ends, not one character later.

The tagger's HMM runs a name it does not know into the character after it (「张伟用这个号」 → 「张伟用」);
``memory.text.compression.name_in`` cuts it back by the name's structure (a surname and one or two characters).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.extraction.rules import extract_facts

NOW = datetime(2026, 11, 10, 9, 0, tzinfo=UTC)


def names(text: str) -> list[str]:
    return [fact.value for fact in extract_facts(text, role="user", now=NOW) if fact.key == "name"]


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("我叫张伟用这个号", "张伟"),  # a preposition joined to a two-character name
        ("我叫吴丽刚下单", "吴丽"),  # an adverb
        ("我叫张伟想问一下", "张伟"),  # a verb far more common on its own than 伟
        ("我叫孙浩是老客户", "孙浩"),
        ("我叫林晓雯用这个号问一下", "林晓雯"),  # a three-character name: four is one too many
        ("我叫徐文亮的订单到了吗", "徐文亮"),  # 亮 is a verb too, but rarer than 文: the name keeps it
        ("我叫朱佳怡要退款", "朱佳怡"),
        ("我叫张伟，手机 13912345678", "张伟"),
    ],
)
def test_an_introduced_name_ends_where_the_name_ends(text: str, name: str) -> None:
    assert names(text) == [name]


def test_a_word_the_tagger_guessed_as_a_place_is_not_a_place() -> None:
    # 「新卡」 (the new card) is no dictionary word; the tagger's guess for it is ``ns``
    assert [f for f in extract_facts("我已经搬家了，新卡寄这里", role="user", now=NOW) if f.key == "place"] == []
