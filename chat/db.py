"""ORM work from async code (STYLE habit 12).

``unit_of_work(fn)`` is ``database_sync_to_async`` with ``thread_sensitive=False``:
each call runs in the event loop's thread pool with its own connection
(closed after the call, as ``close_old_connections`` does), so the database
steps of many concurrent chat turns run side by side instead of queueing on
Channels' single shared sync thread — measured in ``bench/chat_load.py``.
Every unit opens its own transaction and RLS scope from its explicit
``tenant`` argument, so nothing depends on which thread runs it. With
``DB_POOL_MAX_SIZE`` set, "closed" hands the connection back to the process's
pool instead of ending a PostgreSQL backend: a fresh backend per unit cost a
turn ~25 ms of server CPU (bench/chat_load.py runs with the pool).

``fetch_row`` and ``execute`` run the few statements of a chat turn written in
SQL (see ``chat.services``): on every message, the ORM takes about a
millisecond of CPU to build each query, many times what PostgreSQL takes to
answer it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from channels.db import database_sync_to_async
from django.db import connection


def unit_of_work(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        finally:
            # Hand the connection back now (to the pool, or end it when there is none): the thread may be
            # an event loop's executor thread that ends with its loop (``async_to_sync`` makes one per
            # call), and a pooled connection it still held would be lost to the pool for good.
            if connection.pool is not None or not connection.settings_dict.get("CONN_MAX_AGE"):
                connection.close()

    return database_sync_to_async(run, thread_sensitive=False)


def fetch_row(sql: str, params: Mapping[str, Any]) -> dict[str, Any] | None:
    """The first row of ``sql`` as a dict by column name, or None."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
        return None if row is None else dict(zip((c.name for c in cursor.description), row, strict=True))


def fetch_rows(sql: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Every row of ``sql``, as tuples."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def execute(sql: str, params: Mapping[str, Any]) -> int:
    """Run ``sql``; how many rows it touched."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount
