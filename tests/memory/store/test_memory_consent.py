"""Whether memdesk remembers an end user: the tenant's ``end_user_memory`` setting ("on", "off",
"end_user_choice") and the end user's own switch (``PUT /api/v1/me/memories``), through real chat turns."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from conversations.models import Message
from memory.models import MemoryUnit
from memory.store.consent import memory_enabled_for, memory_mode
from tenants.models import EndUser, Tenant
from tenants.rls import tenant_scope
from tests.factories import TenantCtx, open_session

# A turn runs its database steps on the thread pool: real transactions.
pytestmark = pytest.mark.django_db(transaction=True)

ME = "/api/v1/me/memories"


def _set_mode(ctx: TenantCtx, mode: str) -> None:
    ctx.tenant.settings = {**ctx.tenant.settings, "end_user_memory": mode}
    ctx.tenant.save(update_fields=["settings"])


def _browser(opened: dict[str, Any]) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_SESSION_ID=opened["session_id"], HTTP_X_SESSION_TOKEN=opened["token"])
    return client


def _say(ctx: TenantCtx, session_id: str, text: str) -> dict[str, Any]:
    response = ctx.client.post(f"/api/v1/sessions/{session_id}/messages", {"text": text}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _recall(ctx: TenantCtx, session_id: str, query: str) -> list[str]:
    ctx.client.credentials(HTTP_AUTHORIZATION=f"Bearer {ctx.api_key}", HTTP_X_SESSION_ID=session_id)
    response = ctx.client.post("/api/v1/memories/recall", {"query": query}, format="json")
    ctx.client.credentials(HTTP_AUTHORIZATION=f"Bearer {ctx.api_key}")
    assert response.status_code == 200, response.content
    return [hit["memory"]["content"] for hit in response.json()["results"]]


def _contents(ctx: TenantCtx) -> list[str]:
    """Every stored memory's content, sorted (the table has no order of its own)."""
    with tenant_scope(ctx.tenant):
        return sorted(MemoryUnit.objects.for_tenant(ctx.tenant).values_list("content", flat=True))


def test_tenant_off_a_turn_stating_a_phone_stores_nothing_and_recall_returns_nothing(acme, fake_ollama):
    # given a tenant that had memory on and remembered alice's name, then turned it off
    fake_ollama.script("好的，张伟。", "好的，已记下。")
    sid = open_session(acme, "alice")["session_id"]
    _say(acme, sid, "我叫张伟")
    remembered = _contents(acme)
    assert any("张伟" in c for c in remembered)
    assert _recall(acme, sid, "我叫什么名字")
    _set_mode(acme, "off")
    # when she states her phone number
    _say(acme, sid, "我的手机号是13812345678")
    # then nothing new is stored, not even later (the turn's messages are marked done), and recall finds nothing
    assert _contents(acme) == remembered
    with tenant_scope(acme.tenant):
        unindexed = Message.objects.for_tenant(acme.tenant).filter(memory_indexed_at__isnull=True).count()
    assert unindexed == 0
    assert _recall(acme, sid, "我的手机号是多少") == []
    assert _recall(acme, sid, "我叫什么名字") == []


def test_end_user_choice_the_end_user_turns_memory_off_and_nothing_new_is_stored(acme, fake_ollama):
    # given a tenant that lets its end users choose, and alice, whose name is remembered
    _set_mode(acme, "end_user_choice")
    fake_ollama.script("好的，张伟。", "好的。", "好的。")
    opened = open_session(acme, "alice")
    alice = _browser(opened)
    _say(acme, opened["session_id"], "我叫张伟")
    assert alice.get(ME).json()["can_turn_off"] is True
    # when she turns memory off, then states her phone number
    switched = alice.put(ME, {"memory_enabled": False}, format="json")
    before = _contents(acme)
    _say(acme, opened["session_id"], "我的手机号是13812345678")
    # then her switch is stored, nothing new is remembered and recall finds nothing; what was remembered
    # before is still listed for her to forget
    assert switched.status_code == 200, switched.content
    assert switched.json()["memory_enabled"] is False
    with tenant_scope(acme.tenant):
        assert EndUser.objects.for_tenant(acme.tenant).get(external_id="alice").memory_enabled is False
    assert _contents(acme) == before
    assert not any("13812345678" in c for c in _contents(acme))
    assert _recall(acme, opened["session_id"], "我叫什么名字") == []
    listed = alice.get(ME).json()
    assert listed["memory_enabled"] is False
    assert any("张伟" in m["content"] for m in listed["memories"])
    # and when she turns it back on, the next fact is remembered again
    assert alice.put(ME, {"memory_enabled": True}, format="json").json()["memory_enabled"] is True
    _say(acme, opened["session_id"], "我的邮箱是zhang.wei@example.com")
    assert any("zhang.wei@example.com" in c for c in _contents(acme))


def test_with_memory_off_the_model_is_shown_nothing_remembered(acme, fake_ollama):
    # given alice's name, remembered while memory was on
    fake_ollama.script("好的，张伟。", "您好。", "您好。")
    sid = open_session(acme, "alice")["session_id"]
    _say(acme, sid, "我叫张伟")
    _say(acme, sid, "你好")
    assert "张伟" in _system_prompt(fake_ollama)
    # when the tenant turns memory off and she writes again in a new session
    _set_mode(acme, "off")
    later = open_session(acme, "alice")["session_id"]
    _say(acme, later, "你好")
    # then the prompt carries no remembered fact: neither recalled nor in the anchor
    assert "张伟" not in _system_prompt(fake_ollama)


def _system_prompt(fake: Any) -> str:
    """The system messages of the model's last chat request."""
    messages = fake.chat_requests[-1]["messages"]
    return "\n".join(m["content"] for m in messages if m["role"] == "system")


@pytest.mark.parametrize("mode", [None, "on", "off"])
def test_the_switch_is_403_unless_the_tenant_lets_end_users_choose(acme, mode):
    # given a tenant whose end users may not choose
    if mode is not None:
        _set_mode(acme, mode)
    opened = open_session(acme, "alice")
    alice = _browser(opened)
    # when alice tries to turn memory off
    response = alice.put(ME, {"memory_enabled": False}, format="json")
    # then she is told she may not, and nothing changed
    assert response.status_code == 403, response.content
    assert response.json()["error"]["code"] == "memory_switch_not_allowed"
    with tenant_scope(acme.tenant):
        assert EndUser.objects.for_tenant(acme.tenant).get(external_id="alice").memory_enabled is True
    assert alice.get(ME).json()["can_turn_off"] is False


@pytest.mark.parametrize("value", ["false", 0, None, "off"])
def test_the_switch_takes_only_true_or_false(acme, value):
    _set_mode(acme, "end_user_choice")
    alice = _browser(open_session(acme, "alice"))
    response = alice.put(ME, {"memory_enabled": value}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "invalid_request"


@pytest.mark.parametrize(
    ("tenant_settings", "switch", "mode", "enabled"),
    [
        ({}, False, "on", True),
        ({"end_user_memory": "on"}, False, "on", True),
        ({"end_user_memory": "off"}, True, "off", False),
        ({"end_user_memory": "end_user_choice"}, True, "end_user_choice", True),
        ({"end_user_memory": "end_user_choice"}, False, "end_user_choice", False),
        # a misspelt restriction must not quietly remember everything
        ({"end_user_memory": "of"}, True, "off", False),
        ({"end_user_memory": False}, True, "off", False),
    ],
)
def test_memory_enabled_for_reads_the_setting_and_the_switch(tenant_settings, switch, mode, enabled):
    # given
    tenant = Tenant(slug="t", settings=tenant_settings)
    end_user = EndUser(tenant=tenant, external_id="u", memory_enabled=switch)
    # when / then
    assert memory_mode(tenant) == mode
    assert memory_enabled_for(tenant, end_user) is enabled
