"""The audit snapshot's two forms (``memory.store.audit``: Python and SQL) produce the same snapshot."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.utils import timezone

from memory.models import MemoryUnit
from memory.store import audit
from memory.store import write as store
from tenants.rls import tenant_scope


@pytest.mark.parametrize(
    ("microseconds", "score", "key", "data"),
    [
        (0, 1.0, "phone", {}),  # a whole second: isoformat() leaves the microseconds out
        (123_456, 1.2000000000000002, None, {"amount": 199, "note": "已付款 ¥199", "nested": {"a": [1, "二"]}}),
        (1, 0.1, "order_id", {"order_id": "ABC123"}),
        (999_999, 0.7000000000000001, "name", {"flag": True, "none": None}),
        (500_000, 2.0, None, {}),
    ],
)
def test_python_and_sql_snapshots_agree(acme, acme_session, microseconds, score, key, data):
    # given a stored memory with this expiry, score, key and data
    now = timezone.now().replace(microsecond=microseconds)
    written = store.do_write_memory(
        acme.tenant, acme_session, type="fact_reference", key=key, content="用户订单号 ABC123", data=data, now=now
    ).memory
    with tenant_scope(acme.tenant):
        MemoryUnit.objects.for_tenant(acme.tenant).filter(pk=written.pk).update(relevance_score=score)
        memory = MemoryUnit.objects.for_tenant(acme.tenant).get(pk=written.pk)

        # when both forms snapshot it
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {audit.snapshot_sql('m')} FROM memory_memoryunit m"  # noqa: S608 - our own SQL
                " WHERE m.tenant_id = %(tenant)s AND m.id = %(id)s",
                {"tenant": acme.tenant.pk, "id": memory.pk},
            )
            (by_sql,) = cursor.fetchone()
    by_sql = json.loads(by_sql) if isinstance(by_sql, str) else by_sql

    # then they are the same snapshot
    assert by_sql == audit.snapshot(memory)
