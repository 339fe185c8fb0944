"""The database settings a chat turn's speed rests on are in effect: a connection pool per process, and the hot
statements prepared once per connection (config/settings.py, docs/operations.md)."""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def _prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_a_statement_run_twice_on_a_connection_is_prepared():
    sql = "SELECT count(*) FROM tenants_tenant WHERE slug = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, ["first"])
        cursor.execute(sql, ["second"])
    assert any("FROM tenants_tenant WHERE slug = $1" in statement for statement in _prepared())


def test_each_process_has_a_bounded_connection_pool():
    assert connection.pool is not None
    assert connection.pool.max_size == 10
