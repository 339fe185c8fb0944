"""memory.store.read.fetch_memories: the raw loader recall and memory writes use on every chat turn."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memory import serializers
from memory.store import read as fetch
from memory.store import write as store
from tenants.rls import tenant_scope
from tests.factories import open_session_obj


def test_it_loads_visible_memories_with_their_end_user_and_without_embeddings(acme, globex, acme_session):
    # given alice's phone at acme, and a globex user's phone with the same key
    phone = store.do_write_memory(
        acme.tenant, acme_session, type="user_profile", key="phone", content="用户手机号 13912345678"
    ).memory
    theirs_session = open_session_obj(globex, "alice")
    store.do_write_memory(globex.tenant, theirs_session, type="user_profile", key="phone", content="phone 13800000000")

    # when acme's session reads its phone through the loader
    with tenant_scope(acme.tenant):
        params = fetch.scope_params(acme.tenant, acme_session, timezone.now())
        where = f"{fetch.SCOPE_SQL} AND m.key = ANY(%(keys)s)"
        (found,) = fetch.fetch_memories(acme.tenant, where, {**params, "keys": ["phone"]})

        # then it is acme's memory, its end user comes along, and the embedding was never read
        with CaptureQueriesContext(connection) as queries:
            assert found.pk == phone.pk
            assert found.content == "用户手机号 13912345678"
            assert found.end_user.external_id == "alice"
            assert serializers.serialize_memory(found)["end_user_id"] == "alice"
        assert len(queries) == 0
        assert "embedding" in found.get_deferred_fields()
