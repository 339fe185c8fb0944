"""config.db.sql.load_models: rows of hand-written SQL as model instances, as ``raw()`` gives them."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from config.db.sql import load_models
from memory.models import MemoryUnit
from memory.store import write as store
from tenants.rls import tenant_scope


def test_it_loads_what_the_orm_loads_whatever_the_column_order(acme, acme_session):
    # given a memory with structured data
    written = store.do_write_memory(
        acme.tenant, acme_session, type="user_profile", key="phone", content="用户手机号 13912345678",
        data={"phone": "13912345678"},
    ).memory  # fmt: skip

    # when it is read with its columns in reverse order, the embedding left out, and a column of no field
    columns = [f.column for f in MemoryUnit._meta.concrete_fields if f.name != "embedding"][::-1]
    sql = f"SELECT {', '.join(columns)}, 42 AS answer FROM memory_memoryunit WHERE tenant_id = %(t)s AND id = %(id)s"
    with tenant_scope(acme.tenant):
        (loaded,) = load_models(MemoryUnit, sql, {"t": acme.tenant.pk, "id": written.pk})
        expected = MemoryUnit.all_objects.get(pk=written.pk)

    # then every field holds what the ORM reads (the JSON decoded), the embedding is deferred, the extra
    # column is an attribute, and nothing more was queried to get there
    with CaptureQueriesContext(connection) as queries:
        for field in MemoryUnit._meta.concrete_fields:
            if field.name != "embedding":
                assert getattr(loaded, field.attname) == getattr(expected, field.attname), field.name
        assert loaded.data == {"phone": "13912345678"}
        assert loaded.get_deferred_fields() == {"embedding"}
        assert loaded.answer == 42
    assert len(queries) == 0
    assert loaded._state.adding is False


def test_no_rows_load_no_models(acme):
    with tenant_scope(acme.tenant):
        found = load_models(MemoryUnit, "SELECT * FROM memory_memoryunit WHERE tenant_id = %(t)s AND false",
                            {"t": acme.tenant.pk})  # fmt: skip
    assert found == []
