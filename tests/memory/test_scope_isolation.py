"""A's memories never reach B: other end users, other tenants, concurrently."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from memory.recall.pipeline import recall
from memory.store import read as fetch
from memory.store import write as store
from tests.factories import open_session_obj


def test_end_users_of_one_tenant_never_see_each_other(acme):
    alice = open_session_obj(acme, "alice")
    bob = open_session_obj(acme, "bob")
    store.do_write_memory(acme.tenant, alice, type="user_profile", key="phone", content="Phone number 13911112222")
    store.do_write_memory(acme.tenant, bob, type="user_profile", key="phone", content="Phone number 13833334444")
    for session, mine, theirs in ((alice, "13911112222", "13833334444"), (bob, "13833334444", "13911112222")):
        contents = " ".join(
            h.memory.content for h in recall(acme.tenant, session, "what is my phone number", k=10).hits
        )
        assert mine in contents
        assert theirs not in contents


def test_same_end_user_id_in_two_tenants_stays_apart(acme, globex):
    a = open_session_obj(acme, "shared-id")
    g = open_session_obj(globex, "shared-id")
    store.do_write_memory(acme.tenant, a, type="user_profile", key="name", content="Name: Alice Acme")
    store.do_write_memory(globex.tenant, g, type="user_profile", key="name", content="Name: Gina Globex")
    assert [m.content for m in fetch.list_memories(acme.tenant, a)] == ["Name: Alice Acme"]
    assert [m.content for m in fetch.list_memories(globex.tenant, g)] == ["Name: Gina Globex"]
    assert [h.memory.content for h in recall(globex.tenant, g, "what is my name").hits] == ["Name: Gina Globex"]


def test_a_session_of_another_tenant_is_refused_by_the_guard(acme, globex):
    from conversations.access import SessionNotFound

    g = open_session_obj(globex, "x")
    with pytest.raises(SessionNotFound):
        store.do_write_memory(acme.tenant, g, type="user_profile", content="leak")
    with pytest.raises(SessionNotFound):
        recall(acme.tenant, g, "anything")


@pytest.mark.django_db(transaction=True)
def test_concurrent_recalls_never_cross(acme, globex):
    sessions = []
    for ctx, n in ((acme, 0), (acme, 1), (globex, 2), (globex, 3)):
        s = open_session_obj(ctx, f"user-{n}")
        store.do_write_memory(ctx.tenant, s, type="user_profile", key="code", content=f"Secret word is WORD{n}X")
        sessions.append((ctx, s, f"WORD{n}X"))
    leaks: list[str] = []

    def worker(ctx, session, mine):
        try:
            for _ in range(5):
                for hit in recall(ctx.tenant, session, "what is the secret word", k=10).hits:
                    if hit.memory.content.split()[-1] != mine:
                        leaks.append(hit.memory.content)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=s) for s in sessions]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert leaks == []
