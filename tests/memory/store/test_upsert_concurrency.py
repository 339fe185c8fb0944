"""A concurrent double write of one key leaves one live memory and history."""

from __future__ import annotations

import pytest

from memory.models import MemoryEvent, MemoryUnit
from memory.store import read as fetch
from memory.store import write as store
from tenants.rls import tenant_scope
from tests.factories import open_session_obj
from tests.memory.conftest import race


@pytest.mark.django_db(transaction=True)
def test_concurrent_writes_of_one_key_leave_one_live_memory(acme):
    # given
    session = open_session_obj(acme, "alice")

    def write(n: int) -> None:
        store.do_write_memory(
            acme.tenant, session, type="user_profile", key="phone", content=f"用户手机号 1391234567{n}"
        )

    # when four writers race
    errors = race(*[lambda n=n: write(n) for n in range(4)])

    # then
    assert errors == []
    with tenant_scope(acme.tenant):
        rows = list(MemoryUnit.objects.for_tenant(acme.tenant).filter(key="phone"))
    live = [m for m in rows if m.superseded_at is None]
    assert len(rows) == 4
    assert len(live) == 1
    replaced = [m for m in rows if m.superseded_at is not None]
    assert all(m.superseded_by_id is not None for m in replaced)


def test_repeating_a_fact_refreshes_instead_of_duplicating(acme_session, acme):
    first = store.do_write_memory(acme.tenant, acme_session, type="user_profile", key="name", content="用户姓名 张伟")
    again = store.do_write_memory(acme.tenant, acme_session, type="user_profile", key="name", content="用户姓名 张伟")
    assert again.outcome == "refreshed"
    assert again.memory.pk == first.memory.pk
    assert again.memory.relevance_score == 1.0
    with tenant_scope(acme.tenant):
        assert MemoryUnit.objects.for_tenant(acme.tenant).filter(key="name").count() == 1


def test_replacement_keeps_the_old_fact_in_history_and_as_of(acme_session, acme):
    from datetime import timedelta

    from django.utils import timezone

    from memory.models import MemoryEvent

    t0 = timezone.now() - timedelta(hours=2)
    old = store.do_write_memory(
        acme.tenant, acme_session, type="user_profile", key="phone", content="手机 13800000000", now=t0
    )
    new = store.do_write_memory(acme.tenant, acme_session, type="user_profile", key="phone", content="手机 13900000000")
    assert new.outcome == "replaced"
    assert new.replaced.pk == old.memory.pk
    as_of_before = fetch.list_memories(acme.tenant, acme_session, as_of=t0 + timedelta(minutes=1))
    assert [m.content for m in as_of_before] == ["手机 13800000000"]
    assert [m.content for m in fetch.list_memories(acme.tenant, acme_session)] == ["手机 13900000000"]
    with tenant_scope(acme.tenant):
        kinds = list(
            MemoryEvent.objects.for_tenant(acme.tenant).filter(memory_id=old.memory.pk).values_list("kind", flat=True)
        )
    assert kinds == ["create", "replace"]


@pytest.mark.django_db(transaction=True)
def test_refreshes_racing_a_replacement_leave_one_live_memory_and_count_every_write(acme):
    # given alice's phone, said again by four turns while two others change it, all at once
    session = open_session_obj(acme, "alice")
    store.do_write_memory(acme.tenant, session, type="user_profile", key="phone", content="用户手机号 13912345678")

    def say(content: str) -> None:
        store.do_write_memory(acme.tenant, session, type="user_profile", key="phone", content=content)

    # when
    errors = race(*[lambda: say("用户手机号 13912345678")] * 4, *[lambda: say("用户手机号 13800000000")] * 2)

    # then one live memory, history chained, and each of the seven writes left exactly one create or confirm
    assert errors == []
    with tenant_scope(acme.tenant):
        rows = list(MemoryUnit.objects.for_tenant(acme.tenant).filter(key="phone"))
        kinds = list(
            MemoryEvent.objects.for_tenant(acme.tenant)
            .filter(memory_id__in=[m.pk for m in rows], kind__in=["create", "confirm"])
            .values_list("kind", flat=True)
        )
    assert len([m for m in rows if m.superseded_at is None]) == 1
    assert all(m.superseded_by_id is not None for m in rows if m.superseded_at is not None)
    assert len(kinds) == 7
