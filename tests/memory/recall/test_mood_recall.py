"""Mood-aware recall (seed §6): 「在用户情绪低落时，能默默调高relevance_score，让关怀类记忆浮出水面」.

A negative query lifts care memories (a promised callback, compensation given) in that turn's ranking; the
stored relevance scores do not move.
"""

from __future__ import annotations

from typing import Any

import pytest

from conversations.models import ChatSession
from memory.models import MemoryUnit
from memory.recall.pipeline import recall
from memory.text.mood import care_reason, detect_mood
from tenants.rls import tenant_scope
from tests.factories import TenantCtx, open_session

SEED = "在用户情绪低落时，能默默调高relevance_score，让关怀类记忆浮出水面"


@pytest.mark.parametrize(
    "text",
    ["退款怎么还没到账，气死我了！！", "I've been waiting for three days and nobody called me back. Unacceptable!"],
)
def test_a_negative_message_is_detected(text: str) -> None:
    """「在用户情绪低落时」: an angry message, Chinese or English, is negative."""
    # when
    mood = detect_mood(text)

    # then
    assert mood.negative is True
    assert 0.45 <= mood.score < 1.0
    assert mood.cues


@pytest.mark.parametrize(
    "text", ["我一点也不生气", "I'm not upset at all", "我不是投诉，只是问一下", "No complaints, thanks!"]
)
def test_a_negated_negative_is_not_negative(text: str) -> None:
    """「在用户情绪低落时」: 「我一点也不生气」 says the user is not angry; the word alone does not decide."""
    # when
    mood = detect_mood(text)

    # then
    assert mood.negative is False
    assert any(cue.startswith("not:") for cue in mood.cues)


@pytest.mark.parametrize(
    "text", ["退款到账了吗", "你们支持垃圾分类回收吗", "麻烦帮我开一张发票", "This deal is insane!! Thanks!"]
)
def test_calm_messages_and_look_alike_words_are_not_negative(text: str) -> None:
    """「在用户情绪低落时」 only: 「垃圾分类」, 「麻烦」 and a happy 「！！」 are not a low mood."""
    assert detect_mood(text).negative is False


def test_care_memories_are_recognised_by_key_and_by_words() -> None:
    """「让关怀类记忆浮出水面」: a promised callback (its key), compensation and an apology (their words)."""
    assert care_reason("callback", "约定回电：明天 10:00") == "key:callback"
    assert care_reason(None, "已给用户补偿 20 元代金券") == "word:补偿"
    assert care_reason(None, "Agent apologised for the late delivery") == "word:apologised"
    assert care_reason("order_id", "用户订单号 A1029") is None


# A refund matter: the promised callback and the compensation are care memories; the rest are facts about the
# refund that a calm question about it is after.
ZH_MEMORIES = [
    ("fact_reference", "callback", "客服承诺24小时内回电，跟进退款进度"),
    ("fact_reference", None, "退款延迟，已补偿用户 20 元无门槛券"),
    ("tool_result", None, "退款 REF-1001 已提交，金额 199 元，原路退回"),
    ("fact_reference", None, "退款预计3到5个工作日到账"),
    ("fact_reference", None, "用户询问退款需要提供哪些材料"),
    ("fact_reference", None, "退款审核中，审核通过后会短信通知到账"),
    ("fact_reference", None, "用户的退款申请编号 REF-1001，到账后查看银行流水"),
]
CALM_ZH = "我的退款到账了吗"
ANGRY_ZH = "我的退款到账了吗？等了这么久还没到，气死我了！！"


@pytest.fixture
def refund_matter(acme: TenantCtx) -> dict[str, Any]:
    session_id = open_session(acme, "alice")["session_id"]
    acme.client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}", HTTP_X_SESSION_ID=session_id)
    ids = {"session": session_id}
    for mtype, key, content in ZH_MEMORIES:
        body = {"type": mtype, "content": content, **({"key": key} if key else {})}
        response = acme.client.post("/api/v1/memories", body, format="json")
        assert response.status_code == 201, response.content
        ids[content] = response.json()["id"]
    return ids


def _recall(ctx: TenantCtx, query: str, k: int = 7) -> list[str]:
    response = ctx.client.post("/api/v1/memories/recall", {"query": query, "k": k}, format="json")
    assert response.status_code == 200, response.content
    return [hit["memory"]["id"] for hit in response.json()["results"]]


def test_an_angry_query_brings_the_promised_callback_and_the_compensation_up(acme, refund_matter) -> None:
    """「在用户情绪低落时，能默默调高relevance_score，让关怀类记忆浮出水面」: the same question, said angrily,
    puts the promised callback and the compensation in the top results; said calmly, they rank lower."""
    callback, compensation = refund_matter[ZH_MEMORIES[0][2]], refund_matter[ZH_MEMORIES[1][2]]

    # when
    calm = _recall(acme, CALM_ZH)
    angry = _recall(acme, ANGRY_ZH)

    # then: every memory of the matter comes back both times (k = 7); only the order moves
    assert set(calm) == set(angry) >= {callback, compensation}
    assert set(angry[:2]) == {callback, compensation}
    assert angry.index(callback) < calm.index(callback)
    assert not {callback, compensation} <= set(calm[:2])


def _stored_scores(ctx: TenantCtx) -> dict[str, float]:
    with tenant_scope(ctx.tenant):
        rows = MemoryUnit.objects.for_tenant(ctx.tenant).values_list("id", "relevance_score")
        return {str(pk): score for pk, score in rows}


def test_the_lift_changes_no_stored_score(acme, refund_matter) -> None:
    """「默默调高relevance_score」 for the turn only: after an angry recall every memory keeps its stored score."""
    # given
    before = _stored_scores(acme)
    callback = refund_matter[ZH_MEMORIES[0][2]]

    # when
    lifted = _recall(acme, ANGRY_ZH)

    # then
    assert callback in lifted[:2]
    assert _stored_scores(acme) == before
    shown = acme.client.get(f"/api/v1/memories/{callback}").json()
    assert shown["lifespan"]["relevance_score"] == pytest.approx(before[callback])


def test_the_trace_reports_the_mood_and_the_lifted_memories(acme, refund_matter, settings) -> None:
    """「让关怀类记忆浮出水面」 is explained: the trace names the mood, its cues and the care memories lifted;
    with ``mood_care_lift`` 0 the lift is off."""
    # given
    with tenant_scope(acme.tenant):
        session = ChatSession.objects.for_tenant(acme.tenant).get(pk=refund_matter["session"])
    trace: dict[str, Any] = {}

    # when
    recall(acme.tenant, session, ANGRY_ZH, k=7, record=False, trace=trace)

    # then
    assert trace["mood"]["negative"] is True
    assert "气死" in trace["mood"]["cues"]
    assert set(trace["mood"]["lifted"]) == {refund_matter[ZH_MEMORIES[0][2]], refund_matter[ZH_MEMORIES[1][2]]}

    # when the knob is 0
    settings.MEMDESK_RECALL = {"mood_care_lift": 0.0}
    off = recall(acme.tenant, session, ANGRY_ZH, k=7, record=False)
    calm = recall(acme.tenant, session, CALM_ZH, k=7, record=False)

    # then the angry query ranks them as the calm one does: not both on top
    care = {refund_matter[ZH_MEMORIES[0][2]], refund_matter[ZH_MEMORIES[1][2]]}
    assert not care <= {str(h.memory.pk) for h in off.hits[:2]}
    assert not care <= {str(h.memory.pk) for h in calm.hits[:2]}
