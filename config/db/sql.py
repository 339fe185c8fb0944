"""ORM work from async code (STYLE habit 12).

``unit_of_work(fn)`` is ``database_sync_to_async`` with ``thread_sensitive=False``:
each call runs in the event loop's thread pool with its own connection
(closed after the call, as ``close_old_connections`` does), so the database
steps of many concurrent chat turns run side by side instead of queueing on
Channels' single shared sync thread — measured in ``bench/load/chat_load.py``.
Every unit opens its own transaction and RLS scope from its explicit
``tenant`` argument, so nothing depends on which thread runs it. With
``DB_POOL_MAX_SIZE`` set, "closed" hands the connection back to the process's
pool instead of ending a PostgreSQL backend: a fresh backend per unit costs
each turn a PostgreSQL connection start-up per unit (bench/load/chat_load.py runs
with the pool).

``fetch_row`` and ``execute`` run the few statements of a chat turn written in
SQL (see ``chat.sessions.messages`` and ``chat.turn.prepare``): on every message, the ORM
would spend more CPU building each query than PostgreSQL takes to answer it.
``load_models`` turns such a statement's rows into model instances as
``Model.objects.raw()`` does, without its repeated work (``raw()`` works out
again, for every statement, which column is which field).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from channels.db import database_sync_to_async
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Model

M = TypeVar("M", bound=Model)


def unit_of_work(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        finally:
            # Hand the connection back now (to the pool, or end it when there is none): the thread may be
            # an event loop's executor thread that ends with its loop (``async_to_sync`` makes one per
            # call), and a pooled connection it still held would be lost to the pool for good.
            release_connection()

    return database_sync_to_async(run, thread_sensitive=False)


def release_connection() -> None:
    """Hand this thread's connection back (to the pool, or end it without one) before the thread waits on
    work that takes connections of its own. Inside a transaction (a test's) the connection stays: closing
    it would end that transaction."""
    if connection.in_atomic_block:
        return
    if connection.pool is not None or not connection.settings_dict.get("CONN_MAX_AGE"):
        connection.close()


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


@functools.cache
def _load_plan(model: type[Model], columns: tuple[str, ...], vendor: str) -> tuple[Any, ...]:
    """How to turn a row with ``columns`` into a ``model``: the attribute names of the columns that are its
    fields, with each one's position and database converters (a JSON field's decoding, say), and the other
    columns' positions and names (set as plain attributes, as ``raw()`` does)."""
    at = {}  # column name -> its first position in the row
    for index, column in enumerate(columns):
        at.setdefault(column, index)
    field_at: list[int] = []
    names: list[str] = []
    converters: list[tuple[int, list[Callable[..., Any]], Any]] = []
    # ``from_db`` wants the values in the model's field order, whatever the statement's order.
    for field in model._meta.concrete_fields:
        if field.column not in at:
            continue
        col = field.get_col(model._meta.db_table)
        found = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
        if found:
            converters.append((len(names), found, col))
        field_at.append(at[field.column])
        names.append(field.attname)
    taken = set(field_at)
    extras = [(index, column) for index, column in enumerate(columns) if index not in taken and column not in names]
    return tuple(field_at), tuple(names), tuple(converters), tuple(extras)


def load_models(model: type[M], sql: str, params: Mapping[str, Any]) -> list[M]:
    """The rows of ``sql`` as ``model`` instances, as ``model.objects.raw(sql, params)`` gives them: columns
    named like the model's fields fill them (with the field's conversions), the fields not selected are
    deferred, and every other column becomes a plain attribute."""
    wrapper = connections[DEFAULT_DB_ALIAS]  # the thread's own, looked up once rather than per row
    with wrapper.cursor() as cursor:
        cursor.execute(sql, params)
        columns = tuple(c.name for c in cursor.description)
        rows: Sequence[tuple[Any, ...]] = cursor.fetchall()
    field_at, names, converters, extras = _load_plan(model, columns, wrapper.vendor)
    alias, from_db = wrapper.alias, model.from_db
    loaded = []
    for row in rows:
        values = [row[i] for i in field_at]
        for position, found, col in converters:
            for convert in found:
                values[position] = convert(values[position], col, wrapper)
        instance = from_db(alias, names, values)
        for index, name in extras:
            setattr(instance, name, row[index])
        loaded.append(instance)
    return loaded
