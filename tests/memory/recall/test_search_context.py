"""A memory is found through the conversation it came from (lexical leg, lower weight than its own words)."""

from __future__ import annotations

from conversations.models import Message
from memory.embeddings import models as embeddings
from memory.extraction.run import extract_and_store
from memory.models import MemoryUnit
from memory.recall.pipeline import recall
from tenants.rls import tenant_scope
from tests.factories import write_memory


def test_answer_is_found_by_a_word_only_its_question_had(acme, acme_session):
    # given an answer that never names the model, written with the question it answered as context,
    # among other memories of the same user
    answer = write_memory(
        acme, acme_session, "Customer: the blue one, bought in March",
        context="Agent: Which colour is your KX-900 kettle?\nCustomer: the blue one, bought in March",
    )  # fmt: skip
    # and a distractor the vector leg ranks first (its vector is the query's own embedding)
    write_memory(
        acme, acme_session, "Customer: the model number on the box is unreadable",
        embedding=embeddings.embed_one("KX-900", kind="query"),
    )  # fmt: skip
    for content in [
        "Customer prefers delivery after 6pm",
        "Customer lives on the third floor, no lift",
        "Customer paid by card ending 4242",
        "Customer asked about the warranty terms",
        "Customer's previous order arrived damaged",
    ]:
        write_memory(acme, acme_session, content)
    # when the user asks with the question's word only
    result = recall(acme.tenant, acme_session, "KX-900", k=3)
    # then the answer comes first, but a context-only match does not count as confidence
    assert result.hits[0].memory.pk == answer.pk
    assert result.hits[0].similarity < 0.7


def test_own_words_outrank_context_words(acme, acme_session):
    # given one memory that holds the word itself and one that only has it in its context
    own = write_memory(acme, acme_session, "The refund for the blender was approved")
    write_memory(acme, acme_session, "Order closed on Monday", context="Agent: anything else about the refund?")
    # then the memory that says it ranks first
    result = recall(acme.tenant, acme_session, "refund", k=2)
    assert [h.memory.pk for h in result.hits][0] == own.pk
    assert len(result.hits) == 2


def test_secrets_in_the_context_are_never_indexed(acme, acme_session):
    memory = write_memory(
        acme, acme_session, "The customer reset the router",
        context="my wifi password: hunter2secret and api key sk-live-abcdefghijklmnop1234",
    )  # fmt: skip
    with tenant_scope(acme.tenant):
        stored = MemoryUnit.objects.for_tenant(acme.tenant).get(pk=memory.pk)
    assert "wifi" in stored.search_context.split()  # the context is indexed…
    assert "hunter2secret" not in stored.search_context  # …without its secrets
    assert "abcdefghijklmnop1234" not in stored.search_context
    assert recall(acme.tenant, acme_session, "hunter2secret", k=3).hits == []


def test_extraction_indexes_the_question_the_user_answered(acme, acme_session):
    # given the agent asked for the new number and the user answered with the number alone
    with tenant_scope(acme.tenant):
        messages = Message.objects.for_tenant(acme.tenant)
        messages.create(
            tenant=acme.tenant, session=acme_session, role="assistant", text="请问您的新手机号是多少？", seq=1
        )
        answer = messages.create(tenant=acme.tenant, session=acme_session, role="user", text="13912345678", seq=2)
    extract_and_store(acme.tenant, acme_session, answer)
    # then the phone memory carries the question's words as context
    with tenant_scope(acme.tenant):
        phone = MemoryUnit.objects.for_tenant(acme.tenant).get(key="phone")
    assert "手机号" in phone.search_context.split()
    assert "13912345678" in phone.content
