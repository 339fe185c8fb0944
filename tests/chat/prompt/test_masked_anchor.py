"""The anchor with masked personal data (seed §4.2, issue #18 item 4): the prompt shows 138****1234, the store
keeps 13812341234, a tool gets the whole number back, staff see it whole only when they may."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from chat.prompt.summary import SUMMARY_PREFIX
from conversations.models import Message
from memory.models import MemoryUnit
from memory.store import write as store
from memory.text.masking import mask_obj, mask_text, masked_pairs, unmask_obj
from tenants.rls import tenant_scope
from testkit.fake_ollama import Reply
from tests.chat.tools.backend import Answer, FakeBackend
from tests.chat.tools.conftest import register
from tests.factories import open_session, open_session_obj, staff_login

pytestmark = pytest.mark.django_db(transaction=True)

SEED_LINE = "<|memory_anchor|>用户：李明，手机号 138****1234，当前咨询：宽带续费优惠"
PHONE, MASKED = "13812341234", "138****1234"
ACCOUNT_SCHEMA = {
    "type": "object",
    "properties": {"phone": {"type": "string", "pattern": "^1[3-9][0-9]{9}$"}},
    "required": ["phone"],
    "additionalProperties": False,
}


@pytest.fixture
def backend() -> Iterator[FakeBackend]:
    with FakeBackend() as server:
        yield server


def _send(ctx, sid, text):
    response = ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": text}, format="json")
    assert response.status_code == 200, response.content
    return response


def _system_line(request: dict, prefix: str) -> str:
    system = request["messages"][0]["content"]
    return next(line for line in system.split("\n") if line.startswith(prefix))


def _stored_phone(ctx) -> MemoryUnit:
    with tenant_scope(ctx.tenant):
        return MemoryUnit.objects.for_tenant(ctx.tenant).get(key="phone", superseded_at__isnull=True)


def _call(arguments: dict) -> dict:
    return {"function": {"name": "query_account", "arguments": arguments}}


# --- the prompt ------------------------------------------------------------------------------------------------


def test_the_anchor_and_the_summary_show_the_phone_masked_and_the_store_keeps_it_whole(acme, fake_ollama):
    """「<|memory_anchor|>用户：李明，手机号 138****1234，当前咨询：宽带续费优惠」 (seed §4.2)."""
    # given
    sid = open_session(acme, "liming")["session_id"]
    fake_ollama.script("好的，李明先生，已记下您的手机号。", "为您查询宽带续费优惠。")
    _send(acme, sid, f"我叫李明，手机号是{PHONE}")
    # when
    _send(acme, sid, "我想问一下宽带续费有什么优惠")
    # then
    request = fake_ollama.chat_requests[-1]
    anchor = _system_line(request, "<|memory_anchor|>")
    summary = _system_line(request, SUMMARY_PREFIX)
    assert "李明" in anchor
    assert MASKED in anchor
    assert PHONE not in anchor
    assert MASKED in summary
    assert PHONE not in summary
    memory = _stored_phone(acme)
    assert PHONE in memory.content
    assert memory.data["phone"] == PHONE


# --- the tool ------------------------------------------------------------------------------------------------


def test_a_tool_called_with_the_masked_phone_gets_the_whole_number(acme, backend, fake_ollama):
    """「手机号 138****1234」 (seed §4.2): the model sees the mask; the tenant's tool needs the number."""
    # given: the user gave the number; the model repeats what its anchor shows
    register(acme, backend.url, name="query_account", schema=ACCOUNT_SCHEMA)
    sid = open_session(acme, "liming")["session_id"]
    backend.responder = lambda r: Answer(json={"plan": "宽带 500M", "renewal": "2025-07-01"})
    fake_ollama.script("好的，已记下。", Reply(tool_calls=[_call({"phone": MASKED})]), "您的宽带 7 月 1 日到期。")
    _send(acme, sid, f"我的手机号是{PHONE}")
    # when
    _send(acme, sid, "帮我查一下我的宽带什么时候到期")
    # then: the back end got the whole number, the schema's pattern checked it
    [call] = backend.requests
    assert call.arguments == {"phone": PHONE}
    # and what the model and staff are shown keeps the mask
    with tenant_scope(acme.tenant):
        audit = Message.objects.for_tenant(acme.tenant).get(session_id=sid, role=Message.Role.TOOL)
    assert json.loads(audit.text)["arguments"] == {"phone": MASKED}
    context = acme.client.get(f"/api/v1/sessions/{sid}/context").json()
    assert context["tool_args"] == {"phone": MASKED}
    assert PHONE not in _system_line(fake_ollama.chat_requests[-1], "<|execution_context|>")


def test_a_mask_that_matches_no_stored_value_is_sent_as_written(acme, backend, fake_ollama):
    """「手机号 138****1234」 (seed §4.2): only a mask of a value this session holds is put back."""
    # given
    register(acme, backend.url, name="query_account", schema={"type": "object"})
    sid = open_session(acme, "liming")["session_id"]
    fake_ollama.script("好的。", Reply(tool_calls=[_call({"phone": "139****0000"})]), "没有查到。")
    _send(acme, sid, f"我的手机号是{PHONE}")
    # when
    _send(acme, sid, "查一下 139 开头的那个号码")
    # then
    [call] = backend.requests
    assert call.arguments == {"phone": "139****0000"}


def test_masking_is_stable_and_a_mask_of_two_values_stands_for_neither():
    """「手机号 138****1234」 (seed §4.2): what is masked, what stays visible, and when a mask is put back."""
    # masked: phones (not hotlines), e-mail, resident ID numbers; order numbers stay
    assert mask_text(f"用户手机号：{PHONE}") == f"用户手机号：{MASKED}"
    assert mask_text("邮箱 zhang.wei@example.com") == "邮箱 z***@example.com"
    assert mask_text("身份证 11010519491231002X") == "身份证 1*************002X"
    assert mask_text("User's phone: +44 7700 900123") == "User's phone: +44 7*** **0123"
    assert mask_text("客服热线 400-100-5678，订单 ABC123") == "客服热线 400-100-5678，订单 ABC123"
    assert mask_text(mask_text(f"{PHONE} zhang@example.com")) == mask_text(f"{PHONE} zhang@example.com")
    assert mask_obj({"phone": PHONE, "id_number": "E12345678"}) == {"phone": MASKED, "id_number": "E****5678"}
    # put back: one stored value per mask, in place, whatever surrounds it
    pairs = masked_pairs([f"用户手机号：{PHONE}", json.dumps({"phone": PHONE})])
    assert unmask_obj({"q": f"call {MASKED}", "n": [MASKED]}, pairs) == {"q": f"call {PHONE}", "n": [PHONE]}
    # two numbers that mask alike: neither is guessed
    assert masked_pairs([PHONE, "13899991234"]) == {}


# --- the admin -----------------------------------------------------------------------------------------------


@pytest.fixture
def phone_memory(acme) -> MemoryUnit:
    session = open_session_obj(acme, "liming")
    return store.do_write_memory(
        acme.tenant, session, type="user_profile", key="phone", content=f"用户手机号：{PHONE}", data={"phone": PHONE}
    ).memory


def _pages(user, memory) -> str:
    client = staff_login(user)
    pages = [
        client.get("/admin/memory/memoryunit/"),
        client.get(f"/admin/memory/memoryunit/{memory.pk}/change/"),
    ]
    assert all(page.status_code == 200 for page in pages)
    return "".join(page.content.decode() for page in pages)


def test_an_agent_without_the_permission_sees_the_phone_masked_in_the_admin(staff, phone_memory):
    """「手机号 138****1234」 (seed §4.2): staff see the whole value only with the permission to."""
    # when
    html = _pages(staff["agent_a"], phone_memory)
    # then
    assert MASKED in html
    assert PHONE not in html


def test_the_memory_event_is_masked_for_an_agent_too(staff, phone_memory, acme):
    """「手机号 138****1234」 (seed §4.2): the audit trail shows what the memory page shows."""
    # given
    from memory.models import MemoryEvent

    with tenant_scope(acme.tenant):
        event = MemoryEvent.objects.for_tenant(acme.tenant).get(memory_id=phone_memory.pk)
    client = Client()
    client.force_login(staff["agent_a"])
    # when
    html = client.get(f"/admin/memory/memoryevent/{event.pk}/change/").content.decode()
    # then
    assert MASKED in html
    assert PHONE not in html


@pytest.mark.parametrize("who", ["root", "owner_a", "agent_a_with_permission"])
def test_a_superuser_an_owner_or_a_member_with_the_permission_sees_the_whole_phone(staff, phone_memory, who):
    """「手机号 138****1234」 (seed §4.2): the store keeps the whole number, and staff who may see it do."""
    # given
    if who == "agent_a_with_permission":
        user = staff["agent_a"]
        user.user_permissions.add(Permission.objects.get(codename="view_unmasked_memoryunit"))
    else:
        user = staff[who]
    # when
    html = _pages(user, phone_memory)
    # then
    assert PHONE in html
