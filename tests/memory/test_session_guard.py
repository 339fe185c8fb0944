"""conversations.access.require_session_id: every scoped service function refuses a call without an explicit session
of the caller's own tenant, however the arguments are passed."""

from __future__ import annotations

import pytest

from conversations.access import SessionIdRequired, SessionNotFound
from memory.store.read import visible_memories
from tests.factories import open_session_obj


def test_positional_and_keyword_calls_with_the_tenants_own_session_pass(acme, acme_session):
    assert list(visible_memories(acme.tenant, acme_session)) == []
    assert list(visible_memories(tenant=acme.tenant, session=acme_session)) == []
    assert list(visible_memories(acme.tenant, session=acme_session)) == []


def test_a_missing_session_is_refused(acme):
    with pytest.raises(SessionIdRequired):
        visible_memories(acme.tenant, None)
    with pytest.raises(SessionIdRequired):
        visible_memories(tenant=acme.tenant, session="not a session")


def test_another_tenants_session_is_refused_positionally_and_by_keyword(acme, globex):
    theirs = open_session_obj(globex, "alice")
    with pytest.raises(SessionNotFound):
        visible_memories(acme.tenant, theirs)
    with pytest.raises(SessionNotFound):
        visible_memories(session=theirs, tenant=acme.tenant)


def test_a_missing_tenant_is_refused(acme_session):
    with pytest.raises(TypeError, match="tenant is required"):
        visible_memories(None, acme_session)
