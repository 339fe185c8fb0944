"""memdesk's PostgreSQL backend: the stock one, plus three things.

- With ``EMBEDDED`` in the database settings (no ``DATABASE_URL``), it starts the pgserver cluster on first
  connection and connects over its Unix socket as the non-superuser app role.
- With the connection pool on, a connection taken from the pool is checked without a round trip
  (:func:`check_pooled_connection`). Django's check sends an empty query on every checkout: three round
  trips a chat turn (one per unit of work), each one waited for, to learn what the socket already tells.
- The pool hands out its most recently returned connection first (:class:`LifoConnectionPool`).
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from django.conf import settings
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool
from psycopg_pool.errors import PoolTimeout, TooManyRequests

from config.embedded_pg import ensure_embedded


def check_pooled_connection(conn: psycopg.Connection) -> None:
    """Raise when a pooled connection is unusable, as ``ConnectionPool.check_connection`` does, but ask the
    server only when something is wrong. An idle connection has nothing to read: when its socket is
    readable the server has spoken unprompted (a termination notice before it hung up, or the end of the
    stream), and the full check (an empty query) decides. A closed or broken connection fails at once."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        ConnectionPool.check_connection(conn)


class LifoConnectionPool(ConnectionPool):
    """psycopg_pool's pool, but a checkout takes the most recently returned connection, not the oldest.

    A new PostgreSQL backend is cold: it loads the catalog entries of every table it touches and plans
    every statement twice (its first run, and the second, when psycopg prepares it) — recall's candidate
    query alone takes longer to plan than to run. Taking connections in turn (psycopg_pool's order) kept every one of a
    worker's connections in play, so each had to warm up to every statement of a chat turn: after a start
    or a deploy, turns ran slow for minutes (bench/load/chat_load.py's p95 by 30 s windows). Most recent first,
    a worker at its usual concurrency reuses the same warm one or two, the others stay idle, and the pool
    still closes the least recently used when it shrinks. Only the checkout order differs from
    psycopg_pool 3.3's ``_get_ready_connection`` (pinned in requirements.txt; tests/ops check the order)."""

    def _get_ready_connection(self, timeout: float | None) -> Any:
        if timeout is not None and timeout <= 0.0:
            raise PoolTimeout()
        conn = None
        if self._pool:
            conn = self._pool.pop()  # psycopg_pool: popleft()
            if len(self._pool) < self._nconns_min:
                self._nconns_min = len(self._pool)
        elif self.max_waiting and len(self._waiting) >= self.max_waiting:
            self._stats[self._REQUESTS_ERRORS] += 1
            raise TooManyRequests(f"the pool {self.name!r} has already {len(self._waiting)} requests waiting")
        return conn


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self) -> dict[str, Any]:
        if self.settings_dict.get("EMBEDDED"):
            server = ensure_embedded(settings.EMBEDDED_PG_DIR)
            self.settings_dict["HOST"] = server.socket_dir
        return super().get_connection_params()

    @property
    def pool(self) -> Any:
        pool = super().pool
        # Django hands psycopg_pool its own check (with CONN_HEALTH_CHECKS, memdesk's default) and offers no
        # setting for another; swap it once. Should psycopg_pool ever rename the attribute, Django's check
        # simply stays.
        if pool is not None and getattr(pool, "_check", None) is ConnectionPool.check_connection:
            pool._check = check_pooled_connection
        # Django builds a plain ConnectionPool; the subclass adds no state, only the checkout order.
        if type(pool) is ConnectionPool:
            pool.__class__ = LifoConnectionPool
        return pool
