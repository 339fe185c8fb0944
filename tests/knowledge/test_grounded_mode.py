"""Grounded mode: a question about the business that no passage answers gets "I do not know" and the offer of a
person instead of the model's guess, counted; greetings and questions about the customer's own facts still go to
the model; every such question is a content gap, grounded or not, with row-level security on the gaps."""

from __future__ import annotations

import pytest
from django.db import connection

from conversations.models import ChatSession
from knowledge.models import ContentGap
from tenants.rls import tenant_scope
from tests.factories import open_session
from tests.knowledge.chat_kit import citing, counter
from tests.knowledge.conftest import write_article
from tests.knowledge.test_search import ZH_POLICY

pytestmark = pytest.mark.django_db(transaction=True)


def _send(ctx, sid, text):
    return ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": text}, format="json")


def _grounded(ctx, **conf):
    ctx.tenant.settings = {**ctx.tenant.settings, "knowledge": {"grounded": True, **conf}}
    ctx.tenant.save(update_fields=["settings"])


@pytest.fixture
def acme_kb(acme):
    write_article(acme, ZH_POLICY, title="售后政策")
    return acme


def test_a_question_the_articles_do_not_answer_gets_i_do_not_know_and_a_person(acme_kb, fake_ollama):
    # given grounded mode and articles about after-sales only
    _grounded(acme_kb)
    before = counter("memdesk_knowledge_grounded_replies", "acme")
    sid = open_session(acme_kb, "u1")["session_id"]
    # when the customer asks what no article says
    response = _send(acme_kb, sid, "你们周日几点关门？")
    # then the model is not asked to guess: the agent says it does not know and offers a person
    assert response.status_code == 200, response.content
    body = response.json()
    assert fake_ollama.chat_requests == []
    assert "没有找到" in body["reply"]
    assert "转人工" in body["reply"]
    assert body["offer_handoff"] is True
    assert body["citations"] == []
    assert counter("memdesk_knowledge_grounded_replies", "acme") - before == 1
    # and taking the offer hands the conversation to a person
    taken = _send(acme_kb, sid, "转人工")
    assert taken.status_code in (200, 202), taken.content
    with tenant_scope(acme_kb.tenant):
        state = ChatSession.objects.for_tenant(acme_kb.tenant).get(pk=sid).state
    assert state == ChatSession.State.WAITING_FOR_HUMAN


def test_a_question_the_articles_answer_goes_to_the_model_with_them(acme_kb, fake_ollama):
    _grounded(acme_kb)
    fake_ollama.script(citing("退款审核通过后"))
    sid = open_session(acme_kb, "u1")["session_id"]
    body = _send(acme_kb, sid, "退款多久能到账？").json()
    assert len(fake_ollama.chat_requests) == 1
    assert "offer_handoff" not in body
    assert body["citations"]


def test_greetings_and_the_customers_own_facts_are_not_questions_about_the_business(acme_kb, fake_ollama):
    # given grounded mode
    _grounded(acme_kb)
    sid = open_session(acme_kb, "u1")["session_id"]
    fake_ollama.script("您好！", "好的，张伟。", "您的订单号是 ABC123。")
    # when the customer greets, states a fact, and asks about their own order
    replies = [_send(acme_kb, sid, text).json() for text in ("你好", "我叫张伟，订单号是 ABC123", "我的订单号是多少？")]
    # then every message went to the model
    assert [r["reply"] for r in replies] == ["您好！", "好的，张伟。", "您的订单号是 ABC123。"]
    assert len(fake_ollama.chat_requests) == 3
    with tenant_scope(acme_kb.tenant):
        assert ContentGap.objects.for_tenant(acme_kb.tenant).count() == 0


def test_without_grounded_mode_the_model_answers_and_the_gap_is_recorded(acme_kb, fake_ollama):
    # given grounded mode off (the default)
    before = counter("memdesk_knowledge_content_gaps", "acme")
    fake_ollama.script("我们周日10点关门。")
    sid = open_session(acme_kb, "u1")["session_id"]
    # when
    body = _send(acme_kb, sid, "你们周日几点关门？").json()
    # then the model answered, and staff can see the question found nothing
    assert body["reply"] == "我们周日10点关门。"
    with tenant_scope(acme_kb.tenant):
        gaps = list(ContentGap.objects.for_tenant(acme_kb.tenant).values_list("text", "group_key"))
    assert gaps == [("你们周日几点关门？", "关门 几点 周日")]
    assert counter("memdesk_knowledge_content_gaps", "acme") - before == 1


def test_a_tenant_threshold_of_zero_never_refuses(acme_kb, fake_ollama):
    _grounded(acme_kb, threshold=0)
    fake_ollama.script("我们周日10点关门。")
    sid = open_session(acme_kb, "u1")["session_id"]
    assert _send(acme_kb, sid, "你们周日几点关门？").json()["reply"] == "我们周日10点关门。"


def test_gaps_and_citations_are_held_by_row_level_security(acme_kb, globex, fake_ollama):
    # given a gap and a citation of acme's
    fake_ollama.script("不知道", citing("退款审核通过后"))
    sid = open_session(acme_kb, "u1")["session_id"]
    _send(acme_kb, sid, "你们周日几点关门？")
    _send(acme_kb, sid, "退款多久能到账？")
    for table in ("knowledge_contentgap", "knowledge_citation"):
        with connection.cursor() as cursor:  # no scope: nothing
            cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608 - fixed table names
            assert cursor.fetchone()[0] == 0
        with tenant_scope(globex.tenant), connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608
            assert cursor.fetchone()[0] == 0
        with tenant_scope(acme_kb.tenant), connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608
            assert cursor.fetchone()[0] == 1
