"""Whose fact is it, through the chat turn: a number, address or name the agent gives about a venue, a
company, a courier or another person is never stored as the customer's own, and the next prompt's anchor
shows only the customer's facts. The agent's reply is the fake model's answer; every turn goes through
``POST /api/v1/sessions/<id>/messages``."""

from __future__ import annotations

from typing import Any

import pytest

from memory.text.masking import mask_text
from testkit.fake_ollama import Reply
from tests.factories import TenantCtx, open_session

pytestmark = pytest.mark.django_db(transaction=True)


def _talk(ctx: TenantCtx, fake: Any, sid: str, user: str, agent: str = "好的。") -> dict[str, Any]:
    fake.script(Reply(text=agent))
    response = ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": user}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _keyed(ctx: TenantCtx, key: str) -> list[str]:
    """The contents of the live keyed memories ``key`` of the tenant's end users."""
    from django.utils import timezone

    from memory.models import MemoryUnit
    from tenants.rls import tenant_scope

    with tenant_scope(ctx.tenant):
        rows = MemoryUnit.objects.for_tenant(ctx.tenant).filter(
            key=key, superseded_at__isnull=True, expires_at__gt=timezone.now()
        )
        return [m.content for m in rows]


def _anchor(fake: Any) -> str:
    """The anchor line of the last prompt the model saw."""
    return fake.chat_requests[-1]["messages"][0]["content"].split("\n", 1)[0]


@pytest.mark.parametrize(
    ("ctx_name", "user", "agent", "foreign"),
    [
        ("acme", "故宫怎么预约？", "您可以打010-85007421这个号码咨询景区预约。", "85007421"),
        ("acme", "快递一直没到", "快递员的电话是13800138000，您可以直接联系他。", "13800138000"),
        ("acme", "你们客服电话多少", "我们的客服热线是 400-820-8820，工作日 9 点到 18 点。", "8208820"),
        ("acme", "门店在哪里？", "门店地址在北京市朝阳区三里屯路19号，欢迎您来。", "三里屯路19号"),
        ("globex", "How do I reach the hotel?", "You can call the hotel at +44 20 7946 0958.", "7946"),
        ("globex", "Where is your store?", "Our store is at 221B Baker Street, London.", "Baker Street"),
    ],
)
def test_a_number_or_address_the_agent_gives_about_someone_else_is_not_the_customers(
    request, fake_ollama, ctx_name, user, agent, foreign
):
    ctx = request.getfixturevalue(ctx_name)
    sid = open_session(ctx, "u1")["session_id"]
    _talk(ctx, fake_ollama, sid, user, agent)
    assert not any(
        foreign in c.replace(" ", "").replace("-", "") for c in _keyed(ctx, "phone") + _keyed(ctx, "address")
    )
    _talk(ctx, fake_ollama, sid, "好的谢谢" if ctx_name == "acme" else "thanks")
    assert foreign not in _anchor(fake_ollama).replace(" ", "").replace("-", "")


def test_the_customers_own_phone_stays_when_the_agent_then_gives_a_hotline(acme, fake_ollama):
    sid = open_session(acme, "u1")["session_id"]
    _talk(acme, fake_ollama, sid, "我的手机号是13912345678", "好的，您的手机号13912345678已登记。")
    _talk(acme, fake_ollama, sid, "售后怎么联系？", "售后请拨打客服热线 400-100-5678，或者到店咨询。")
    assert _keyed(acme, "phone") == ["用户手机号：13912345678"]
    _talk(acme, fake_ollama, sid, "好的")
    anchor = _anchor(fake_ollama)
    assert "139****5678" in anchor  # masked (seed §4.2: 「手机号 138****1234」)
    assert "4001005678" not in anchor.replace("-", "")


@pytest.mark.parametrize(
    ("ctx_name", "own", "relative"),
    [
        ("acme", "我的手机号是13912345678", "我老婆的电话是13698765432，有事也可以打给她"),
        ("globex", "My number is +44 7700 900123", "My wife's number is +44 7700 900456 if I don't answer"),
    ],
)
def test_a_relatives_number_never_overwrites_the_customers(request, fake_ollama, ctx_name, own, relative):
    ctx = request.getfixturevalue(ctx_name)
    sid = open_session(ctx, "u1")["session_id"]
    _talk(ctx, fake_ollama, sid, own, "OK")
    _talk(ctx, fake_ollama, sid, relative, "OK")
    phones = _keyed(ctx, "phone")
    assert len(phones) == 1
    own_digits = "".join(ch for ch in own if ch.isdigit())[-6:]
    assert own_digits in phones[0].replace(" ", "")


@pytest.mark.parametrize(
    ("ctx_name", "own", "disown"),
    [
        ("acme", "我的手机号是13912345678", "这不是我的电话"),
        ("globex", "My number is +44 7700 900123", "that's not my number"),
    ],
)
def test_the_customer_can_say_a_stored_fact_is_not_theirs(request, fake_ollama, ctx_name, own, disown):
    from memory.models import MemoryEvent
    from tenants.rls import tenant_scope

    ctx = request.getfixturevalue(ctx_name)
    sid = open_session(ctx, "u1")["session_id"]
    _talk(ctx, fake_ollama, sid, own, "OK")
    assert len(_keyed(ctx, "phone")) == 1
    _talk(ctx, fake_ollama, sid, disown, "OK")
    # the memory is expired, by the end user, and the reply is told to acknowledge it
    assert _keyed(ctx, "phone") == []
    with tenant_scope(ctx.tenant):
        event = MemoryEvent.objects.for_tenant(ctx.tenant).filter(kind="expire").get()
    assert event.actor == "end_user"
    system = fake_ollama.chat_requests[-1]["messages"][0]["content"]
    assert ("已从记忆中删除" in system) or ("removed from memory" in system)
    # the next prompt's anchor no longer carries it
    _talk(ctx, fake_ollama, sid, "好的" if ctx_name == "acme" else "ok")
    assert "900123" not in _anchor(fake_ollama).replace(" ", "")
    assert "139****5678" not in _anchor(fake_ollama)


@pytest.mark.parametrize(
    ("ctx_name", "own", "company"),
    [
        ("acme", "我的地址是杭州市西湖区文三路88号", "这次寄到我公司吧，地址是上海市浦东新区世纪大道100号"),
        (
            "globex",
            "I live at 12 Elm Street, Springfield",
            "Ship this one to my office address: 1 Main Road, Leeds",
        ),
    ],
)
def test_a_company_address_never_replaces_the_customers_own(request, fake_ollama, ctx_name, own, company):
    ctx = request.getfixturevalue(ctx_name)
    sid = open_session(ctx, "u1")["session_id"]
    _talk(ctx, fake_ollama, sid, own, "OK")
    _talk(ctx, fake_ollama, sid, company, "OK")
    [address] = _keyed(ctx, "address")
    assert ("文三路88号" in address) or ("Elm Street" in address)
    assert len(_keyed(ctx, "work_address")) == 1
    _talk(ctx, fake_ollama, sid, "好的" if ctx_name == "acme" else "ok")
    anchor = _anchor(fake_ollama)
    assert "世纪大道" not in anchor
    assert "Main Road" not in anchor


def test_a_quoted_example_number_is_not_the_customers(acme, fake_ollama):
    sid = open_session(acme, "u1")["session_id"]
    _talk(acme, fake_ollama, sid, "手机号要怎么填？", "请填写 11 位手机号，格式如“13800000000”，不要加区号。")
    assert _keyed(acme, "phone") == []


@pytest.mark.parametrize(
    ("ctx_name", "first", "correction", "new"),
    [
        ("acme", "我的手机号是13912345678", "不对，我刚才说错了，我的号码是13987654321", "13987654321"),
        ("globex", "My email is ann@example.com", "No, my email is ann.lee@example.com", "ann.lee@example.com"),
    ],
)
def test_a_correction_replaces_the_customers_fact(request, fake_ollama, ctx_name, first, correction, new):
    ctx = request.getfixturevalue(ctx_name)
    key = "phone" if ctx_name == "acme" else "email"
    sid = open_session(ctx, "u1")["session_id"]
    _talk(ctx, fake_ollama, sid, first, "OK")
    _talk(ctx, fake_ollama, sid, correction, "OK")
    [current] = _keyed(ctx, key)
    assert new in current
    _talk(ctx, fake_ollama, sid, "好的" if ctx_name == "acme" else "ok")
    assert mask_text(new) in _anchor(fake_ollama)  # the anchor shows it masked (seed §4.2: 「手机号 138****1234」)
