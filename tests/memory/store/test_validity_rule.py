"""The validity rule's three forms (``memory.store.read``: Python, ORM, SQL) agree on every memory and moment."""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.utils import timezone

from memory.models import MemoryUnit
from memory.store import read as fetch
from tenants.rls import tenant_scope
from tests.factories import write_memory


def test_python_orm_and_sql_forms_of_validity_agree(acme, acme_session):
    # given memories that are valid, expired, superseded, not yet created, and on both boundaries
    t0 = timezone.now().replace(microsecond=0) - timedelta(hours=2)
    # valid from t0 for a day; expired a minute after t0
    write_memory(acme, acme_session, "order ABC123", key="order_id", expires_in=86_400, now=t0)
    write_memory(acme, acme_session, "coupon SAVE10", key="coupon", expires_in=60, now=t0)
    # a phone number, and the one that supersedes it half an hour later
    write_memory(acme, acme_session, "phone 13800000000", key="phone", expires_in=86_400, now=t0)
    write_memory(
        acme, acme_session, "phone 13900000000", key="phone", expires_in=86_400, now=t0 + timedelta(minutes=30)
    )
    # created after now; a one-second life
    write_memory(acme, acme_session, "future address", key="address", expires_in=600, now=t0 + timedelta(hours=3))
    write_memory(acme, acme_session, "tracking SF1", key="tracking", expires_in=1, now=t0 + timedelta(microseconds=1))
    with tenant_scope(acme.tenant):
        memories = list(MemoryUnit.objects.for_tenant(acme.tenant))
    assert any(m.superseded_at is not None for m in memories)
    moments = [
        timezone.now(),
        t0 - timedelta(seconds=1),  # before anything existed
        t0,  # the created_at boundary
        t0 + timedelta(seconds=1, microseconds=1),  # the expires_at boundary (exclusive)
        t0 + timedelta(seconds=60),
        t0 + timedelta(minutes=30),  # the replacement's moment
        t0 + timedelta(hours=1),  # a past as_of
        t0 + timedelta(hours=3, minutes=5),  # after "now": the future memory is valid
    ]

    for as_of in moments:
        # when each form picks the valid memories at as_of
        by_python = {m.pk for m in memories if fetch.is_valid_at(m, as_of)}
        with tenant_scope(acme.tenant):
            by_orm = set(
                MemoryUnit.objects.for_tenant(acme.tenant).filter(fetch.valid_q(as_of)).values_list("pk", flat=True)
            )
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT m.id FROM memory_memoryunit m WHERE m.tenant_id = %(tenant)s"  # noqa: S608 - our own SQL
                    f" AND {fetch.valid_sql('m', '%(as_of)s')}",
                    {"tenant": acme.tenant.pk, "as_of": as_of},
                )
                by_sql = {row[0] for row in cursor.fetchall()}
            by_scope = {
                m.pk
                for m in fetch.fetch_memories(
                    acme.tenant, fetch.SCOPE_SQL, fetch.scope_params(acme.tenant, acme_session, as_of)
                )
            }

        # then they are the same set (the session sees all of its end user's memories here)
        assert by_python == by_orm == by_sql == by_scope, as_of
    assert len({frozenset(m.pk for m in memories if fetch.is_valid_at(m, t)) for t in moments}) > 3
