"""「忘掉我的地址」 / "forget my phone number" said in chat: the matching memories are forgotten at once, with the
end user as the actor, and the reply says what was forgotten, in the message's language, without the model."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from config.asgi import application
from conversations.models import ChatSession, Message
from memory.end_user.forget import parse_forget_request
from memory.models import MemoryEvent, MemoryUnit
from memory.recall.pipeline import recall
from memory.store.read import valid_q
from tenants.rls import tenant_scope
from tests.factories import TenantCtx, open_session

# A turn runs its database steps on the thread pool: real transactions.
pytestmark = pytest.mark.django_db(transaction=True)


def _say(ctx: TenantCtx, session_id: str, text: str) -> dict[str, Any]:
    response = ctx.client.post(f"/api/v1/sessions/{session_id}/messages", {"text": text}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _current(ctx: TenantCtx, containing: str) -> list[MemoryUnit]:
    """The tenant's memories valid now whose content contains ``containing``."""
    with tenant_scope(ctx.tenant):
        memories = MemoryUnit.objects.for_tenant(ctx.tenant).filter(valid_q(timezone.now()))
        return list(memories.filter(content__contains=containing))


def _recalled(ctx: TenantCtx, session_id: str, query: str) -> str:
    with tenant_scope(ctx.tenant):
        session = ChatSession.objects.for_tenant(ctx.tenant).get(pk=session_id)
    return " ".join(hit.memory.content for hit in recall(ctx.tenant, session, query, k=10, record=False).hits)


def _expired_by_end_user(ctx: TenantCtx, memory: MemoryUnit) -> bool:
    with tenant_scope(ctx.tenant):
        events = MemoryEvent.objects.for_tenant(ctx.tenant).filter(memory_id=memory.pk)
        return events.filter(kind="expire", actor="end_user").exists()


def test_forget_my_address_in_chinese_forgets_it_and_the_reply_names_it(acme, fake_ollama):
    # given alice stated her address, and memdesk remembers it (the fact and the sentence)
    fake_ollama.script("好的，地址已记下。")
    sid = open_session(acme, "alice")["session_id"]
    _say(acme, sid, "我的地址是北京市朝阳区建国路88号")
    remembered = _current(acme, "建国路88号")
    assert {m.key for m in remembered} >= {"address"}
    assert "建国路" in _recalled(acme, sid, "我的地址是什么")
    # when she asks memdesk to forget it
    turn = _say(acme, sid, "忘掉我的地址")
    # then the reply says the address is forgotten (naming it, not repeating it), without asking the model
    assert turn["reply"] == "好的，我已经忘掉了您的地址，以后不会再用到。需要时请再告诉我。"
    assert turn["usage"] == {"prompt_tokens": 0, "completion_tokens": 0}
    assert len(fake_ollama.chat_requests) == 1
    # and the address is no longer remembered nor recalled; she is the one who forgot it
    assert _current(acme, "建国路") == []
    assert "建国路" not in _recalled(acme, sid, "我的地址是什么")
    assert all(_expired_by_end_user(acme, m) for m in remembered)
    # and the reply is stored as the turn's reply; the request itself is not remembered
    with tenant_scope(acme.tenant):
        stored = list(Message.objects.for_tenant(acme.tenant).filter(session_id=sid).order_by("seq"))
    assert [(m.role, m.text) for m in stored[-2:]] == [("user", "忘掉我的地址"), ("assistant", turn["reply"])]
    assert _current(acme, "忘掉我的地址") == []


def test_forget_my_phone_number_in_english_forgets_it(globex, fake_ollama):
    # given carol stated her phone number
    fake_ollama.script("Thanks, noted.")
    sid = open_session(globex, "carol")["session_id"]
    _say(globex, sid, "My phone number is 415-555-0132")
    remembered = _current(globex, "415-555-0132")
    assert any(m.key == "phone" for m in remembered)
    # when
    turn = _say(globex, sid, "Please forget my phone number.")
    # then
    assert turn["reply"].startswith("Done: I've forgotten your phone number and won't use it again.")
    assert len(fake_ollama.chat_requests) == 1
    assert _current(globex, "415-555-0132") == []
    assert "0132" not in _recalled(globex, sid, "what is my phone number")
    assert all(_expired_by_end_user(globex, m) for m in remembered)


def test_nothing_to_forget_is_said_plainly_and_nothing_changes(acme, fake_ollama):
    # given alice's address, and no birthday on record
    fake_ollama.script("好的。")
    sid = open_session(acme, "alice")["session_id"]
    _say(acme, sid, "我的地址是北京市朝阳区建国路88号")
    before = {m.pk for m in _current(acme, "")}
    # when she asks to forget her birthday
    turn = _say(acme, sid, "请忘掉我的生日")
    # then she is told there was none, and her address is still remembered
    assert turn["reply"] == "我这里没有记着您的生日，没有需要忘掉的。"
    assert len(fake_ollama.chat_requests) == 1
    assert {m.pk for m in _current(acme, "")} >= before
    assert _current(acme, "建国路88号")


async def test_the_reply_streams_over_the_socket_like_any_reply(acme, fake_ollama):
    # given a socket to alice's session
    opened = await sync_to_async(open_session)(acme, "alice")
    url = f"/ws/chat/?session_id={opened['session_id']}&token={opened['token']}"
    communicator = WebsocketCommunicator(application, url, headers=[(b"host", b"testserver")])
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    # when she asks, in English, to forget her e-mail address (there is none)
    await communicator.send_json_to({"type": "message", "text": "forget my email address", "client_msg_id": "f1"})
    frames = []
    while not frames or frames[-1]["type"] not in ("done", "error"):
        frames.append(await communicator.receive_json_from(timeout=20))
    await communicator.disconnect()
    # then: ack, the reply as a delta, done with the same words; the model was never called
    kinds = [f["type"] for f in frames]
    assert kinds == ["ack", "delta", "done"], frames
    expected = "I don't have your e-mail address on record, so there was nothing to forget."
    assert frames[1]["text"] == frames[2]["text"] == expected
    assert frames[1]["reply_id"] == frames[2]["reply_id"]
    assert fake_ollama.chat_requests == []


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("忘掉我的地址", ["address"]),
        ("请把我的手机号和邮箱删掉吧", ["phone", "email"]),
        ("别再记着我的生日了", ["birthday"]),
        ("可以忘掉我的名字吗？", ["name"]),
        ("忘掉关于我的一切", ["everything"]),
        ("forget my phone number", ["phone"]),
        ("Could you delete my email address and my order number?", ["email", "order"]),
        ("please don't remember my birthday", ["birthday"]),
        ("forget everything about me", ["everything"]),
        # not requests: the end user forgot something, asks whether we did, changes a fact, or cancels an order
        ("我忘了我的地址", None),
        ("你忘了我的地址吗？", None),
        ("别忘了我的地址", None),
        ("I forgot my password", None),
        ("Don't forget my address", None),
        ("forget my address, ship it to 5 Main St instead", None),
        ("删除我的订单", None),
        ("remove my order", None),
        ("forget it", None),
    ],
)
def test_what_is_a_forget_request(text, kinds):
    request = parse_forget_request(text)
    assert (None if request is None else [k.name for k in request.kinds]) == kinds
