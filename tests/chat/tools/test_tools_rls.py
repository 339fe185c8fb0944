"""Tools and batches are behind row-level security like every tenant table."""

from __future__ import annotations

import pytest
from django.db import connection

from tenants.rls import tenant_scope
from tests.chat.tools.conftest import register
from tests.factories import open_session

pytestmark = pytest.mark.django_db


def _count(table):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608 - fixed table names
        return cursor.fetchone()[0]


@pytest.mark.parametrize("table", ["chat_tool", "chat_batch"])
def test_raw_sql_sees_only_the_scoped_tenant(acme, globex, table):
    # given a tool and a queued batch in each tenant
    for ctx in (acme, globex):
        register(ctx, "https://example.com/t", schema={"type": "object"})
        sid = open_session(ctx)["session_id"]
        response = ctx.client.post(
            f"/api/v1/sessions/{sid}/batches", {"tool": "query_order", "items": [{}]}, format="json"
        )
        assert response.status_code == 202, response.content
    # then
    assert _count(table) == 0
    with tenant_scope(acme.tenant):
        assert _count(table) == 1
