"""A statement that names what it replaces carries the old value in its own words (memory.conversation.replacement):
the frames are the languages' words for putting one thing in another's place. Pure: no database."""

from __future__ import annotations

import pytest

from memory.conversation.replacement import Replacement, named_replacements


@pytest.mark.parametrize(
    ("text", "old", "new"),
    [
        (
            "I've changed the venue from the garden at 9 Orchard Close to Fernleigh Village Hall.",
            "garden at 9 Orchard Close",
            "Fernleigh Village Hall",
        ),
        (
            "I've replaced the lamb tagine with a mild chicken shawarma, alongside the skewers.",
            "lamb tagine",
            "mild chicken shawarma",
        ),
        ("Can we swap the lamb for chicken?", "lamb", "chicken"),
        ("Texts will go to 07700 900671 instead of 07700 900233.", "07700 900233", "07700 900671"),
        ("方案已由烤瓷（2800元）改成全瓷冠，费用3600元。", "烤瓷", "全瓷冠"),
        ("已把上课方式由上门改为线上。", "上门", "线上"),
        ("过敏的是头孢，不是青霉素，别写错了。", "青霉素", "头孢"),
        ("已将您的月卡由基础版（5元/月）升级为畅享版（12元/月）", "基础版", "畅享版"),
    ],
)
def test_the_old_value_a_statement_replaces_is_read(text: str, old: str, new: str) -> None:
    found = named_replacements(text)

    assert [r.old for r in found] == [old]
    assert new in found[0].new


@pytest.mark.parametrize(
    "text",
    [
        "It should arrive in 2 to 3 working days.",
        "That's not what I asked for.",
        "I'm not sure, not today.",
        "Thanks, I've updated it to 3 bedrooms.",
    ],
)
def test_words_that_replace_nothing_name_no_replacement(text: str) -> None:
    assert named_replacements(text) == []


def test_an_earlier_statement_of_the_old_value_and_not_the_new_states_what_was_replaced() -> None:
    swap = Replacement("lamb tagine", "mild chicken shawarma")

    assert swap.stated_in("For mains, the lamb tagine and the halloumi skewers.")
    assert not swap.stated_in("Lamb is off; the mild chicken shawarma and lamb tagine both cost £12.")
    assert not swap.stated_in("The halloumi skewers, please.")


def test_the_field_a_change_names_is_no_old_value() -> None:
    assert named_replacements("好的，已将您的联系电话更新为 139 1133 2854。") == []
    assert [r.old for r in named_replacements("麻烦把羊肉换成鸡肉")] == ["羊肉"]
