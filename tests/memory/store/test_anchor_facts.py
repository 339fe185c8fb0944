"""The anchor's facts are read in one place (``memory.store.anchor_facts``): the prompt and the handoff note show
the same memory for a key — the best live one — and a turn's recalled memories are counted in that read."""

from __future__ import annotations

import pytest
from django.utils import timezone

from chat.handoff.note import handoff_note
from chat.prompt.build import ANCHOR_KEYS
from memory.models import MemoryUnit
from memory.store import anchor_facts
from tenants.rls import tenant_scope
from tests.factories import open_session_obj, turn_steps, write_memory

pytestmark = pytest.mark.django_db(transaction=True)


def _two_phones(acme, session):
    """Two live memories keyed ``phone`` in the session's view (two types, two slots); the second scores higher."""
    with tenant_scope(acme.tenant):
        low = write_memory(acme, session, "用户手机号 13800000001", type="user_profile", key="phone")
        high = write_memory(acme, session, "用户手机号 13900000002", type="fact_reference", key="phone")
        MemoryUnit.objects.for_tenant(acme.tenant).filter(pk=low.pk).update(relevance_score=0.5)
        MemoryUnit.objects.for_tenant(acme.tenant).filter(pk=high.pk).update(relevance_score=1.5)
    return low, high


def test_the_best_live_memory_of_a_key_anchors_the_prompt_and_the_handoff_note(acme):
    # given two live phone memories, the second scoring higher
    session = open_session_obj(acme)
    _two_phones(acme, session)
    # when memory reads the anchor
    with tenant_scope(acme.tenant):
        facts = anchor_facts(acme.tenant, session, ANCHOR_KEYS, as_of=timezone.now())
    # then the phone is the better one, once
    assert [key for key, _ in facts] == ["phone"]
    assert "13900000002" in facts[0][1]
    # and the prompt of a turn and the handoff note both show that one, masked
    prepared = turn_steps(acme, session, "你好", "您好")
    assert any("139****0002" in fact for fact in prepared.parts.anchor_facts)
    assert not any("138****0001" in fact for fact in prepared.parts.anchor_facts)
    with tenant_scope(acme.tenant):
        note = handoff_note(acme.tenant, session)
    phones = [entry["content"] for entry in note["anchor"] if entry["key"] == "phone"]
    assert len(phones) == 1
    assert "139****0002" in phones[0]


def test_the_anchor_read_counts_the_turns_recalled_memories_and_nothing_else(acme):
    session = open_session_obj(acme)
    low, high = _two_phones(acme, session)
    # when the anchor is read counting one memory as recalled
    with tenant_scope(acme.tenant):
        anchor_facts(acme.tenant, session, ANCHOR_KEYS, as_of=timezone.now(), count_recalled=[low.pk])
        counts = dict(MemoryUnit.objects.for_tenant(acme.tenant).values_list("pk", "recall_count"))
    # then that one's recall count went up by one, the other's did not
    assert counts[low.pk] == low.recall_count + 1
    assert counts[high.pk] == high.recall_count
