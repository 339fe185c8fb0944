"""Row-level security: the second wall of tenant isolation.

Every tenant-owned table has ``FORCE ROW LEVEL SECURITY`` and one policy: a
row is visible (and writable) only when its ``tenant_id`` is in the
transaction-local setting ``app.tenant_ids`` (comma-separated UUIDs), or when
``app.rls_bypass`` is ``on`` — the explicit, visible opt-out for operator work.
Without either setting a raw ``SELECT`` sees nothing.

``tenant_db_scope`` opens a transaction and sets both with ``set_config(...,
true)`` (that is ``SET LOCAL``): they end with the transaction, so a pooled
connection never carries one request's tenant into the next. A scope that
begins the transaction sends ``BEGIN`` and the values as one statement.

Scopes nest (a service calls another service, each opening its own scope), so
each connection remembers the scopes open on it: a scope that asks for what is
already in force sends nothing, and one that changes it restores the outer
values from memory instead of reading them back. This is sound because this
module is the only code that sets ``app.*`` (a test checks it) and every
setting is transaction-local: what the stack says is what PostgreSQL has.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections, transaction

POLICY_NAME = "tenant_isolation"


#: The policy's test. ``tenant_id`` is compared as a uuid, not as text: the planner then estimates the
#: policy's selectivity from the column's statistics (about every row of a tenant passes) instead of
#: guessing one row in a hundred, and picks plans for the rows that are really there (an end user's
#: newest memories by their index rather than a scan of the whole tenant; docs/memory.md, "Long histories").
#: The settings are read in sub-selects, which PostgreSQL evaluates once per statement (an InitPlan): written
#: inline, the list of tenant ids was split and parsed as uuids again for every row a statement read, a
#: fifth of the time an end user's 2,000-row recall window took. An unset or empty ``app.tenant_ids`` is an
#: empty array: nothing passes.
POLICY_USING = (
    "(SELECT current_setting('app.rls_bypass', true) = 'on') "
    "OR tenant_id = ANY ((SELECT string_to_array(current_setting('app.tenant_ids', true), ',')::uuid[])::uuid[])"
)
#: The test of migration chat.0012 (the settings read for every row); kept for chat.0013's reverse.
POLICY_USING_PER_ROW = (
    "current_setting('app.rls_bypass', true) = 'on' "
    "OR tenant_id = ANY (string_to_array(current_setting('app.tenant_ids', true), ',')::uuid[])"
)
#: The test before it compared text (``tenant_id::text = ANY (…)``); kept for the migration's reverse.
POLICY_USING_TEXT = (
    "current_setting('app.rls_bypass', true) = 'on' "
    "OR tenant_id::text = ANY (string_to_array(current_setting('app.tenant_ids', true), ','))"
)


def enable_rls_sql(table: str) -> str:
    return f"""
        ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
        ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
        DROP POLICY IF EXISTS {POLICY_NAME} ON {table};
        CREATE POLICY {POLICY_NAME} ON {table} USING ({POLICY_USING});
    """


def alter_every_policy_sql(using: str) -> str:
    """Every table's ``tenant_isolation`` policy set to ``using`` (a migration's change of the test)."""
    quoted = using.replace("'", "''")
    return f"""
        DO $$ DECLARE r record; BEGIN
            FOR r IN SELECT schemaname, tablename FROM pg_policies WHERE policyname = '{POLICY_NAME}' LOOP
                EXECUTE format('ALTER POLICY {POLICY_NAME} ON %I.%I USING ({quoted})', r.schemaname, r.tablename);
            END LOOP;
        END $$;
    """  # noqa: S608 - our own constants, no input


def disable_rls_sql(table: str) -> str:
    return f"""
        DROP POLICY IF EXISTS {POLICY_NAME} ON {table};
        ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY;
        ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;
    """


def _ids(tenants: Iterable[Any]) -> str:
    return ",".join(str(getattr(t, "pk", t)) for t in tenants if t is not None)


#: The values of a connection outside any scope (``app.*`` unset): the
#: policy reads them exactly as an empty id list without the bypass.
_UNSET = ("", False)


def _open_scopes(connection: Any) -> list[tuple[str, bool]]:
    """The ``(ids, bypass)`` of the scopes open on ``connection``, innermost
    last. Django's connection objects are per thread, and so is this list."""
    scopes = getattr(connection, "memdesk_rls_scopes", None)
    if scopes is None:
        scopes = connection.memdesk_rls_scopes = []
    return scopes


_SET = "SELECT set_config('app.tenant_ids', {ids}, true), set_config('app.rls_bypass', {bypass}, true)"


def _apply(connection: Any, scope: tuple[str, bool]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_SET.format(ids="%s", bypass="%s"), [scope[0], "on" if scope[1] else "off"])


def _begin_and_apply(connection: Any, scope: tuple[str, bool], first: Any = None) -> int | None:
    """Begin the transaction and set ``scope`` in one round trip — ``BEGIN; SELECT set_config(…)`` as one
    simple query — where psycopg would send its ``BEGIN`` on its own before the first statement; ``first``
    (a ``psycopg.sql`` statement) goes in the same query. Every unit of work of a chat turn opens a scope:
    this is one round trip less for each (two where the unit locks its session first). Returns how many
    rows ``first`` returned (0 without one); None, having sent nothing, when the server already has a
    transaction open (a test's, or an outer ``atomic`` that ran a statement): the caller then sets the
    values, and runs ``first``, as statements of that transaction."""
    from psycopg import errors, generators, pq, sql

    raw = connection.connection
    if raw is None or raw.autocommit or raw.pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return None
    values = [sql.Literal(scope[0]), sql.Literal("on" if scope[1] else "off")]
    statements = [sql.SQL("BEGIN"), sql.SQL(_SET.format(ids="{}", bypass="{}")).format(*values)]
    query = sql.SQL("; ").join(statements + ([first] if first is not None else [])).as_bytes(raw)
    with connection.wrap_database_errors:
        raw.pgconn.send_query(query)
        results = raw.wait(generators.execute(raw.pgconn))
        for result in results:
            if result.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
                raise errors.error_from_result(result, encoding=raw.info.encoding)
    if connection.queries_logged:  # as Django logs its own statements (DEBUG, CaptureQueriesContext)
        connection.queries_log.append({"sql": query.decode(), "time": "0.000"})
    return results[-1].ntuples if first is not None else 0


def _run_first(connection: Any, first: Any) -> int:
    """``first`` as a statement of the transaction already open; how many rows it returned."""
    with connection.cursor() as cursor:
        cursor.execute(first.as_string(connection.connection))
        return cursor.rowcount


@contextmanager
def tenant_db_scope(
    tenants: Iterable[Any] = (), *, bypass: bool = False, using: str = "default", first: Any = None
) -> Iterator[int | None]:
    """Run the block in a transaction that RLS lets see exactly ``tenants``
    (or everything, with ``bypass=True``). Nested scopes restore the outer
    values on exit. Costs the transaction's own round trips: ``BEGIN``
    (which carries the values) and ``COMMIT``; nested in another
    transaction, a savepoint and one statement to set the values.

    ``first``: a statement (``psycopg.sql``, its values as literals: it may
    travel in the simple query that begins the transaction) that the scope
    runs before the block, with its values in force — a chat turn's lock on
    its session row. The scope then yields how many rows it returned
    (otherwise None).

    A scope nested directly in one with the same values (a service calling
    another for the same tenant: a chat turn's extraction, recall and
    feedback) costs nothing: it sends no statement and opens no savepoint,
    so its work is simply part of the enclosing transaction, and an error in
    it ends that transaction like any other. (Callers that must survive a
    database error and continue open their own ``transaction.atomic()``.)"""
    wanted = (_ids(tenants), bypass)
    connection = connections[using]
    scopes = _open_scopes(connection)
    outermost = not connection.in_atomic_block
    if scopes and not outermost and scopes[-1] == wanted:
        scopes.append(wanted)
        try:
            yield None if first is None else _run_first(connection, first)
        finally:
            scopes.pop()
        return
    with transaction.atomic(using=using):
        # A transaction we begin starts with nothing set; inside someone
        # else's transaction (a test's, an outer atomic) only our own scopes
        # can have set anything.
        outer = scopes[-1] if scopes and not outermost else _UNSET
        found = _begin_and_apply(connection, wanted, first) if outer != wanted and outermost else None
        if found is None:
            if outer != wanted:
                _apply(connection, wanted)
            found = None if first is None else _run_first(connection, first)
        scopes.append(wanted)
        try:
            yield None if first is None else found
        finally:
            scopes.pop()
        # Only on a normal exit: after an exception the atomic block rolls back
        # (to its savepoint), and PostgreSQL undoes the SET LOCAL itself. A
        # transaction this scope began ends right here, and its settings with it.
        if outer != wanted and not outermost:
            _apply(connection, outer)


def tenant_scope(tenant: Any, *, using: str = "default", first: Any = None) -> Any:
    """Shorthand: the RLS scope of one tenant."""
    return tenant_db_scope([tenant], using=using, first=first)


def operator_scope(*, using: str = "default") -> Any:
    """Explicit cross-tenant access for operator commands and superusers."""
    return tenant_db_scope((), bypass=True, using=using)
