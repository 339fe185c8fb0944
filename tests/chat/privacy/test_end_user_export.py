"""GET /api/v1/end-users/<end_user_id>/export and ``manage.py export_end_user``: everything of one end user —
sessions with their messages, every version of their memories with the audit trail, feedback, tool calls —
and nothing of anyone else's."""

from __future__ import annotations

import asyncio
import json
import warnings

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.test import AsyncClient

from chat.tools import context as context_mod
from chat.tools.call import ToolOutcome
from conversations.access import resolve_session
from conversations.models import Message
from memory.models import MemoryUnit
from memory.store import feedback
from tenants.rls import tenant_scope
from tests.factories import open_session, turn_steps, write_memory

pytestmark = pytest.mark.django_db

OLD_PHONE, NEW_PHONE = "13912345678", "13800001111"


def _export(ctx, end_user_id="alice"):
    return ctx.client.get(f"/api/v1/end-users/{end_user_id}/export")


def _document(response):
    assert response.status_code == 200, response.content
    assert response.streaming
    return json.loads(b"".join(response.streaming_content))


def _session(ctx, end_user_id):
    return resolve_session(ctx.tenant, open_session(ctx, end_user_id)["session_id"])


def _tool_call(ctx, session, *, arguments, result):
    """A tool call recorded as a turn records it: the execution context, the audit message, the memory."""
    turn_steps(ctx, session, "帮我查一下订单", "好的，我查一下。")
    with tenant_scope(ctx.tenant):
        message = Message.objects.for_tenant(ctx.tenant).filter(session=session, role="user").order_by("-seq").first()
        started = context_mod.do_start_tool_call(ctx.tenant, session, name="lookup_order", arguments=arguments)
        context_mod.do_finish_tool_call(
            ctx.tenant, session, message, name="lookup_order", arguments=arguments,
            outcome=ToolOutcome(result=result, metric="ok", status=200), expected_version=started.version, round_no=1,
        )  # fmt: skip


@pytest.fixture
def alice(acme):
    """acme's end user alice: two turns (a phone number, then a new one), a tool call, a misleading memory."""
    session = _session(acme, "alice")
    turn_steps(acme, session, f"我的手机号是 {OLD_PHONE}", f"好的，已记录您的手机号 {OLD_PHONE}。")
    turn_steps(acme, session, f"我换号了，新号是 {NEW_PHONE}", f"好的，已更新为 {NEW_PHONE}。")
    _tool_call(acme, session, arguments={"order_id": "A-1001"}, result={"order_id": "A-1001", "status": "shipped"})
    with tenant_scope(acme.tenant):
        misled = write_memory(acme, session, "alice prefers parcel lockers", key="delivery_pref", type="user_profile")
        feedback.do_feedback(acme.tenant, misled, "misled")
    return session


@pytest.fixture
def others(acme, globex):
    """Someone else everywhere: bob at acme, and globex's own alice (the same id, another tenant's customer)."""
    bob = _session(acme, "bob")
    turn_steps(acme, bob, "bob's secret order BOB-777", "noted, BOB-777")
    globex_alice = _session(globex, "alice")
    turn_steps(globex, globex_alice, "globex alice lives at 1 Elm Street", "Noted: 1 Elm Street.")


def test_the_export_holds_the_sessions_and_their_messages(acme, alice, others):
    # when
    document = _document(_export(acme))
    # then
    assert document["schema_version"] == 1
    assert document["end_user_id"] == "alice"
    [session] = document["sessions"]
    assert session["session_id"] == str(alice.pk)
    texts = [(m["role"], m["text"]) for m in session["messages"]]
    assert ("user", f"我的手机号是 {OLD_PHONE}") in texts
    assert ("assistant", f"好的，已更新为 {NEW_PHONE}。") in texts
    assert session["execution_context"]["current_tool"] == "lookup_order"


def test_the_export_holds_every_version_of_a_memory_and_its_history(acme, alice, others):
    # when
    document = _document(_export(acme))
    # then: the old phone number is there, marked as replaced by the new one
    phones = {m["content"]: m for m in document["memories"] if m["key"] == "phone"}
    old = next(m for content, m in phones.items() if OLD_PHONE in content)
    new = next(m for content, m in phones.items() if NEW_PHONE in content)
    assert old["superseded_by"] == new["id"]
    assert old["superseded_at"] is not None
    assert new["superseded_at"] is None
    kinds = {(e["memory_id"], e["kind"]) for e in document["memory_events"]}
    assert (old["id"], "create") in kinds
    assert (old["id"], "replace") in kinds or (new["id"], "replace") in kinds


def test_the_export_holds_feedback_and_tool_calls(acme, alice, others):
    # when
    document = _document(_export(acme))
    # then
    pref = next(m for m in document["memories"] if m["key"] == "delivery_pref")
    assert pref["feedback_counts"]["misled"] == 1
    assert {"memory_id": pref["id"], "event": "misled"}.items() <= next(
        f for f in document["feedback"] if f["memory_id"] == pref["id"]
    ).items()
    [call] = document["tool_calls"]
    assert call["tool"] == "lookup_order"
    assert call["arguments"] == {"order_id": "A-1001"}
    assert call["result"] == {"order_id": "A-1001", "status": "shipped"}
    assert call["session_id"] == str(alice.pk)
    tool_memory = next(m for m in document["memories"] if m["type"] == "tool_result")
    assert "shipped" in tool_memory["content"]


def test_nobody_elses_data_is_in_the_export(acme, alice, others):
    # when
    raw = b"".join(_export(acme).streaming_content).decode()
    # then: neither acme's bob nor globex's customer who is also called alice
    assert "BOB-777" not in raw
    assert "Elm Street" not in raw
    with tenant_scope(acme.tenant):
        acme_alice_ids = {str(pk) for pk in MemoryUnit.objects.for_tenant(acme.tenant).values_list("pk", flat=True)}
    assert {m["id"] for m in json.loads(raw)["memories"]} < acme_alice_ids


def test_another_tenant_sees_only_its_own_end_user_of_that_id(globex, alice, others):
    # when: globex asks for its own alice
    document = _document(_export(globex))
    # then
    raw = json.dumps(document, ensure_ascii=False)
    assert "Elm Street" in raw
    assert OLD_PHONE not in raw
    assert "lookup_order" not in raw


def test_an_unknown_end_user_is_404(acme, globex, others):
    # given: "bob" exists, but at acme only
    # when
    response = _export(globex, "bob")
    # then
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "end_user_not_found", "message": "No such end user."}}


def test_without_an_api_key_it_is_401(anon_client, alice):
    # when
    response = anon_client.get("/api/v1/end-users/alice/export")
    # then
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_required"


def test_the_command_writes_the_same_document(acme, alice, others, tmp_path):
    # given
    target = tmp_path / "alice.json"
    from_api = _document(_export(acme))
    # when
    call_command("export_end_user", "acme", "alice", output=str(target))
    # then: the same document, but for the moment it was made
    from_command = json.loads(target.read_text(encoding="utf-8"))
    assert from_command.pop("exported_at")
    assert from_api.pop("exported_at")
    assert from_command == from_api


def test_under_asgi_the_export_is_streamed_as_it_is_read(acme, alice):
    # given
    client = AsyncClient()

    async def fetch():
        response = await client.get(
            "/api/v1/end-users/alice/export", headers={"Authorization": f"Bearer {acme.api_key}"}
        )
        return response, b"".join([chunk async for chunk in response.streaming_content])

    # when
    response, body = async_to_sync(fetch)()
    # then: an async iterator, so Django does not read the whole document before sending a byte
    assert response.status_code == 200
    assert response.is_async
    assert json.loads(body)["sessions"][0]["session_id"] == str(alice.pk)


@pytest.mark.django_db(transaction=True)
def test_through_the_asgi_handler_the_document_arrives_in_pieces(acme, alice, settings):
    # given: the server's own ASGI handler, and chunks small enough that the document needs several
    from django.core.asgi import get_asgi_application

    from chat.privacy import rights as end_users

    settings.DEBUG = False
    sent = []
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": "/api/v1/end-users/alice/export", "raw_path": b"/api/v1/end-users/alice/export", "query_string": b"",
        "headers": [(b"host", b"testserver"), (b"authorization", f"Bearer {acme.api_key}".encode())],
        "client": ("127.0.0.1", 5000), "server": ("testserver", 80),
    }  # fmt: skip

    requests = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive():
        if requests:
            return requests.pop()
        await asyncio.Event().wait()  # the client stays connected

    async def send(message):
        sent.append(message)

    # when
    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        patch.setattr(end_users, "CHUNK_CHARS", 256)
        async_to_sync(get_asgi_application())(scope, receive, send)
    # then: sent piece by piece, never read whole first (Django warns when it must read a sync iterator whole)
    assert not [w for w in warned if "must consume synchronous iterators" in str(w.message)]
    assert sent[0]["status"] == 200
    bodies = [m["body"] for m in sent[1:] if m.get("body")]
    assert len(bodies) > 3
    assert json.loads(b"".join(bodies))["sessions"][0]["session_id"] == str(alice.pk)
