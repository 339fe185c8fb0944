"""Staff audit in the admin: scoping, validated edits, actions, history."""

from __future__ import annotations

import pytest

from memory.models import MemoryEvent, MemoryUnit
from memory.store import write as store
from tenants.rls import tenant_scope
from tests.factories import open_session_obj, staff_login


@pytest.fixture
def memories(acme, globex):
    a = open_session_obj(acme, "alice")
    g = open_session_obj(globex, "gina")
    ma = store.do_write_memory(acme.tenant, a, type="user_profile", key="name", content="用户姓名 张伟").memory
    mg = store.do_write_memory(globex.tenant, g, type="user_profile", key="name", content="Name: Gina Globex").memory
    return ma, mg


def _events(tenant, memory):
    with tenant_scope(tenant):
        return list(MemoryEvent.objects.for_tenant(tenant).filter(memory_id=memory.pk).order_by("id"))


def test_list_shows_only_own_tenant_memories(staff, memories):
    html = staff_login(staff["owner_a"]).get("/admin/memory/memoryunit/").content.decode()
    assert "用户姓名 张伟" in html
    assert "Gina Globex" not in html


def test_outsider_cannot_see_or_act_on_acme_memories(staff, memories, acme):
    ma, _ = memories
    client = staff_login(staff["outsider"])
    assert "用户姓名 张伟" not in client.get("/admin/memory/memoryunit/").content.decode()
    client.post("/admin/memory/memoryunit/", {"action": "expire_now", "_selected_action": [str(ma.pk)]})
    with tenant_scope(acme.tenant):
        fresh = MemoryUnit.objects.for_tenant(acme.tenant).get(pk=ma.pk)
    assert fresh.expires_at == ma.expires_at


def test_filters_by_type_and_expiry(staff, memories):
    client = staff_login(staff["owner_a"])
    assert "张伟" in client.get("/admin/memory/memoryunit/?type__exact=user_profile&expired=no").content.decode()
    assert "张伟" not in client.get("/admin/memory/memoryunit/?type__exact=session_state").content.decode()
    assert "张伟" not in client.get("/admin/memory/memoryunit/?expired=yes").content.decode()
    assert "张伟" in client.get("/admin/memory/memoryunit/?q=张伟").content.decode()


def test_expire_and_extend_actions_write_staff_events(staff, memories, acme):
    ma, _ = memories
    client = staff_login(staff["owner_a"])
    client.post("/admin/memory/memoryunit/", {"action": "expire_now", "_selected_action": [str(ma.pk)]})
    client.post("/admin/memory/memoryunit/", {"action": "extend_24h", "_selected_action": [str(ma.pk)]})
    events = _events(acme.tenant, ma)
    assert [e.kind for e in events] == ["create", "expire", "extend"]
    assert events[1].actor == "staff"
    assert events[1].actor_user_id == staff["owner_a"].pk


def test_edit_validates_content_length(staff, memories, acme):
    ma, _ = memories
    client = staff_login(staff["owner_a"])
    url = f"/admin/memory/memoryunit/{ma.pk}/change/"
    expires = ma.expires_at.strftime("%Y-%m-%d %H:%M:%S")
    bad = client.post(url, {"content": "长" * 151, "data": "{}", "expires_at": expires})
    assert bad.status_code == 200  # the form is shown again with the error
    assert "150" in bad.content.decode()
    good = client.post(url, {"content": "用户姓名 张伟（VIP）", "data": "{}", "expires_at": expires})
    assert good.status_code == 302
    events = _events(acme.tenant, ma)
    assert events[-1].kind == "edit"
    assert events[-1].before["content"] == "用户姓名 张伟"
    assert events[-1].after["content"] == "用户姓名 张伟（VIP）"
    assert events[-1].actor_user_id == staff["owner_a"].pk


def test_agent_can_read_history_but_not_edit(staff, memories):
    ma, _ = memories
    client = staff_login(staff["agent_a"])
    page = client.get(f"/admin/memory/memoryunit/{ma.pk}/change/")
    assert page.status_code == 200
    assert "create" in page.content.decode()
    expires = ma.expires_at.strftime("%Y-%m-%d %H:%M:%S")
    assert (
        client.post(
            f"/admin/memory/memoryunit/{ma.pk}/change/", {"content": "x", "data": "{}", "expires_at": expires}
        ).status_code
        == 403
    )
