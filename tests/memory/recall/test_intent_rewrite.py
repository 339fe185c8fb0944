"""A vague query the intent table misses is rewritten by its embedding's nearest labelled intent example (S7)."""

from __future__ import annotations

import pytest

from memory.embeddings import models as embeddings
from memory.recall.rewrite import EMBEDDING_RULES, rewrite_and_embed, rewrite_by_embedding
from tests.factories import open_session_obj

RECOMMENDATION_ZH = next(rule.zh for rule in EMBEDDING_RULES if rule.intent == "recommendation")


def test_what_you_recommended_last_time_is_the_recommendation_intent() -> None:
    """Seed S7: 「先用一个小模型（如 all-MiniLM-L6-v2）对 query 做一次“意图增强”」 — 「上次推荐给我的东西」, which no
    rule of the table matches, becomes the recommendation it refers to."""
    # when
    rewrite, vectors = rewrite_and_embed("上次推荐给我的东西", [embeddings.USE_MODEL])

    # then
    assert rewrite.intent == "recommendation"
    assert rewrite.text == f"上次推荐给我的东西（{RECOMMENDATION_ZH}）"
    assert rewrite.keys == ()  # the rule stage runs before the embedding exists
    assert rewrite.reason.startswith(f"embedding ({embeddings.USE_MODEL}): nearest example")
    assert set(vectors) == {embeddings.USE_MODEL}


@pytest.mark.parametrize("query", ["你们支持七天无理由退货吗", "这款耳机支持降噪吗", "What is your return policy?"])
def test_a_plain_factual_question_is_not_rewritten(query: str) -> None:
    """Seed S7: 「先用一个小模型（如 all-MiniLM-L6-v2）对 query 做一次“意图增强”」 — only a vague query is enhanced; a
    question that says what it asks stays as it is."""
    # when
    rewrite = rewrite_by_embedding(query, model=embeddings.USE_MODEL)

    # then
    assert rewrite.intent is None
    assert rewrite.text == query


@pytest.mark.parametrize("model", [embeddings.USE_MODEL, embeddings.DEFAULT_MODEL])
def test_the_english_equivalent_is_the_recommendation_intent(model: str) -> None:
    """Seed S7: 「先用一个小模型（如 all-MiniLM-L6-v2）对 query 做一次“意图增强”」 — in English too, with the
    multilingual model and with all-MiniLM-L6-v2 itself."""
    # when
    rewrite = rewrite_by_embedding("the thing you recommended last time", model=model)

    # then
    assert rewrite.intent == "recommendation"
    assert rewrite.text == (
        "the thing you recommended last time (the product or plan the agent recommended to the user)"
    )


def test_minilm_leaves_chinese_alone() -> None:
    """Seed S7: 「先用一个小模型（如 all-MiniLM-L6-v2）对 query 做一次“意图增强”」 — but MiniLM reads Chinese as
    ``[UNK]``: it never classifies a Chinese query."""
    assert rewrite_by_embedding("上次推荐给我的东西", model=embeddings.DEFAULT_MODEL).intent is None


def test_the_table_stays_the_fast_path() -> None:
    """Seed S7: 「先用一个小模型（如 all-MiniLM-L6-v2）对 query 做一次“意图增强”」 — a query the table rewrites keeps
    the table's rewrite and its keys."""
    # when
    rewrite, _ = rewrite_and_embed("那个产品还有货吗", [embeddings.USE_MODEL])

    # then
    assert rewrite.intent == "product_reference"
    assert rewrite.keys == ("product",)
    assert rewrite.text == "用户近期咨询过的产品名称或型号还有货吗"


@pytest.fixture
def memapi(acme):
    """acme's (a Chinese tenant: multilingual USE) API client speaking for alice's session."""
    session = open_session_obj(acme, "alice")
    acme.client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}", HTTP_X_SESSION_ID=str(session.pk))
    return acme.client


@pytest.fixture
def recommended(memapi):
    for key, content in [
        ("phone", "用户手机号 13912345678"),
        ("order_id", "用户订单号 ABC123，已付款 199 元"),
        ("address", "收货地址 北京市朝阳区建国路 88 号"),
        (None, "客服建议用户选购索尼 WH-1000XM5 降噪耳机，通勤使用"),
        (None, "用户说周末不在家，工作日白天可以收快递"),
    ]:
        body = {"type": "fact_reference", "content": content, **({"key": key} if key else {})}
        assert memapi.post("/api/v1/memories", body, format="json").status_code == 201


def test_recall_api_finds_the_recommended_item_for_the_vague_query(memapi, recommended):
    """Seed S7: 「先用一个小模型（如 all-MiniLM-L6-v2）对 query 做一次“意图增强”」 — through the API, the vague
    「上次推荐给我的东西」 finds what the agent recommended."""
    # when
    response = memapi.post("/api/v1/memories/recall", {"query": "上次推荐给我的东西", "k": 5}, format="json")

    # then
    assert response.status_code == 200, response.content
    body = response.json()
    assert "WH-1000XM5" in body["results"][0]["memory"]["content"]
    assert body["rewritten_query"] == f"上次推荐给我的东西（{RECOMMENDATION_ZH}）"


def test_the_knob_turns_the_embedding_rewrite_off(memapi, recommended, settings):
    """Seed S7: 「先用一个小模型（如 all-MiniLM-L6-v2）对 query 做一次“意图增强”」 — ``MEMDESK_RECALL
    ["intent_embedding"] = False`` leaves the table alone in charge, and the vague query misses the item."""
    # given
    settings.MEMDESK_RECALL = {"intent_embedding": False}

    # when
    response = memapi.post("/api/v1/memories/recall", {"query": "上次推荐给我的东西", "k": 5}, format="json")

    # then
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["rewritten_query"] is None
    assert not any("WH-1000XM5" in hit["memory"]["content"] for hit in body["results"][:1])
