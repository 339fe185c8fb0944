"""Hybrid recall finds facts in Chinese (lexical leg) and English (both legs)."""

from __future__ import annotations

import pytest

from memory.recall.pipeline import recall
from memory.store import feedback
from memory.store import write as store


@pytest.fixture
def facts(acme, acme_session):
    for mtype, key, content in [
        ("user_profile", "name", "用户姓名 张伟"),
        ("fact_reference", "order_id", "用户订单号 ABC123，已付款 199 元"),
        ("user_profile", "address", "收货地址 北京市朝阳区建国路 88 号"),
        ("fact_reference", None, "The customer prefers delivery on weekends after 10am"),
        ("fact_reference", None, "The customer's laptop model is ThinkPad X1 Carbon Gen 11"),
        ("tool_result", None, "Refund REF-7781 approved for 59.90 USD"),
    ]:
        store.do_write_memory(acme.tenant, acme_session, type=mtype, key=key, content=content)


def _contents(result):
    return [h.memory.content for h in result.hits]


def test_chinese_question_finds_the_order_number(acme, acme_session, facts):
    # MiniLM reads Chinese as [UNK]; the segmented lexical leg must carry it
    result = recall(acme.tenant, acme_session, "我的订单号是多少", k=3)
    assert _contents(result)[0] == "用户订单号 ABC123，已付款 199 元"


def test_my_order_finds_the_order_number_through_the_rule_stage(acme, acme_session, facts):
    result = recall(acme.tenant, acme_session, "我的订单", k=3)
    assert result.hits[0].memory.key == "order_id"
    assert result.hits[0].stage == "rule"
    assert result.needs_confirmation is False


def test_english_question_finds_the_english_fact(acme, acme_session, facts):
    result = recall(acme.tenant, acme_session, "When does the customer want deliveries?", k=3)
    assert _contents(result)[0] == "The customer prefers delivery on weekends after 10am"
    result = recall(acme.tenant, acme_session, "which computer does she use", k=3)
    assert "ThinkPad" in _contents(result)[0]


def test_recall_reports_stage_timings(acme, acme_session, facts):
    result = recall(acme.tenant, acme_session, "refund status", k=5)
    assert {"rule", "vector", "rerank", "total"} <= set(result.timings_ms)
    assert result.timings_ms["total"] >= result.timings_ms["vector"]
    assert "Refund REF-7781" in _contents(result)[0]


def test_unrelated_query_scores_low_but_confirmation_follows_relevance_score(acme, acme_session, facts):
    # Seed S7: 「按relevance_score降序排列。如果最高分低于 0.7 … 系统应主动询问用户确认」: the test is on
    # relevance_score (fresh memories: 1.0), not on the match score (tests/chat/turn/test_automatic_feedback.py).
    result = recall(acme.tenant, acme_session, "quantum chromodynamics lattice gauge", k=5)
    assert all(h.score < 0.7 for h in result.hits)
    assert result.needs_confirmation is False


def test_low_relevance_score_triggers_confirmation(acme, acme_session):
    memory = store.do_write_memory(
        acme.tenant, acme_session, type="fact_reference", key="order_id", content="订单号 XYZ999"
    ).memory
    feedback.do_feedback(acme.tenant, memory, "misled")
    feedback.do_feedback(acme.tenant, memory, "misled")
    result = recall(acme.tenant, acme_session, "查我的订单")
    assert result.hits[0].memory.pk == memory.pk
    assert result.needs_confirmation is True


def test_recall_api_shape(memapi, facts):
    response = memapi.post("/api/v1/memories/recall", {"query": "我的订单号是多少", "k": 2}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert len(body["results"]) <= 2
    first = body["results"][0]
    assert set(first) == {"memory", "stage", "similarity", "score", "current"}
    assert first["current"] is True
    assert first["stage"] in {"rule", "vector"}
    assert first["memory"]["content"].startswith("用户订单号")
    assert isinstance(body["needs_confirmation"], bool)
    assert {"rule", "vector", "rerank", "total"} <= set(body["timings_ms"])


def test_an_embedding_started_ahead_gives_the_same_recall(acme, acme_session, facts):
    # given the query's embedding started before recall, as a chat turn starts it
    from memory.recall import embed_query_soon

    early = embed_query_soon(acme.tenant, "When does the customer want deliveries?")

    # when recall gets it
    result = recall(acme.tenant, acme_session, "When does the customer want deliveries?", k=3, embedding=early)

    # then the vectors it searched with are that embedding's, and the answer is what recall alone finds
    assert early.vectors.done()
    assert _contents(result)[0] == "The customer prefers delivery on weekends after 10am"


def test_an_embedding_of_another_query_is_not_used(acme, acme_session, facts):
    # given an embedding started for a different question
    from memory.recall import embed_query_soon

    stale = embed_query_soon(acme.tenant, "When does the customer want deliveries?")

    # when recall is asked about the laptop with it
    result = recall(acme.tenant, acme_session, "which computer does she use", k=3, embedding=stale)

    # then recall embedded its own query: the laptop comes first, not the delivery preference
    assert "ThinkPad" in _contents(result)[0]
