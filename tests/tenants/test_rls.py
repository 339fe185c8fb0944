"""The second wall: PostgreSQL row-level security holds against raw SQL."""

from __future__ import annotations

import pytest
from django.db import connection

from tenants.rls import operator_scope, tenant_db_scope, tenant_scope
from tenants.scoping import UnscopedQueryError
from tests.factories import open_session_obj


def _raw_count(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608 - fixed table names
        return cursor.fetchone()[0]


def _open_sessions(acme, globex) -> None:
    """Two sessions of acme and one of globex."""
    open_session_obj(acme, "alice")
    open_session_obj(acme, "bob")
    open_session_obj(globex, "alice")


@pytest.fixture
def two_tenants_with_sessions(acme, globex):
    _open_sessions(acme, globex)
    return acme, globex


@pytest.mark.parametrize("table", ["chat_chatsession", "tenants_enduser"])
def test_raw_sql_without_the_setting_sees_nothing(two_tenants_with_sessions, table):
    assert _raw_count(table) == 0


def test_raw_sql_sees_only_the_scoped_tenant(two_tenants_with_sessions):
    acme, globex = two_tenants_with_sessions
    with tenant_scope(acme.tenant):
        assert _raw_count("chat_chatsession") == 2
    with tenant_scope(globex.tenant):
        assert _raw_count("chat_chatsession") == 1
    with tenant_db_scope([acme.tenant, globex.tenant]):
        assert _raw_count("chat_chatsession") == 3
    with operator_scope():
        assert _raw_count("chat_chatsession") == 3
    # and the setting ends with the scope
    assert _raw_count("chat_chatsession") == 0


def test_raw_insert_into_another_tenant_is_refused(two_tenants_with_sessions):
    from django.db import DatabaseError, transaction

    acme, globex = two_tenants_with_sessions
    with pytest.raises(DatabaseError, match="row-level security"), transaction.atomic(), tenant_scope(acme.tenant):
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO tenants_enduser (id, tenant_id, external_id, created_at) "
                "VALUES (gen_random_uuid(), %s, 'intruder', now())",
                [str(globex.tenant.pk)],
            )


def test_app_role_is_not_a_superuser(db):
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
        assert cursor.fetchone() == (False, False)


def test_orm_refuses_unscoped_queries(two_tenants_with_sessions):
    from conversations.models import ChatSession
    from tenants.models import EndUser

    with pytest.raises(UnscopedQueryError):
        list(ChatSession.objects.all())
    with pytest.raises(UnscopedQueryError):
        EndUser.objects.filter(external_id="alice").count()
    with pytest.raises(UnscopedQueryError):
        EndUser.objects.create(external_id="nobody")


def _set_config_calls(queries) -> int:
    return sum("set_config" in q["sql"] for q in queries)


def test_a_nested_scope_of_another_tenant_restores_the_outer_one(two_tenants_with_sessions):
    acme, globex = two_tenants_with_sessions
    with tenant_scope(acme.tenant):
        with tenant_scope(globex.tenant):
            assert _raw_count("chat_chatsession") == 1
        assert _raw_count("chat_chatsession") == 2
        with operator_scope():
            assert _raw_count("chat_chatsession") == 3
        assert _raw_count("chat_chatsession") == 2
    assert _raw_count("chat_chatsession") == 0


def test_a_failed_nested_scope_leaves_the_outer_one_in_force(two_tenants_with_sessions):
    acme, globex = two_tenants_with_sessions
    with tenant_scope(acme.tenant):
        with pytest.raises(RuntimeError), tenant_scope(globex.tenant):
            raise RuntimeError("boom")
        assert _raw_count("chat_chatsession") == 2
        # the same scope nested: sent nothing, and a failure in it changes nothing either
        with pytest.raises(RuntimeError), tenant_scope(acme.tenant):
            raise RuntimeError("boom")
        assert _raw_count("chat_chatsession") == 2


def test_a_nested_scope_that_changes_nothing_sends_nothing(two_tenants_with_sessions):
    from django.test.utils import CaptureQueriesContext

    acme, globex = two_tenants_with_sessions
    with CaptureQueriesContext(connection) as queries, tenant_scope(acme.tenant):
        with tenant_scope(acme.tenant), tenant_scope(acme.tenant):
            assert _raw_count("chat_chatsession") == 2
    # one set_config for the scope, one to restore it inside the test's own transaction
    assert _set_config_calls(queries) == 2
    # and no savepoint either: the nested scopes are part of the outer one's transaction
    assert sum(q["sql"].startswith("SAVEPOINT") for q in queries) == 1  # the outer scope's, in the test's transaction
    with CaptureQueriesContext(connection) as queries, tenant_scope(acme.tenant):
        with tenant_scope(globex.tenant):
            pass
    assert _set_config_calls(queries) == 4  # set acme, set globex, back to acme, restore
    assert not any("current_setting" in q["sql"] for q in queries)  # known from the stack, never read back


def test_only_tenants_rls_sets_the_rls_settings():
    # tenant_db_scope trusts its own record of what is set: nothing else may set app.*
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    offenders = [
        str(path.relative_to(root))
        for folder in ("chat", "memory", "tenants", "config", "bench")
        for path in (root / folder).rglob("*.py")
        if "set_config(" in path.read_text(encoding="utf-8") and path.name != "rls.py"
    ]
    assert offenders == []


@pytest.mark.django_db(transaction=True)
def test_a_scope_on_an_idle_connection_begins_and_sets_its_tenant_in_one_statement(acme, globex):
    # given sessions of two tenants, committed (no test transaction: the connection is idle between scopes)
    from django.test.utils import CaptureQueriesContext

    _open_sessions(acme, globex)

    # when scopes open on the idle connection
    with CaptureQueriesContext(connection) as queries:
        with tenant_scope(acme.tenant):
            acme_count = _raw_count("chat_chatsession")
            with tenant_scope(globex.tenant):
                nested_count = _raw_count("chat_chatsession")
            restored_count = _raw_count("chat_chatsession")
        with operator_scope():
            operator_count = _raw_count("chat_chatsession")

    # then each saw exactly what it should, and nothing is set after them
    assert (acme_count, nested_count, restored_count, operator_count) == (2, 1, 2, 3)
    assert _raw_count("chat_chatsession") == 0
    # and each outermost scope began its transaction with its values: one statement, not BEGIN then SELECT
    begins = [q["sql"] for q in queries if q["sql"].startswith("BEGIN; SELECT set_config(")]
    assert len(begins) == 2
    assert f"'{acme.tenant.pk}'" in begins[0]
    assert "'on'" in begins[1]
    assert _set_config_calls(queries) == 4  # the two begins, the nested scope's set and its restore


@pytest.mark.django_db(transaction=True)
def test_a_failed_scope_on_an_idle_connection_leaves_nothing_set(acme):
    from django.db import DatabaseError

    open_session_obj(acme, "alice")
    # when a statement fails inside the scope
    with pytest.raises(DatabaseError), tenant_scope(acme.tenant), connection.cursor() as cursor:
        cursor.execute("SELECT 1/0")
    # then the transaction is gone with its settings, and the next scope works
    assert _raw_count("chat_chatsession") == 0
    with tenant_scope(acme.tenant):
        assert _raw_count("chat_chatsession") == 1


def test_a_scopes_first_statement_inside_a_transaction_runs_with_its_values_and_yields_its_row_count(
    two_tenants_with_sessions,
):
    # given a statement for the scope to run first, inside the test's transaction (not with a BEGIN)
    from psycopg import sql

    acme, globex = two_tenants_with_sessions
    first = sql.SQL("SELECT id FROM chat_chatsession FOR UPDATE")
    # when / then: it sees the scope's tenant only, and a scope without one yields None
    with tenant_scope(acme.tenant, first=first) as found:
        assert found == 2
    with tenant_scope(globex.tenant, first=first) as found:
        assert found == 1
    with tenant_scope(acme.tenant) as found:
        assert found is None


@pytest.mark.django_db(transaction=True)
def test_a_scopes_first_statement_travels_with_begin_on_an_idle_connection(acme, globex):
    from django.test.utils import CaptureQueriesContext
    from psycopg import sql

    _open_sessions(acme, globex)
    first = sql.SQL("SELECT id FROM chat_chatsession FOR UPDATE")
    with CaptureQueriesContext(connection) as queries:
        with tenant_scope(acme.tenant, first=first) as acme_found:
            with tenant_scope(acme.tenant, first=first) as nested_found:  # same values: inside the transaction
                pass
        with tenant_scope(globex.tenant, first=first) as globex_found:
            pass
    assert (acme_found, nested_found, globex_found) == (2, 2, 1)
    begins = [q["sql"] for q in queries if q["sql"].startswith("BEGIN; SELECT set_config(")]
    assert len(begins) == 2
    assert all(b.endswith("SELECT id FROM chat_chatsession FOR UPDATE") for b in begins)
