"""Relevance feedback (S5, S13): clamps and confirmations."""

from __future__ import annotations

import pytest

from memory import services
from memory.models import MemoryEvent
from tenants.rls import tenant_scope


@pytest.fixture
def phone(acme, acme_session):
    return services.do_write_memory(
        acme.tenant, acme_session, type="user_profile", key="phone", content="用户手机号 13912345678"
    ).memory


def test_used_raises_by_a_tenth_up_to_two(acme, phone):
    scores = [services.do_feedback(acme.tenant, phone, "used").relevance_score for _ in range(12)]
    assert scores[0] == pytest.approx(1.1)
    assert scores[9] == pytest.approx(2.0)
    assert scores[-1] == pytest.approx(2.0)


def test_misled_and_ignored_lower_by_three_tenths_down_to_a_tenth(acme, phone):
    assert services.do_feedback(acme.tenant, phone, "misled").relevance_score == pytest.approx(0.7)
    assert services.do_feedback(acme.tenant, phone, "ignored").relevance_score == pytest.approx(0.4)
    assert services.do_feedback(acme.tenant, phone, "ignored").relevance_score == pytest.approx(0.1)
    assert services.do_feedback(acme.tenant, phone, "misled").relevance_score == pytest.approx(0.1)


def test_confirmed_never_lowers(acme, phone):
    # the seed's §5.1 bug: confirmations counted as disputes until the phone number was forgotten
    for _ in range(20):
        score = services.do_feedback(acme.tenant, phone, "confirmed").relevance_score
    assert score == pytest.approx(1.0)
    low = services.do_feedback(acme.tenant, phone, "misled")
    assert services.do_feedback(acme.tenant, low, "confirmed").relevance_score == pytest.approx(0.7)


def test_each_feedback_writes_an_event(acme, phone):
    services.do_feedback(acme.tenant, phone, "used")
    services.do_feedback(acme.tenant, phone, "confirmed")
    with tenant_scope(acme.tenant):
        events = list(MemoryEvent.objects.for_tenant(acme.tenant).filter(memory_id=phone.pk).order_by("id"))
    assert [e.kind for e in events] == ["create", "use", "confirm"]
    assert events[1].before == {"relevance_score": 1.0}
    assert events[1].after == {"relevance_score": 1.1}
