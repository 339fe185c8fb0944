"""The database settings a chat turn's speed rests on are in effect: a connection pool per process (a checkout
checked without a round trip), and the hot statements prepared once per connection (config/settings.py,
config/db/base.py, docs/operations.md)."""

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


def _spy_full_check(monkeypatch) -> list[int]:
    """Count the full checks (an empty query each) the pool makes."""
    from psycopg_pool import ConnectionPool

    calls: list[int] = []
    full = ConnectionPool.check_connection

    def counted(conn):
        calls.append(conn.info.backend_pid)
        return full(conn)

    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(counted))
    return calls


@pytest.mark.django_db(transaction=True)
def test_a_healthy_pooled_connection_is_handed_out_without_a_round_trip(monkeypatch):
    # given the process's pool, with connections returned to it
    pool = connection.pool
    with pool.connection() as conn:
        conn.execute("SELECT 1")
    calls = _spy_full_check(monkeypatch)

    # when one is taken again
    with pool.connection() as conn:
        answer = conn.execute("SELECT 42").fetchone()[0]

    # then it works, and the pool asked the server nothing to check it
    assert answer == 42
    assert calls == []


@pytest.mark.django_db(transaction=True)
def test_a_pooled_connection_the_server_ended_is_replaced(monkeypatch):
    # given a pool of one connection, checked as memdesk's pools are, whose backend PostgreSQL has since
    # terminated (a restart, an administrator)
    import select
    import time

    from psycopg_pool import ConnectionPool

    from config.db.base import check_pooled_connection

    params = {**connection.get_connection_params(), "autocommit": True}
    with ConnectionPool(kwargs=params, min_size=1, max_size=1, check=check_pooled_connection, open=True) as pool:
        with pool.connection() as conn:
            dead_pid = conn.info.backend_pid
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [dead_pid])
        deadline = time.monotonic() + 5
        while not select.select([conn.fileno()], [], [], 0.05)[0] and time.monotonic() < deadline:
            pass  # until the server's goodbye reaches the idle socket
        calls = _spy_full_check(monkeypatch)

        # when a connection is taken from the pool
        with pool.connection() as conn:
            alive = conn.execute("SELECT pg_backend_pid()").fetchone()[0]

    # then the caller got a new, working connection: the full check caught the dead one
    assert alive != dead_pid
    assert calls == [dead_pid]


@pytest.mark.django_db(transaction=True)
def test_the_pool_hands_out_the_warmest_connection_and_shrinks_the_coldest():
    # given: the process's pool is memdesk's, and a pool of three connections all returned after a burst
    from config.db.base import LifoConnectionPool, check_pooled_connection

    assert type(connection.pool) is LifoConnectionPool
    params = {**connection.get_connection_params(), "autocommit": True}
    with LifoConnectionPool(kwargs=params, min_size=3, max_size=3, check=check_pooled_connection, open=True) as pool:
        pool.wait(timeout=10)
        burst = [pool.getconn() for _ in range(3)]
        pids = [conn.info.backend_pid for conn in burst]
        for conn in burst:  # returned in this order: the last one is the most recently used
            pool.putconn(conn)
        # when: work comes one unit at a time, as at a worker's usual concurrency
        seen = []
        for _ in range(4):
            with pool.connection() as conn:
                seen.append(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        # then: it all ran on the most recently returned (warm) backend; the least recent is the one a
        # shrinking pool closes first
        assert seen == [pids[-1]] * 4
        assert pool._pool[0].info.backend_pid == pids[0]
