"""memdesk's PostgreSQL backend: the stock one, plus two things.

- With ``EMBEDDED`` in the database settings (no ``DATABASE_URL``), it starts the pgserver cluster on first
  connection and connects over its Unix socket as the non-superuser app role.
- With the connection pool on, a connection taken from the pool is checked without a round trip
  (:func:`check_pooled_connection`). Django's check sends an empty query on every checkout: three round
  trips a chat turn (one per unit of work), ~0.5 ms each on the benchmark machine (bench/RESULTS.md).
"""

from __future__ import annotations

import select
from typing import Any

import psycopg
from django.conf import settings
from django.db.backends.postgresql import base
from psycopg_pool import ConnectionPool

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
        return pool
