"""Relevance feedback (S5, S13): clamps and confirmations."""

from __future__ import annotations

import pytest

from config.errors import ApiError
from memory.models import MemoryEvent, MemoryUnit
from memory.store import feedback as memory_feedback
from tenants.rls import tenant_scope
from tests.factories import open_session_obj, write_memory
from tests.memory.conftest import race


@pytest.fixture
def phone(acme, acme_session):
    return write_memory(acme, acme_session, "用户手机号 13912345678", type="user_profile", key="phone")


def test_used_raises_by_a_tenth_up_to_two(acme, phone):
    scores = [memory_feedback.do_feedback(acme.tenant, phone, "used").relevance_score for _ in range(12)]
    assert scores[0] == pytest.approx(1.1)
    assert scores[9] == pytest.approx(2.0)
    assert scores[-1] == pytest.approx(2.0)


def test_misled_and_ignored_lower_by_three_tenths_down_to_a_tenth(acme, phone):
    assert memory_feedback.do_feedback(acme.tenant, phone, "misled").relevance_score == pytest.approx(0.7)
    assert memory_feedback.do_feedback(acme.tenant, phone, "ignored").relevance_score == pytest.approx(0.4)
    assert memory_feedback.do_feedback(acme.tenant, phone, "ignored").relevance_score == pytest.approx(0.1)
    assert memory_feedback.do_feedback(acme.tenant, phone, "misled").relevance_score == pytest.approx(0.1)


def test_confirmed_never_lowers(acme, phone):
    # the seed's §5.1 bug: confirmations counted as disputes until the phone number was forgotten
    for _ in range(20):
        score = memory_feedback.do_feedback(acme.tenant, phone, "confirmed").relevance_score
    assert score == pytest.approx(1.0)
    low = memory_feedback.do_feedback(acme.tenant, phone, "misled")
    assert memory_feedback.do_feedback(acme.tenant, low, "confirmed").relevance_score == pytest.approx(0.7)


def test_each_feedback_writes_an_event(acme, phone):
    memory_feedback.do_feedback(acme.tenant, phone, "used")
    memory_feedback.do_feedback(acme.tenant, phone, "confirmed")
    with tenant_scope(acme.tenant):
        events = list(MemoryEvent.objects.for_tenant(acme.tenant).filter(memory_id=phone.pk).order_by("id"))
    assert [e.kind for e in events] == ["create", "use", "confirm"]
    assert events[1].before == {"relevance_score": 1.0}
    assert events[1].after == {"relevance_score": 1.1}


def test_one_batch_scores_counts_and_audits_every_memory(acme, acme_session, phone):
    # given two memories of alice, one already lowered
    name = write_memory(acme, acme_session, "用户姓名 张伟", type="user_profile", key="name")
    memory_feedback.do_feedback(acme.tenant, name, "misled")

    # when one batch marks both used
    scores = memory_feedback.apply_feedback(acme.tenant, [phone.pk, name.pk], "used", note="value appears in reply r1")

    # then each got +0.1 from its own score, its counter and one event with before/after
    assert scores == {phone.pk: pytest.approx(1.1), name.pk: pytest.approx(0.8)}
    with tenant_scope(acme.tenant):
        events = {
            e.memory_id: e
            for e in MemoryEvent.objects.for_tenant(acme.tenant).filter(kind="use", note="value appears in reply r1")
        }
        counts = dict(
            MemoryUnit.objects.for_tenant(acme.tenant).filter(pk__in=[phone.pk, name.pk]).values_list("pk", "use_count")
        )
    assert counts == {phone.pk: 1, name.pk: 1}
    assert events[name.pk].before == {"relevance_score": 0.7}
    assert events[name.pk].after == {"relevance_score": 0.8}
    assert events[name.pk].end_user_id == name.end_user_id


def test_a_batch_skips_another_tenants_memory_and_leaves_it_untouched(acme, globex, acme_session, phone):
    theirs = write_memory(
        globex, open_session_obj(globex, "alice"), "用户手机号 13800000000", type="user_profile", key="phone"
    )

    scores = memory_feedback.apply_feedback(acme.tenant, [phone.pk, theirs.pk], "misled")

    assert list(scores) == [phone.pk]
    with tenant_scope(globex.tenant):
        untouched = MemoryUnit.objects.for_tenant(globex.tenant).get(pk=theirs.pk)
        their_events = list(
            MemoryEvent.objects.for_tenant(globex.tenant).filter(memory_id=theirs.pk).values_list("kind", flat=True)
        )
    assert untouched.relevance_score == pytest.approx(1.0)
    assert untouched.mislead_count == 0
    assert their_events == ["create"]


def test_an_unknown_event_is_refused_before_anything_changes(acme, phone):
    with pytest.raises(ApiError) as raised:
        memory_feedback.apply_feedback(acme.tenant, [phone.pk], "loved")
    assert raised.value.code == "unknown_event"
    with tenant_scope(acme.tenant):
        assert MemoryUnit.objects.for_tenant(acme.tenant).get(pk=phone.pk).relevance_score == 1.0
        assert MemoryEvent.objects.for_tenant(acme.tenant).filter(memory_id=phone.pk).count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_on_one_memory_all_count(acme):
    # given one memory and eight turns marking it used at the same moment
    memory = write_memory(
        acme, open_session_obj(acme, "alice"), "用户手机号 13912345678", type="user_profile", key="phone"
    )
    errors = race(*[lambda: memory_feedback.apply_feedback(acme.tenant, [memory.pk], "used")] * 8)

    # then no increment is lost, and the events chain 1.0 → 1.8 without a repeated "before"
    assert errors == []
    with tenant_scope(acme.tenant):
        fresh = MemoryUnit.objects.for_tenant(acme.tenant).get(pk=memory.pk)
        befores = sorted(
            e.before["relevance_score"]
            for e in MemoryEvent.objects.for_tenant(acme.tenant).filter(memory_id=memory.pk, kind="use")
        )
    assert fresh.relevance_score == pytest.approx(1.8)
    assert fresh.use_count == 8
    assert befores == pytest.approx([1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7])
