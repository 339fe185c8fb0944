"""A statement that names what it replaces carries the old value in its own words (memory.conversation.replacement):
the frames are the languages' words for putting one thing in another's place. Pure: no database."""

from __future__ import annotations

import pytest

from memory.conversation.replacement import Replacement, labelled_replacements, named_replacements


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


def test_a_chinese_value_named_by_its_distinguishing_part_is_the_replaced_one() -> None:
    # 「基础版」 → 「畅享版」 share their head; an earlier 「基础会员卡」 names the old one by what sets it apart.
    upgrade = Replacement("基础版", "畅享版")

    assert upgrade.stated_in("已为您开通基础会员卡，每月5元。")
    assert not upgrade.stated_in("畅享会员卡和基础会员卡都可以选。")
    assert not Replacement("东门A区", "东门B区").stated_in("在A区柜旁边。")  # a one-character core is no value


@pytest.mark.parametrize(
    ("old", "new", "replaced", "by"),
    [
        (
            "您的默认自提点是城西花园南门驿站。",
            "好的，已把默认自提点改为科技园二期快递柜。",
            "城西花园南门驿站",
            "科技园二期快递柜",
        ),
        ("孩子的报名班级是周六素描提高班", "报名班级已调整为周日水彩入门班", "周六素描提高班", "周日水彩入门班"),
    ],
)
def test_a_later_value_under_the_same_label_replaces_the_earlier(old: str, new: str, replaced: str, by: str) -> None:
    assert labelled_replacements(old, new) == [Replacement(replaced, by)]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("您的默认自提点是城西花园南门驿站。", "我现在的默认自提点是哪个？"),  # a question states no value
        ("您的默认自提点是城西花园南门驿站。", "您的默认自提点是城西花园南门驿站，营业到晚上9点。"),  # the same value
        ("您的默认自提点是城西花园南门驿站。", "您的收件人是王小丽。"),  # another label
        ("预约时间是周五下午2点", "预约时间改为周一上午10点"),  # typed values: a weekday's and a time's own rules
    ],
)
def test_labels_and_values_that_replace_nothing(old: str, new: str) -> None:
    assert labelled_replacements(old, new) == []
