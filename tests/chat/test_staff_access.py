"""Staff reads are audited (issue #19): opening an end user's conversation or memories in the admin or the
live view writes ``StaffAccess`` rows; only the tenant's owners (and superusers) can list them."""

from __future__ import annotations

import pytest

from conversations.models import StaffAccess
from memory.store import write as store
from tenants.rls import operator_scope
from tests.factories import open_session_obj, staff_login

VECTOR = [0.0] * 383 + [1.0]


def _accesses():
    with operator_scope():
        return list(StaffAccess.objects.unscoped(reason="test: every tenant's staff reads").order_by("id"))


def _remember(ctx, session, content, key):
    return store.do_write_memory(
        ctx.tenant, session, type="user_profile", key=key, content=content, embedding=VECTOR
    ).memory


@pytest.fixture
def alice(acme):
    session = open_session_obj(acme, "alice-of-acme")
    _remember(acme, session, "用户姓名 张伟", "name")
    return session


def test_opening_a_session_writes_one_row_naming_the_reader_the_session_and_its_end_user(staff, alice):
    # given acme's agent
    client = staff_login(staff["agent_a"])
    # when they open alice's session (its messages are on the page)
    response = client.get(f"/admin/conversations/chatsession/{alice.pk}/change/")
    # then one row says who read which conversation of whom, and where
    assert response.status_code == 200
    [access] = _accesses()
    assert (access.user_id, access.tenant_id, access.end_user_id, access.session_id, access.what) == (
        staff["agent_a"].pk, alice.tenant_id, alice.end_user_id, alice.pk, "conversation",
    )  # fmt: skip
    assert access.path == f"/admin/conversations/chatsession/{alice.pk}/change/"


def test_a_sessions_delete_confirmation_is_a_read_too(staff, alice):
    # given acme's owner, who may delete sessions
    client = staff_login(staff["owner_a"])
    # when they open the confirmation, which lists the session's messages by their text
    response = client.get(f"/admin/conversations/chatsession/{alice.pk}/delete/")
    # then it is recorded like the session's page
    assert response.status_code == 200
    assert [(a.what, a.session_id, a.end_user_id) for a in _accesses()] == [
        ("conversation", alice.pk, alice.end_user_id)
    ]


def test_a_list_of_memories_writes_one_row_per_end_user_shown(staff, acme, alice):
    # given three memories of two end users
    bob = open_session_obj(acme, "bob-of-acme")
    _remember(acme, alice, "City: Hangzhou", "city")
    _remember(acme, bob, "Name: Bob", "name")
    # when acme's owner lists the memories
    response = staff_login(staff["owner_a"]).get("/admin/memory/memoryunit/")
    # then one row per end user, not one per memory
    assert response.status_code == 200
    accesses = _accesses()
    assert sorted(a.end_user_id for a in accesses) == sorted([alice.end_user_id, bob.end_user_id])
    assert {(a.what, a.session_id, a.user_id) for a in accesses} == {("memories", None, staff["owner_a"].pk)}


def test_opening_a_memory_writes_a_row(staff, acme, alice):
    # given one of alice's memories
    memory = _remember(acme, alice, "City: Hangzhou", "city")
    # when acme's agent opens it
    response = staff_login(staff["agent_a"]).get(f"/admin/memory/memoryunit/{memory.pk}/change/")
    # then one row for alice's memory
    assert response.status_code == 200
    assert [(a.what, a.end_user_id) for a in _accesses()] == [("memory", alice.end_user_id)]


def test_the_staff_live_view_writes_a_row_per_session_shown(staff, acme, alice):
    # given two open sessions of two end users
    bob = open_session_obj(acme, "bob-of-acme")
    # when acme's agent opens the live view
    response = staff_login(staff["agent_a"]).get("/staff/sessions/")
    # then one row for each session shown, with its end user
    assert response.status_code == 200
    assert {(a.session_id, a.end_user_id, a.what) for a in _accesses()} == {
        (alice.pk, alice.end_user_id, "memories"),
        (bob.pk, bob.end_user_id, "memories"),
    }


def test_a_refused_read_writes_nothing(staff, alice):
    # given the owner of globex, a stranger to acme
    client = staff_login(staff["outsider"])
    # when they try to open acme's session
    response = client.get(f"/admin/conversations/chatsession/{alice.pk}/change/")
    # then they are turned away and nothing was read, so nothing is recorded
    assert response.status_code in (302, 403, 404)
    assert _accesses() == []


def test_an_owner_lists_the_reads_of_their_tenant(staff, alice):
    # given acme's agent opened alice's session
    staff_login(staff["agent_a"]).get(f"/admin/conversations/chatsession/{alice.pk}/change/")
    [access] = _accesses()
    # when acme's owner lists the staff reads
    client = staff_login(staff["owner_a"])
    listing = client.get("/admin/conversations/staffaccess/")
    # then the agent's read is there, and its page opens read-only
    assert listing.status_code == 200
    assert "agent_a" in listing.content.decode()
    assert "alice-of-acme" in listing.content.decode()
    detail = client.get(f"/admin/conversations/staffaccess/{access.pk}/change/")
    assert detail.status_code == 200
    assert 'name="_save"' not in detail.content.decode()


def test_an_agent_of_the_tenant_cannot_see_the_reads(staff, alice):
    # given a read on record in acme
    staff_login(staff["owner_a"]).get(f"/admin/conversations/chatsession/{alice.pk}/change/")
    [access] = _accesses()
    client = staff_login(staff["agent_a"])
    # when acme's agent looks for the staff reads
    listing = client.get("/admin/conversations/staffaccess/")
    detail = client.get(f"/admin/conversations/staffaccess/{access.pk}/change/")
    index = client.get("/admin/").content.decode()
    # then they are refused, and the admin's index does not offer them
    assert listing.status_code == 403
    assert detail.status_code in (302, 403)
    assert "/admin/conversations/staffaccess/" not in index


def test_another_tenants_owner_never_sees_the_reads(staff, globex, alice):
    # given a read in acme, and one in globex by its own owner
    staff_login(staff["owner_a"]).get(f"/admin/conversations/chatsession/{alice.pk}/change/")
    gina = open_session_obj(globex, "gina-of-globex")
    staff_login(staff["outsider"]).get(f"/admin/conversations/chatsession/{gina.pk}/change/")
    acme_read = next(a for a in _accesses() if a.tenant_id == alice.tenant_id)
    client = staff_login(staff["outsider"])
    # when globex's owner lists the staff reads and tries acme's
    listing = client.get("/admin/conversations/staffaccess/").content.decode()
    detail = client.get(f"/admin/conversations/staffaccess/{acme_read.pk}/change/")
    # then they see globex's read only
    assert "gina-of-globex" in listing
    assert "alice-of-acme" not in listing
    assert "owner_a" not in listing
    assert detail.status_code in (302, 403, 404)


def test_a_superuser_sees_every_tenants_reads(staff, globex, alice):
    # given a read in acme and one in globex
    staff_login(staff["owner_a"]).get(f"/admin/conversations/chatsession/{alice.pk}/change/")
    gina = open_session_obj(globex, "gina-of-globex")
    staff_login(staff["outsider"]).get(f"/admin/conversations/chatsession/{gina.pk}/change/")
    # when the superuser lists them
    listing = staff_login(staff["root"]).get("/admin/conversations/staffaccess/").content.decode()
    # then both are there
    assert "alice-of-acme" in listing
    assert "gina-of-globex" in listing
