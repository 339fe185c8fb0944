"""Topic switches freeze the old topic's working memory and a return brings it back (S10, seed §1 and §4.2).

Through chat turns: ``POST /api/v1/sessions/<id>/messages`` with the fake Ollama (tests/chat/turn/test_turn_rest.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from chat.models import ExecutionContext
from chat.tools.context import do_start_tool_call
from conversations.models import ChatSession
from memory.models import MemoryType, MemoryUnit
from memory.topics.detect import pack_vector, topic_similarity, unpack_vectors
from tenants.rls import tenant_scope
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

RESET = "<|context_reset|>"


@pytest.fixture
def sid(acme):
    return open_session(acme, "zhangwei")["session_id"]


def _send(ctx, sid, text):
    response = ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": text}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _system(fake_ollama) -> str:
    return fake_ollama.chat_requests[-1]["messages"][0]["content"]


def _reset(fake_ollama) -> bool:
    """Whether the last prompt carries the reset marker on a line of its own (the role text only names it)."""
    return any(
        line.startswith(RESET) for m in fake_ollama.chat_requests[-1]["messages"] for line in m["content"].split("\n")
    )


def _anchor(fake_ollama) -> str:
    return _system(fake_ollama).split("\n", 1)[0]


def _topic_memories(ctx, sid) -> list[MemoryUnit]:
    with tenant_scope(ctx.tenant):
        return list(
            MemoryUnit.objects.for_tenant(ctx.tenant)
            .filter(session_id=sid, type=MemoryType.SESSION_STATE, content__contains="账单")
            .order_by("created_at")
        )


def _session(ctx, sid) -> ChatSession:
    with tenant_scope(ctx.tenant):
        return ChatSession.objects.for_tenant(ctx.tenant).get(pk=sid)


def test_billing_then_complaint_resets_the_context(acme, sid, fake_ollama):
    """「当检测到用户明显切换话题（如从“查账单”跳到“投诉客服”），不在同一 session_state 下时，Runtime 会主动在 prompt
    中插入此标记」: no phrase says "new topic"; the intent moved."""
    # given a session on the bill
    _send(acme, sid, "我想查一下这个月的账单")
    assert not _reset(fake_ollama)

    # when the user asks for something else
    _send(acme, sid, "我要投诉客服")

    # then the prompt carries the reset
    assert _reset(fake_ollama)


def test_a_session_recorded_with_number_lists_still_detects_the_switch(acme, sid, fake_ollama):
    """A session whose topic record holds its vectors as lists of numbers (as records did before they were
    packed) reads them: the same topic stays, the switch is still seen."""
    # given a session on the bill whose record holds its vectors as number lists
    _send(acme, sid, "我想查一下这个月的账单")
    state = _session(acme, sid).topic_state
    assert all(isinstance(v, str) for v in state["vectors"])  # packed, a third of the JSON numbers' size
    legacy = {**state, "vectors": [[round(float(x), 4) for x in row] for row in unpack_vectors(state["vectors"])]}
    with tenant_scope(acme.tenant):
        ChatSession.objects.for_tenant(acme.tenant).filter(pk=sid).update(topic_state=legacy)

    # when the user asks about the bill again, then for something else
    _send(acme, sid, "上个月的账单也帮我查一下")
    same_topic = _reset(fake_ollama)
    _send(acme, sid, "我要投诉客服")

    # then only the second prompt carries the reset: the lists were read (an unreadable record resets at once)
    assert not same_topic
    assert _reset(fake_ollama)


def test_packed_topic_vectors_keep_the_similarity():
    """The packed form changes no decision: similarities agree with the full vectors to well under the
    thresholds' two decimals; a value that is not a vector is left out instead of failing the turn."""
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(3, 512)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    exact = float(np.max(vectors[1:] @ vectors[0]))
    assert abs(topic_similarity(vectors[0], [pack_vector(v) for v in vectors[1:]]) - exact) < 1e-3
    assert abs(topic_similarity(vectors[0], [*map(pack_vector, vectors[1:]), "not base64!"]) - exact) < 1e-3
    assert topic_similarity(vectors[0], ["not base64!"]) == -1.0


def test_a_follow_up_on_the_same_topic_does_not_reset(acme, sid, fake_ollama):
    """「这比让模型自己判断“是否还在聊同一件事”可靠一万倍」: a follow-up (「那运费呢」) or an acknowledgement is
    the same matter, and a false reset would freeze the working memory the user is still using."""
    # given a session on a parcel
    _send(acme, sid, "我的快递到哪了")

    # when the user follows up and acknowledges
    _send(acme, sid, "那运费呢")
    follow_up = _reset(fake_ollama)
    _send(acme, sid, "好的")

    # then neither prompt resets
    assert not follow_up
    assert not _reset(fake_ollama)


def test_the_old_topics_session_state_is_frozen_not_deleted(acme, sid, fake_ollama):
    """「是清空所有历史，还是只冻结订单相关记忆，同时激活推荐模块的上下文？」: the old topic's session_state memory is
    kept, but neither recalled nor in the anchor."""
    # given the bill is the current topic, in the anchor
    _send(acme, sid, "我想查一下这个月的账单")
    _send(acme, sid, "这个月怎么扣了这么多钱")
    assert "账单" in _anchor(fake_ollama)

    # when the user switches to a complaint
    body = _send(acme, sid, "我要投诉客服")

    # then the bill's memory is stored, valid and frozen, and the turn neither anchors nor recalls it
    [memory] = _topic_memories(acme, sid)
    assert memory.data["frozen_topic"]
    assert memory.data["frozen_key"] == "current_topic"
    assert memory.key is None
    assert memory.superseded_at is None
    assert "账单" not in _anchor(fake_ollama)
    assert str(memory.pk) not in body["recalled"]
    assert "账单" in _session(acme, sid).topic_state["frozen"][-1]["topic"]


def test_returning_to_the_topic_brings_its_memories_back(acme, sid, fake_ollama):
    """「回到刚才账单的问题」: the frozen topic's memories are recalled and anchored again."""
    # given a bill topic frozen by a complaint
    _send(acme, sid, "我想查一下这个月的账单")
    _send(acme, sid, "我要投诉客服")
    assert "账单" not in _anchor(fake_ollama)

    # when the user returns to the bill
    _send(acme, sid, "回到刚才账单的问题")

    # then the bill's memory is live again, in its slot and in the anchor, and the complaint is frozen
    [memory] = _topic_memories(acme, sid)
    assert "frozen_topic" not in memory.data
    assert memory.key == "current_topic"
    assert "账单" in _anchor(fake_ollama)
    assert _reset(fake_ollama)
    session = _session(acme, sid)
    assert "账单" in session.topic
    assert ["投诉" in record["topic"] for record in session.topic_state["frozen"]] == [True]


def test_an_unfinished_tool_call_is_frozen_with_its_topic_and_restored(acme, sid, fake_ollama):
    """「只冻结订单相关记忆，同时激活推荐模块的上下文」: the execution context of the old topic's unfinished tool call
    leaves the live context with the topic and comes back with it."""
    # given a bill lookup started and not finished
    _send(acme, sid, "我想查一下这个月的账单")
    session = _session(acme, sid)
    do_start_tool_call(acme.tenant, session, name="query_bill", arguments={"month": "2026-11"})

    # when the user switches topic
    _send(acme, sid, "我要投诉客服")

    # then the live context is clear, the prompt does not carry the call, and the frozen topic holds it
    with tenant_scope(acme.tenant):
        context = ExecutionContext.objects.for_tenant(acme.tenant).get(session_id=sid)
    assert (context.current_tool, context.tool_args) == (None, None)
    assert "query_bill" not in _system(fake_ollama)
    frozen = _session(acme, sid).topic_state["frozen"][-1]
    assert frozen["tool_context"]["current_tool"] == "query_bill"

    # when the user returns to the bill
    _send(acme, sid, "回到刚才账单的问题")

    # then the call is back in the context and in the prompt
    with tenant_scope(acme.tenant):
        context = ExecutionContext.objects.for_tenant(acme.tenant).get(session_id=sid)
    assert context.current_tool == "query_bill"
    assert context.tool_args == {"month": "2026-11"}
    assert "query_bill" in _system(fake_ollama)
