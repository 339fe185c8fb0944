"""The knowledge part of the prompt: inside the exact token budget, cut after the recent turns and before the
memories, lowest-ranked passage first; a passage cut to fit is not citable."""

from __future__ import annotations

from chat.prompt.build import PromptParts, build_prompt
from chat.prompt.tokens import count_messages
from chat.turn.knowledge import asks_the_business, citations, shown
from knowledge import KnowledgeHit


def _parts(**extra):
    return PromptParts(
        role_text="",
        anchor_facts=["姓名 张伟"],
        execution_context={"current_tool": None, "tool_args": None, "last_tool_result": None, "session_variables": {}},
        summary="【对话摘要】以下为本次会话的关键事实提炼：用户询问退货。",
        memories=["[user_profile] 用户是VIP会员"],
        recent_turns=[("user", "你好" * 40), ("assistant", "您好" * 40)],
        user_input="退货要多久？",
        knowledge=[(f"K{i}", f"售后政策 › 退货: 第{i}条规定" + "说明" * 60) for i in range(1, 4)],
        **extra,
    )


def _hit(n: int) -> KnowledgeHit:
    return KnowledgeHit(article_id=f"a{n}", version=1, title="t", url="", passage_id=f"kp{n}", text="x", score=0.9)


def test_the_passages_are_labelled_in_the_system_message_with_the_cite_instruction():
    built = build_prompt(_parts(), context_size=32768)
    system = built.messages[0]["content"]
    assert "【知识库】" in system
    assert system.index("[K1] 售后政策 › 退货: 第1条") < system.index("[K2]") < system.index("[K3]")
    assert "[K1]" in system.split("[K3]")[1]  # the instruction, after the passages
    assert built.prompt_tokens == count_messages(built.messages)


def test_over_budget_the_turns_go_before_the_passages_and_the_passages_before_the_memories():
    full = build_prompt(_parts(), context_size=32768)
    # a budget that fits everything but about two passages' worth
    tight = full.prompt_tokens - 150
    built = build_prompt(_parts(), context_size=tight + 1024)
    assert built.prompt_tokens <= tight
    assert built.trimmed[0] == "summary"
    cuts = [t for t in built.trimmed if t.startswith(("recent_turns", "knowledge", "memories"))]
    assert cuts[:2] == ["recent_turns[0]", "recent_turns[1]"]
    assert "knowledge[2]" in cuts
    assert not any(t.startswith("memories") for t in cuts)
    system = built.messages[0]["content"]
    assert "第1条" in system
    assert "第3条" not in system
    assert "用户是VIP会员" in system


def test_when_every_passage_is_cut_the_cite_instruction_goes_too():
    parts = _parts()
    parts.recent_turns = []
    parts.summary = ""
    small = build_prompt(PromptParts(**{**parts.__dict__, "knowledge": []}), context_size=32768).prompt_tokens
    built = build_prompt(parts, context_size=small + 1024 + 5)
    assert [t for t in built.trimmed if t.startswith("knowledge")] == ["knowledge[2]", "knowledge[1]", "knowledge[0]"]
    assert "【知识库】" not in built.messages[0]["content"]


def test_a_cut_passage_is_not_citable_and_an_unknown_label_is_invented():
    passages = [("K1", _hit(1)), ("K2", _hit(2)), ("K3", _hit(3))]
    carried = shown(passages, ["summary", "knowledge[2]"])
    cited, invented = citations("见 [K1]，又见【K2】与 [K1, K3] 以及 [k7]。", carried)
    assert [label for label, _ in cited] == ["K1", "K2"]
    assert invented == ["K3", "K7"]


def test_a_question_about_the_business_is_a_question_not_about_the_customers_own_facts():
    for text in ("你们周日几点关门？", "退货政策是什么", "可以开发票吗", "What time do you close on Sundays?"):
        assert asks_the_business(text, ()), text
    for text in ("你好", "谢谢！", "好的，我知道了。", "thanks, bye", "Hello there."):
        assert not asks_the_business(text, ()), text
    assert not asks_the_business("我的订单到哪了？", ("order_id",))
