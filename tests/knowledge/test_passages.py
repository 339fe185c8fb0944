"""Where a version is cut into passages: at headings, between paragraphs, between sentences (Chinese and
English), never in the middle of a sentence, each passage within the documented size."""

from __future__ import annotations

from knowledge.content import blocks_of
from knowledge.passages import PASSAGE_MAX_CHARS, sentences, split


def test_each_heading_starts_a_passage_with_its_heading_path():
    # given an article with a section and a subsection
    body = (
        "# 退货政策\n\n收到商品后7天内可以无理由退货。\n\n## 退款\n\n退款在3个工作日内原路返回。"
        "\n\n# Shipping\n\nWe ship daily."
    )
    # when it is split
    passages = split(blocks_of(body, "markdown"))
    # then each section is its own passage, under its headings
    assert [(p.heading_path, p.text) for p in passages] == [
        (("退货政策",), "收到商品后7天内可以无理由退货。"),
        (("退货政策", "退款"), "退款在3个工作日内原路返回。"),
        (("Shipping",), "We ship daily."),
    ]
    assert [p.position for p in passages] == [0, 1, 2]


def test_short_paragraphs_of_a_section_share_a_passage():
    # given two short paragraphs under one heading
    passages = split(blocks_of("## Hours\n\nWe open at 9.\n\nWe close at 18.", "markdown"))
    # then they are one passage
    assert [p.text for p in passages] == ["We open at 9.\nWe close at 18."]


def test_a_long_paragraph_is_cut_between_sentences_never_inside_one():
    # given a Chinese and an English paragraph each longer than the limit
    zh = "".join(f"第{i}条规定：会员在购物满一百元后可以免运费，并且可以享受额外的积分奖励。" for i in range(30))
    en = " ".join(
        f"Rule {i} says that members get free shipping on orders over one hundred dollars." for i in range(30)
    )
    for paragraph, mark in ((zh, "。"), (en, ".")):
        # when it is split
        passages = split(blocks_of(paragraph, "markdown"))
        # then every passage is within the limit and ends at a sentence end, and nothing is lost
        assert len(passages) > 1
        assert all(len(p.text) <= PASSAGE_MAX_CHARS for p in passages)
        assert all(p.text.endswith(mark) for p in passages)
        assert "".join(p.text for p in passages).replace(" ", "") == paragraph.replace(" ", "")


def test_sentence_ends_in_chinese_and_english():
    # then 。！？ end Chinese sentences (with their closing quotes); . ! ? before a capital end English ones,
    # not a decimal point or an abbreviation
    assert sentences("请先登录。然后点击“退货”！可以吗？好的") == ["请先登录。", "然后点击“退货”！", "可以吗？", "好的"]
    assert sentences("It costs 3.5 dollars. Ask Mr. Smith! Done") == [
        "It costs 3.5 dollars. ",
        "Ask Mr. Smith! ",
        "Done",
    ]


def test_a_single_overlong_sentence_is_cut_at_its_clauses():
    # given one sentence of many clauses, longer than the limit
    sentence = "，".join(f"第{i}项服务包括上门安装" for i in range(80)) + "。"
    # when it is split
    passages = split(blocks_of(sentence, "markdown"))
    # then it is cut after clauses, each passage within the limit
    assert len(passages) > 1
    assert all(len(p.text) <= PASSAGE_MAX_CHARS for p in passages)
    assert all(p.text.endswith(("，", "。")) for p in passages)
