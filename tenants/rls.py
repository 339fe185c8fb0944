"""Row-level security: the second wall of tenant isolation.

Every tenant-owned table has ``FORCE ROW LEVEL SECURITY`` and one policy: a
row is visible (and writable) only when its ``tenant_id`` is in the
transaction-local setting ``app.tenant_ids`` (comma-separated UUIDs), or when
``app.rls_bypass`` is ``on`` — the explicit, visible opt-out for operator work.
Without either setting a raw ``SELECT`` sees nothing.

``tenant_db_scope`` opens a transaction and sets both with ``set_config(...,
true)`` (that is ``SET LOCAL``): they end with the transaction, so a pooled
connection never carries one request's tenant into the next.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections, transaction

POLICY_NAME = "tenant_isolation"


def enable_rls_sql(table: str) -> str:
    return f"""
        ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
        ALTER TABLE {table} FORCE ROW LEVEL SECURITY;
        DROP POLICY IF EXISTS {POLICY_NAME} ON {table};
        CREATE POLICY {POLICY_NAME} ON {table}
            USING (
                current_setting('app.rls_bypass', true) = 'on'
                OR tenant_id::text = ANY (string_to_array(current_setting('app.tenant_ids', true), ','))
            );
    """


def disable_rls_sql(table: str) -> str:
    return f"""
        DROP POLICY IF EXISTS {POLICY_NAME} ON {table};
        ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY;
        ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;
    """


def _ids(tenants: Iterable[Any]) -> str:
    return ",".join(str(getattr(t, "pk", t)) for t in tenants if t is not None)


@contextmanager
def tenant_db_scope(tenants: Iterable[Any] = (), *, bypass: bool = False, using: str = "default") -> Iterator[None]:
    """Run the block in a transaction that RLS lets see exactly ``tenants``
    (or everything, with ``bypass=True``). Nested scopes restore the outer
    values on exit."""
    ids = _ids(tenants)
    connection = connections[using]
    with transaction.atomic(using=using):
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('app.tenant_ids', true), current_setting('app.rls_bypass', true)")
            previous = cursor.fetchone()
            cursor.execute(
                "SELECT set_config('app.tenant_ids', %s, true), set_config('app.rls_bypass', %s, true)",
                [ids, "on" if bypass else "off"],
            )
        yield
        # Only on a normal exit: after an exception the atomic block rolls back
        # (to its savepoint), and PostgreSQL undoes the SET LOCAL itself.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('app.tenant_ids', %s, true), set_config('app.rls_bypass', %s, true)",
                [previous[0] or "", previous[1] or "off"],
            )


def tenant_scope(tenant: Any, *, using: str = "default") -> Any:
    """Shorthand: the RLS scope of one tenant."""
    return tenant_db_scope([tenant], using=using)


def operator_scope(*, using: str = "default") -> Any:
    """Explicit cross-tenant access for operator commands and superusers."""
    return tenant_db_scope((), bypass=True, using=using)
