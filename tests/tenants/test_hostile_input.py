"""Hostile input (issue #22, item 3): every bad input answers 4xx with the error shape, never a 500, and
changes nothing stored; text that is stored is NFC with full-width letters and digits folded."""

from __future__ import annotations

import json
import unicodedata
from typing import Any
from urllib.parse import quote, urlencode

import pytest
import schemathesis
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chat.models import Batch, Tool
from config.text_input import MAX_JSON_DEPTH, InvalidJson, clean_json, clean_text, json_too_deep, loads_bounded
from conversations.models import Message
from memory.models import MemoryUnit
from tenants.models import EndUser
from tenants.rls import tenant_scope
from tests.factories import open_session

NFD_CAFE = unicodedata.normalize("NFD", "Café Zürich")
NFC_CAFE = unicodedata.normalize("NFC", "Café Zürich")
DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
BAD_CHARS = ["\x00", "\ud800", "\udfff", "\x1b", "\x07"]

ECHO_TOOL = {
    "name": "echo",
    "description": "echo",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    "url": "https://tools.example.com/echo",
}


def _counts(ctx: Any) -> dict[str, int]:
    with tenant_scope(ctx.tenant):
        return {
            model.__name__: model.objects.for_tenant(ctx.tenant).count()
            for model in (EndUser, Message, MemoryUnit, Tool, Batch)
        }


def _nested_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _post_raw(client: Any, path: str, body: str, method: str = "POST") -> Any:
    return client.generic(method, path, body.encode("utf-8", "surrogatepass"), content_type="application/json")


def _assert_refused(response: Any, code: str) -> None:
    assert 400 <= response.status_code < 500, response.content
    error = response.json()["error"]
    assert error["code"] == code, error
    assert error["message"]


@pytest.fixture
def world(acme: Any, fake_ollama: Any) -> dict[str, Any]:
    """acme with a session, a memory and a tool in place, and a client speaking for the session. (A refused
    message never reaches the turn's own transactions, so these tests need no real ones; the fake model is
    there in case a message is let through by mistake.)"""
    opened = open_session(acme, "hostile-user")
    acme.client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}", HTTP_X_SESSION_ID=opened["session_id"])
    assert acme.client.post("/api/v1/tools", ECHO_TOOL, format="json").status_code == 201
    memory = acme.client.post(
        "/api/v1/memories", {"type": "user_profile", "key": "k", "content": "kept"}, format="json"
    )
    assert memory.status_code == 201, memory.content
    return {"sid": opened["session_id"], "memory_id": memory.json()["id"]}


# --- the JSON depth limit ---------------------------------------------------------


def _json_endpoints(world: dict[str, Any]) -> list[tuple[str, str]]:
    sid = world["sid"]
    return [
        ("POST", "/api/v1/sessions"),
        ("POST", f"/api/v1/sessions/{sid}/messages"),
        ("POST", f"/api/v1/sessions/{sid}/batches"),
        ("POST", "/api/v1/tools"),
        ("POST", "/api/v1/memories"),
        ("PATCH", f"/api/v1/memories/{world['memory_id']}"),
        ("POST", "/api/v1/memories/recall"),
        ("POST", f"/api/v1/memories/{world['memory_id']}/feedback"),
    ]


@pytest.mark.parametrize("body", [DEEP_ARRAY, _nested_object(40_000), '{"data": ' + DEEP_ARRAY + "}"])
def test_json_nested_far_too_deep_is_invalid_json_on_every_endpoint(acme, world, body):
    # given
    before = _counts(acme)
    for method, path in _json_endpoints(world):
        # when
        response = _post_raw(acme.client, path, body, method)
        # then
        _assert_refused(response, "invalid_json")
    assert _counts(acme) == before


def test_memory_data_5000_deep_is_400_and_stores_nothing(acme, world):
    # given
    before = _counts(acme)
    body = '{"type": "user_profile", "content": "deep", "data": ' + _nested_object(5000) + "}"
    # when
    response = _post_raw(acme.client, "/api/v1/memories", body)
    # then
    _assert_refused(response, "invalid_json")
    assert _counts(acme) == before


def test_json_just_inside_the_depth_limit_is_accepted(acme, world):
    # given metadata whose innermost object sits at the limit (the body object is level 1)
    metadata = json.loads(_nested_object(MAX_JSON_DEPTH - 2))
    # when
    response = acme.client.post("/api/v1/sessions", {"end_user_id": "deep-ok", "metadata": metadata}, format="json")
    # then
    assert response.status_code == 201, response.content


def test_malformed_json_keeps_its_code(acme, world):
    before = _counts(acme)
    for body in ('{"end_user_id": ', '{"a": NaN}', '"unterminated [[[['):
        _assert_refused(_post_raw(acme.client, "/api/v1/sessions", body), "malformed_json")
    response = acme.client.generic("POST", "/api/v1/sessions", b"\xff\xfe{}", content_type="application/json")
    _assert_refused(response, "malformed_json")
    assert _counts(acme) == before


def test_depth_scan_ignores_brackets_inside_strings():
    assert not json_too_deep(json.dumps({"s": "[" * 1000 + '\\"{' * 1000}))
    assert json_too_deep("[" * (MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH)
    with pytest.raises(InvalidJson):
        loads_bounded(b"[" * 1_000_000)


# --- refused characters, every text field ----------------------------------------------


def _bad_bodies(world: dict[str, Any], bad: str) -> list[tuple[str, str, dict[str, Any]]]:
    sid = world["sid"]
    messages = f"/api/v1/sessions/{sid}/messages"
    return [
        ("POST", messages, {"text": f"hi{bad}there", "client_msg_id": "x1"}),
        ("POST", messages, {"text": "hi", "client_msg_id": f"id{bad}"}),
        ("POST", "/api/v1/sessions", {"end_user_id": f"u{bad}"}),
        ("POST", "/api/v1/sessions", {"end_user_id": "u2", "metadata": {"k": f"v{bad}"}}),
        ("POST", "/api/v1/sessions", {"end_user_id": "u3", "metadata": {f"k{bad}": "v"}}),
        ("POST", "/api/v1/sessions", {"end_user_id": "u4", "metadata": {"a": [{"b": f"{bad}"}]}}),
        ("POST", "/api/v1/memories", {"type": "user_profile", "content": f"c{bad}"}),
        ("POST", "/api/v1/memories", {"type": "user_profile", "content": "c", "data": {"d": f"{bad}"}}),
        ("POST", "/api/v1/memories", {"type": "user_profile", "content": "c", "data": {f"{bad}": 1}}),
        ("PATCH", f"/api/v1/memories/{world['memory_id']}", {"content": f"c{bad}"}),
        ("PATCH", f"/api/v1/memories/{world['memory_id']}", {"data": {"x": [f"{bad}"]}}),
        ("POST", "/api/v1/memories/recall", {"query": f"q{bad}"}),
        (
            "POST",
            "/api/v1/tools",
            {**ECHO_TOOL, "name": "t2", "parameters": {"type": "object", "description": f"p{bad}"}},
        ),
        ("POST", "/api/v1/tools", {**ECHO_TOOL, "name": "t3", "description": f"d{bad}"}),
        ("POST", f"/api/v1/sessions/{sid}/batches", {"tool": "echo", "items": [{"q": f"a{bad}"}]}),
        ("POST", f"/api/v1/sessions/{sid}/batches", {"tool": "echo", "items": [{f"q{bad}": "a"}]}),
    ]


@pytest.mark.parametrize("bad", BAD_CHARS, ids=["nul", "lone-high-surrogate", "lone-low-surrogate", "esc", "bel"])
def test_refused_characters_are_400_and_store_nothing(acme, world, bad):
    # given
    before = _counts(acme)
    with tenant_scope(acme.tenant):
        kept = MemoryUnit.objects.for_tenant(acme.tenant).get(pk=world["memory_id"])
    for method, path, body in _bad_bodies(world, bad):
        # when (ensure_ascii: a lone surrogate travels as its \\u escape, as a hostile client sends it)
        response = _post_raw(acme.client, path, json.dumps(body), method)
        # then
        _assert_refused(response, "invalid_text")
    assert _counts(acme) == before
    with tenant_scope(acme.tenant):
        after = MemoryUnit.objects.for_tenant(acme.tenant).get(pk=world["memory_id"])
    assert (after.content, after.data) == (kept.content, kept.data)


# --- datetimes and tool URLs ---------------------------------------------------------


@pytest.mark.parametrize(
    "as_of",
    [
        "2026-13-45",
        "2026-13-45T00:00:00Z",
        "2026-01-01T00:00+99:00",
        "0001-01-01T00:00+01:00",
        "9999-12-31T23:00-05:00",
    ],
)
def test_impossible_as_of_is_invalid_as_of(acme, world, as_of):
    before = _counts(acme)
    _assert_refused(acme.client.get("/api/v1/memories", {"as_of": as_of}), "invalid_as_of")
    response = acme.client.post("/api/v1/memories/recall", {"query": "phone", "as_of": as_of}, format="json")
    _assert_refused(response, "invalid_as_of")
    assert _counts(acme) == before


@pytest.mark.parametrize(
    "url",
    [
        "http://[::1/",
        "http://example.com:99999/",
        "http://example.com:0/",
        "http://example.com:-1/",
        "ftp://example.com/x",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "http://exa mple.com/",
        "http://example.com/\x00",
        "https:///no-host",
    ],
)
def test_bad_tool_urls_are_invalid_url(acme, world, url):
    before = _counts(acme)
    response = _post_raw(acme.client, "/api/v1/tools", json.dumps({**ECHO_TOOL, "name": "bad_url", "url": url}))
    _assert_refused(response, "invalid_url")
    assert _counts(acme) == before


def test_a_port_in_range_and_an_ipv6_host_are_fine(acme, world):
    response = acme.client.post(
        "/api/v1/tools", {**ECHO_TOOL, "name": "v6", "url": "http://[::1]:65535/hook"}, format="json"
    )
    assert response.status_code == 201, response.content


# --- normalisation ------------------------------------------------------------------


def test_nfd_memory_is_stored_nfc(acme, world):
    # given 「Café Zürich」 typed in NFD, with full-width digits
    body = {"type": "user_profile", "key": "city", "content": f"住在 {NFD_CAFE} １２３", "data": {NFD_CAFE: NFD_CAFE}}
    # when
    response = acme.client.post("/api/v1/memories", body, format="json")
    # then
    assert response.status_code == 201, response.content
    with tenant_scope(acme.tenant):
        stored = MemoryUnit.objects.for_tenant(acme.tenant).get(pk=response.json()["id"])
    assert stored.content == f"住在 {NFC_CAFE} 123"
    assert stored.data == {NFC_CAFE: NFC_CAFE}


@pytest.mark.django_db(transaction=True)  # the turn commits in transactions of its own
def test_message_text_is_stored_nfc_with_full_width_ascii_folded(acme, world, fake_ollama):
    # given
    fake_ollama.script("好的")
    text = f"订单ＡＢ１２，「{NFD_CAFE}」。"
    # when
    response = acme.client.post(f"/api/v1/sessions/{world['sid']}/messages", {"text": text}, format="json")
    # then CJK punctuation stays, letters and digits fold, accents compose
    assert response.status_code == 200, response.content
    with tenant_scope(acme.tenant):
        stored = Message.objects.for_tenant(acme.tenant).get(pk=response.json()["message_id"])
    assert stored.text == f"订单AB12，「{NFC_CAFE}」。"


def test_session_metadata_and_end_user_are_normalised(acme, world):
    response = acme.client.post(
        "/api/v1/sessions", {"end_user_id": "ｕｓｅｒ７", "metadata": {NFD_CAFE: [NFD_CAFE]}}, format="json"
    )
    assert response.status_code == 201, response.content
    described = acme.client.get(f"/api/v1/sessions/{response.json()['session_id']}").json()
    assert described["end_user_id"] == "user7"


def test_clean_text_folds_only_full_width_letters_and_digits():
    assert clean_text("ＡＺａｚ０９") == "AZaz09"
    assert clean_text("，。「」！？（）：") == "，。「」！？（）："
    assert clean_text("tab\tand\r\nnewlines") == "tab\tand\r\nnewlines"


def test_keys_that_collide_once_normalised_are_refused():
    with pytest.raises(InvalidJson):
        clean_json({NFD_CAFE: 1, NFC_CAFE: 2}, field="data")


def test_clean_json_never_recurses():
    deep: Any = "leaf"
    for _ in range(50_000):
        deep = [deep]
    with pytest.raises(InvalidJson):
        clean_json(deep, field="data")


# --- WebSocket ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_socket_refuses_deep_and_nul_frames_and_stays_usable(acme, fake_ollama):
    # given
    from config.asgi import application

    opened = await sync_to_async(open_session)(acme, "ws-hostile")
    path = f"/ws/chat/?session_id={opened['session_id']}&token={opened['token']}"
    communicator = WebsocketCommunicator(application, path, headers=[(b"host", b"testserver")])
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    before = await sync_to_async(_counts)(acme)
    frames = [
        DEEP_ARRAY,
        '{"type": "message", "text": ' + DEEP_ARRAY + "}",
        json.dumps({"type": "message", "text": "a\x00b", "client_msg_id": "w1"}),
        json.dumps({"type": "message", "text": "a\ud800b", "client_msg_id": "w2"}),
        json.dumps({"type": "message", "text": "ok", "client_msg_id": "w\x00"}),
    ]
    for frame in frames:
        # when
        await communicator.send_to(text_data=frame)
        # then
        reply = await communicator.receive_json_from(timeout=10)
        assert reply["type"] == "error"
        assert reply["code"] == "bad_frame", reply
        assert reply["retryable"] is False
    await communicator.send_json_to({"type": "ping"})
    assert await communicator.receive_json_from(timeout=10) == {"type": "pong"}
    assert await sync_to_async(_counts)(acme) == before
    await communicator.disconnect()


# --- properties -------------------------------------------------------------------------

# Arbitrary text, with the characters that used to reach PostgreSQL weighted in: NUL, lone surrogates,
# other controls, combining marks, full-width letters.
hostile_chars = st.one_of(
    st.characters(exclude_categories=()),
    st.sampled_from(["\x00", "\ud800", "\udfff", "\x1b", "\u0301", "\u0308", "Ａ", "９", "，", "「"]),
)
hostile_text = st.text(hostile_chars, max_size=40)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), hostile_text)
hostile_json = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile_text, inner, max_size=3),
    max_leaves=12,
)


def _storable(value: Any) -> None:
    """What PostgreSQL would refuse or store un-normalised must never come out of validation."""
    encoded = json.dumps(value, ensure_ascii=False).encode("utf-8")  # raises on a lone surrogate
    assert b"\x00" not in encoded
    for text in _strings(value):
        assert unicodedata.is_normalized("NFC", text)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


@settings(max_examples=100, deadline=None)
@given(content=hostile_text, data=st.dictionaries(hostile_text, hostile_json, max_size=4), query=hostile_text)
def test_memory_serializers_accept_only_storable_text(content, data, query):
    from memory.serializers import MemoryCreateIn, MemoryPatchIn, RecallIn

    for serializer in (
        MemoryCreateIn(data={"type": "user_profile", "content": content, "data": data}),
        MemoryPatchIn(data={"content": content, "data": data}),
        RecallIn(data={"query": query}),
    ):
        if serializer.is_valid():
            _storable(serializer.validated_data)
        else:
            assert serializer.errors


@settings(max_examples=100, deadline=None)
@given(text=hostile_text, client_msg_id=st.one_of(st.none(), hostile_text), end_user_id=hostile_text, meta=hostile_json)
def test_message_and_session_checks_accept_only_storable_text(text, client_msg_id, end_user_id, meta):
    from chat.serializers import BatchIn, OpenSessionIn
    from chat.sessions.messages import InvalidMessage, check_message

    try:
        checked = check_message(text, client_msg_id)
    except InvalidMessage:  # a 400 (ApiError): allowed, as long as it is not something else
        checked = None
    if checked is not None:
        _storable(list(checked))
    for serializer in (
        OpenSessionIn(data={"end_user_id": end_user_id, "metadata": {"m": meta}}),
        BatchIn(data={"tool": "echo", "items": [{"q": meta}]}),
    ):
        if serializer.is_valid():
            _storable(serializer.validated_data)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(content=hostile_text, data=hostile_json)
def test_memory_endpoint_never_answers_5xx(acme, world, content, data):
    # given
    before = _counts(acme)
    body = json.dumps({"type": "fact_reference", "content": content or "x", "data": {"d": data}})
    # when
    response = _post_raw(acme.client, "/api/v1/memories", body)
    # then
    assert response.status_code < 500, response.content
    if response.status_code >= 400:
        assert response.json()["error"]["code"]
        assert _counts(acme) == before


# --- the whole schema (schemathesis) ------------------------------------------------------


@pytest.fixture
def served_operations(acme: Any) -> list[Any]:
    """Every operation of the OpenAPI schema as ``/api/schema/`` serves it, but closing the session (which
    would leave every later example a 410)."""
    response = acme.client.get("/api/schema/?format=json")
    assert response.status_code == 200, response.content
    operations = [result.ok() for result in schemathesis.openapi.from_dict(response.json()).get_all_operations()]
    return [operation for operation in operations if not operation.path.endswith("/close")]


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_no_operation_of_the_schema_answers_5xx(acme, world, served_operations, data):
    """Schemathesis's generated requests over every operation, sent through Django's test client (its own
    pytest plugin and HTTP transport do not fit pytest-django's per-test transaction), against a real
    session: whatever comes, never a 5xx."""
    from schemathesis.core import NOT_SET

    # given a request for some operation, with the session's id wherever one is named (and often the
    # memory's), so bodies reach their validation
    case = data.draw(st.sampled_from(served_operations).flatmap(lambda operation: operation.as_strategy()))
    path = case.path
    known = {"session_id": world["sid"], "memory_id": world["memory_id"]}
    for name, value in (case.path_parameters or {}).items():
        if name in known and (name == "session_id" or data.draw(st.booleans())):
            value = known[name]
        path = path.replace("{" + name + "}", quote(str(value), safe=""))
    headers = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in (case.headers or {}).items() if k.isascii()}
    headers["HTTP_X_SESSION_ID"] = world["sid"]
    body = b"" if case.body is NOT_SET else json.dumps(case.body).encode()
    query = urlencode(case.query or {}, doseq=True)
    # when
    response = acme.client.generic(
        case.method, f"{path}?{query}" if query else path, body, content_type="application/json", **headers
    )
    # then
    assert response.status_code < 500, (case.method, path, case.body, response.content)
