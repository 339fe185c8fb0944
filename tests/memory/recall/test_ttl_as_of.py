"""Active forgetting (S4): validity is created_at <= as_of < expires_at."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from memory.recall.pipeline import recall
from memory.store import lifecycle
from memory.store import read as fetch
from tests.factories import write_memory


def test_recall_boundaries(acme, acme_session):
    t0 = timezone.now().replace(microsecond=0) - timedelta(minutes=5)
    memory = write_memory(
        acme, acme_session, "Customer's order number is ABC123", key="order_id", expires_in=60, now=t0
    )

    def recalled(as_of):
        return [h.memory.pk for h in recall(acme.tenant, acme_session, "what is my order number", as_of=as_of).hits]

    assert memory.pk in recalled(t0)  # valid from the moment it was created
    assert memory.pk in recalled(t0 + timedelta(seconds=59))
    assert memory.pk not in recalled(t0 + timedelta(seconds=60))  # expires_at is exclusive
    assert memory.pk not in recalled(t0 + timedelta(seconds=61))  # one second after it expired
    assert memory.pk not in recalled(t0 - timedelta(seconds=1))  # before it existed


def test_list_honours_as_of_and_include_expired(acme, acme_session):
    t0 = timezone.now() - timedelta(hours=1)
    write_memory(acme, acme_session, "Customer's order number is ABC123", key="order_id", expires_in=60, now=t0)
    assert fetch.list_memories(acme.tenant, acme_session) == []
    assert len(fetch.list_memories(acme.tenant, acme_session, include_expired=True)) == 1
    assert len(fetch.list_memories(acme.tenant, acme_session, as_of=t0 + timedelta(seconds=30))) == 1


def test_expired_memory_is_not_recalled_by_the_rule_stage(acme, acme_session):
    memory = write_memory(acme, acme_session, "订单号 ABC123", key="order_id", expires_in=60, now=timezone.now())
    assert memory.pk in [h.memory.pk for h in recall(acme.tenant, acme_session, "查我的订单").hits]
    lifecycle.do_expire_memory(acme.tenant, memory)
    assert recall(acme.tenant, acme_session, "查我的订单").hits == []


def test_as_of_is_normalised_to_utc(memapi):
    memapi.post("/api/v1/memories", {"type": "user_profile", "content": "张伟"}, format="json")
    later = (timezone.now() + timedelta(minutes=1)).astimezone(timezone.get_fixed_timezone(480))
    response = memapi.get("/api/v1/memories", {"as_of": later.isoformat()})
    assert response.status_code == 200
    assert len(response.json()["memories"]) == 1
