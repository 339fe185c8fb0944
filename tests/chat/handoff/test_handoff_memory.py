"""After a person hands the conversation back, the AI knows what they said: the staff's turns are in its recent
history, and what they promised is conversation memory that recall finds."""

from __future__ import annotations

import pytest

from chat.handoff import state as handoff
from conversations.models import Message
from memory.models import MemoryUnit
from tenants.rls import tenant_scope
from tests.chat.handoff.kit import send, session_row, stored
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

PROMISE = "我们已为您申请补发，明天下午三点前会给您回电话确认。"


def _with_a_person_who_promises(ctx, staff_user):
    sid = open_session(ctx, "lisi")["session_id"]
    assert (
        ctx.client.post(f"/api/v1/sessions/{sid}/handoff", {"reason": "lost parcel"}, format="json").status_code == 200
    )
    assert send(ctx, sid, "我的包裹丢了").status_code == 202
    session = session_row(ctx, sid)
    handoff.do_claim(ctx.tenant, session, staff_user)
    promise = handoff.do_staff_reply(ctx.tenant, session, staff_user, PROMISE)
    assert ctx.client.post(f"/api/v1/sessions/{sid}/release").status_code == 200
    return sid, promise


def test_the_staff_promise_is_conversation_memory(acme, staff):
    # when
    sid, promise = _with_a_person_who_promises(acme, staff["agent_a"])
    # then
    with tenant_scope(acme.tenant):
        units = list(MemoryUnit.objects.for_tenant(acme.tenant).filter(source_message_id=promise.pk))
        marked = Message.objects.for_tenant(acme.tenant).get(pk=promise.pk).memory_indexed_at
    assert units
    assert any("回电话" in u.content for u in units)
    assert marked is not None
    # the end user's message written while waiting is remembered too
    waiting = next(m for m in stored(acme, sid) if m.role == Message.Role.USER)
    assert waiting.memory_indexed_at is not None


def test_handed_back_the_ai_sees_the_staff_turns_and_recalls_the_promise(acme, staff, fake_ollama):
    # given
    sid, promise = _with_a_person_who_promises(acme, staff["agent_a"])
    fake_ollama.script("客服已为您申请补发，明天下午三点前会回电话。")
    # when
    response = send(acme, sid, "你们什么时候给我回电话？")
    # then: the model was called again, with the person's words as the agent's and the promise recalled
    assert response.status_code == 200, response.content
    [request] = fake_ollama.chat_requests
    assert {"role": "assistant", "content": PROMISE} in request["messages"]
    with tenant_scope(acme.tenant):
        recalled = list(MemoryUnit.objects.for_tenant(acme.tenant).filter(pk__in=response.json()["recalled"]))
    assert any(m.source_message_id == promise.pk or "回电话" in m.content for m in recalled)
