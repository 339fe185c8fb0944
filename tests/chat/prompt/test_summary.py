"""The summary channel: keyword-weighted LexRank over the last 10 turns, prefixed, short, never a secret (S6)."""

from __future__ import annotations

import pytest

import chat.prompt.summary as summary_module
from chat.prompt.summary import KEYWORD_WEIGHT, SUMMARY_PREFIX, SentenceTokenizer, summarize

ZH_TURNS = [
    ("user", "你好"),
    ("assistant", "您好，请问有什么可以帮您？"),
    ("user", "我叫张伟，我的订单号是 ABC123，昨天付了 ¥299，还没发货。"),
    ("assistant", "好的，我帮您查一下。"),
    ("assistant", "订单 ABC123 预计 11 月 12 日发货，快递单号 SF1234567890。"),
    ("user", "嗯嗯，好的，谢谢"),
]
EN_TURNS = [
    ("user", "Hi, my name is John Smith."),
    ("assistant", "Hello John, how can I help you today?"),
    ("user", "My order #A-1029 for $25.50 has not arrived."),
    ("assistant", "Order A-1029 was shipped on Nov 3, tracking 1Z999AA10123456784."),
    ("user", "Thanks."),
]
# Sentences about membership fees resemble each other (central in LexRank); the order sentence stands alone.
CENTRAL_CHATTER = [
    ("user", "我想了解一下你们的会员服务怎么收费"),
    ("assistant", "我们的会员服务按年收费，会员服务还包括免运费"),
    ("user", "会员服务可以按月收费吗"),
    ("assistant", "会员服务目前只能按年收费"),
    ("user", "另外订单号 ABC123 还没发货"),
]


def body(summary: str) -> str:
    assert summary.startswith(SUMMARY_PREFIX)
    return summary[len(SUMMARY_PREFIX) :]


def test_prefix_is_exact_and_facts_are_kept() -> None:
    # when
    result = summarize(ZH_TURNS)

    # then
    assert result.startswith("【对话摘要】以下为本次会话的关键事实提炼：")
    for fact in ("张伟", "ABC123", "¥299"):
        assert fact in result
    assert len(body(result)) <= 120


def test_english_turns_get_english_speaker_labels() -> None:
    result = summarize(EN_TURNS)

    assert "User: " in result
    assert "John Smith" in result
    assert "#A-1029" in result
    assert len(body(result)) <= 120


def test_keyword_sentences_are_weighted_five_times(monkeypatch: pytest.MonkeyPatch) -> None:
    # given room for one sentence only
    assert KEYWORD_WEIGHT == 5.0

    # when weighted, the order number wins over the most central chatter
    weighted = summarize(CENTRAL_CHATTER, target_chars=30)
    monkeypatch.setattr(summary_module, "KEYWORD_WEIGHT", 1.0)
    unweighted = summarize(CENTRAL_CHATTER, target_chars=30)

    # then
    assert "ABC123" in weighted
    assert "ABC123" not in unweighted
    assert "会员服务" in unweighted


@pytest.mark.parametrize(
    "turns",
    [
        [("user", "我的API密钥是sk-proj-AbC123dEf456GhI789jKl012，订单号 ABC123")],
        [("user", "密码是hunter2，帮我登录"), ("assistant", "好的，已为您登录，订单 ABC123 已发货")],
        [("user", "my password: hunter2 and the order is #A-1029")],
        [("assistant", "Use header Authorization: Bearer abc123def456ghi789 for order A-1029")],
        [("user", "token ghp_abcdefghijklmnopqrstuvwxyz0123456789, card 4111 1111 1111 1111, order ABC123")],
    ],
)
def test_summary_never_contains_secrets(turns: list[tuple[str, str]]) -> None:
    result = summarize(turns, target_chars=200)

    for secret in ("sk-proj", "hunter2", "abc123def456ghi789", "ghp_", "4111"):
        assert secret not in result
    assert "[REDACTED" not in result  # a sentence that held a secret is left out entirely


def test_only_the_last_ten_turns_count() -> None:
    # given a fact in the first of twelve turns
    turns = [("user", "我的订单号是 OLD999")]
    turns += [("user", f"第 {i} 个问题：订单 NEW{i:03d} 到哪了？") for i in range(11)]

    # when
    result = summarize(turns, target_chars=400)

    # then
    assert "OLD999" not in result
    assert "NEW010" in result


def test_empty_or_filler_only_turns_give_the_prefix_alone() -> None:
    assert summarize([]) == SUMMARY_PREFIX
    assert summarize([("user", "好的，谢谢"), ("assistant", "不客气，祝您生活愉快")]) == SUMMARY_PREFIX
    assert summarize([("user", "Thanks, bye!")]) == SUMMARY_PREFIX


def test_deterministic_and_ties_broken_by_position() -> None:
    # given two sentences with equal ratings
    turns = [("user", "订单 AAA111 未发货"), ("user", "订单 BBB222 未发货")]

    # when room for one only
    results = {summarize(turns, target_chars=20) for _ in range(3)}

    # then the earlier one wins, every time
    assert results == {SUMMARY_PREFIX + "用户：订单 AAA111 未发货。"}


@pytest.mark.parametrize("target", [20, 40, 80, 120, 200])
def test_body_stays_within_target(target: int) -> None:
    long_turn = "我住在北京市朝阳区建国路 88 号，电话 13912345678，明天下午 3 点前一定要送到，否则我要退款。"
    turns = [*ZH_TURNS, ("user", long_turn)]

    assert len(body(summarize(turns, target_chars=target))) <= target


def test_chronological_order_is_kept() -> None:
    result = summarize(ZH_TURNS, target_chars=200)

    assert result.index("张伟") < result.index("SF1234567890")


def test_tool_and_system_turns_are_not_summarised() -> None:
    turns = [
        ("system", "你是客服 SYS001"),
        ("tool", '{"status":"shipped","order_id":"TOOL42"}'),
        ("user", "订单 ABC123 到哪了"),
    ]

    result = summarize(turns)

    assert "ABC123" in result
    assert "TOOL42" not in result
    assert "SYS001" not in result


def test_tokenizer_needs_no_nltk_data() -> None:
    tokenizer = SentenceTokenizer()

    assert tokenizer.to_sentences("我叫张伟。订单 ABC123 没到！Where is it? Fine.") == (
        "我叫张伟。",
        "订单 ABC123 没到！",
        "Where is it?",
        "Fine.",
    )
    assert tokenizer.to_words("订单创建失败") == ("订单", "创建", "失败")
    assert tokenizer.to_words("Order A-1029 isn't here") == ("Order", "A-1029", "isn't", "here")


def test_a_two_sentence_conversation_is_summarised_without_numpy_warnings() -> None:
    # given: a first exchange, where every idf is ≤ 0 and LexRank's power method divides by zero
    import warnings

    turns = [("user", "我的订单 SO-123 没到。"), ("assistant", "请问您的手机号？")]
    # when: summarised with warnings as errors (numpy's went to the server's log on every short conversation)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = summarize(turns)
    # then: both sentences, and nothing logged
    assert summary == SUMMARY_PREFIX + "用户：我的订单 SO-123 没到。客服：您的手机号？"


def test_the_similarity_graph_equals_sumys_own() -> None:
    # given: random windows of up to 20 sentences over a small vocabulary (many shared words, empty sentences)
    import random

    from sumy.summarizers.lex_rank import LexRankSummarizer

    from chat.prompt.summary import _summarizer

    lexrank = _summarizer()
    rng = random.Random(7)
    vocabulary = [f"词{i}" for i in range(30)]
    for _ in range(300):
        sentences = [[rng.choice(vocabulary) for _ in range(rng.randint(0, 8))] for _ in range(rng.randint(1, 20))]
        tf, idf = lexrank._compute_tf(sentences), lexrank._compute_idf(sentences)
        # when: the graph is built by memdesk's matrix product and by sumy's pairwise loop
        ours = lexrank._create_matrix(sentences, lexrank.threshold, tf, idf)
        theirs = LexRankSummarizer._create_matrix(lexrank, sentences, lexrank.threshold, tf, idf)
        # then: the same edges and weights
        assert ours.shape == theirs.shape
        assert abs(ours - theirs).max() < 1e-12


@pytest.mark.django_db(transaction=True)
def test_a_fact_said_nine_exchanges_back_is_in_the_summary_and_not_in_the_raw_turns(acme, fake_ollama):
    """Seed S6: 「对最近 10 轮对话做摘要」 — ten exchanges, not ten messages: the raw channel already carries the
    last five exchanges, so the summary must reach further back than they do."""
    from tests.factories import open_session

    # given an exchange that states a fact, then eight more exchanges about other things
    sid = open_session(acme, "summary-user")["session_id"]
    said = ["我想把收货地址改到杭州市西湖区文三路 88 号的公司前台"]
    said += [f"第{n}个问题：这款耳机支持无线充电吗？" for n in range(2, 10)]
    for text in said:
        acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": text}, format="json")
    # when the tenth message arrives (the fact is nine exchanges back)
    acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "好的，还有别的吗"}, format="json")
    # then the model's prompt has the fact in its summary channel and not among its raw turns
    request = fake_ollama.chat_requests[-1]
    system = request["messages"][0]["content"]
    summary = next(line for line in system.split("\n") if line.startswith(SUMMARY_PREFIX))
    assert "文三路" in summary
    raw = [m["content"] for m in request["messages"][1:]]
    assert not any("文三路" in text for text in raw)
