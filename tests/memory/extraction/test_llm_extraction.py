"""Ollama-assisted extraction (memory/extraction/model.py): off by default,
schema-constrained, strictly validated, never a secret sent, never a failed turn.

The fake Ollama is a real HTTP server; the database is the real PostgreSQL."""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from chat.llm import structured_answer
from config.env import envbool
from conversations.models import Message
from memory.extraction.model import ALLOWED_KEYS, KEY_TYPES, ModelAnswer, answer_schema
from memory.extraction.run import extract_and_store
from memory.models import MemoryEvent, MemoryType, MemoryUnit
from memory.store import write as store
from tenants.rls import tenant_scope
from testkit.fake_ollama import Reply
from tests.factories import open_session, open_session_obj

# The dictionary tags 「国贸」 as an abbreviation (j), so the rules find the phone but not the place.
TEXT = "我在国贸那家店买的，手机号 13912345678，密码是 Abc12345，麻烦帮我查一下"
PLACE = {"key": "place", "type": "session_state", "content": "用户提到的地点：国贸", "value": "国贸"}


@pytest.fixture
def session(acme: Any) -> Any:
    return open_session_obj(acme, "alice")


@pytest.fixture
def enabled(acme: Any) -> Any:
    acme.tenant.settings = {**acme.tenant.settings, "llm_extraction": True}
    acme.tenant.save(update_fields=["settings"])
    return acme


def _message(ctx: Any, session: Any, text: str = TEXT, role: str = Message.Role.USER, seq: int = 1) -> Message:
    with tenant_scope(ctx.tenant):
        return Message.objects.for_tenant(ctx.tenant).create(
            tenant=ctx.tenant, session=session, role=role, text=text, seq=seq
        )


def _live(ctx: Any) -> dict[str, MemoryUnit]:
    with tenant_scope(ctx.tenant):
        rows = MemoryUnit.objects.for_tenant(ctx.tenant).filter(superseded_at__isnull=True)
        return {row.key: row for row in rows}


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_disabled_by_default_no_request_reaches_the_model(acme, session, fake_ollama):
    # given a tenant with default settings and the deployment default (off)
    message = _message(acme, session)

    # when
    result = extract_and_store(acme.tenant, session, message, ask_model=structured_answer)

    # then the rule facts are stored and the fake saw nothing at all
    assert fake_ollama.requests == []
    assert set(_live(acme)) == {"phone"}
    assert [fact.key for fact in result.facts] == ["phone"]


def test_valid_answer_is_stored_as_a_model_extracted_fact(enabled, session, fake_ollama):
    # given
    fake_ollama.script(Reply.content({"facts": [PLACE]}))
    message = _message(enabled, session)

    # when
    result = extract_and_store(enabled.tenant, session, message, ask_model=structured_answer)

    # then the place is stored beside the rule fact, linked to its message, marked as the model's
    live = _live(enabled)
    assert set(live) == {"phone", "place"}
    place = live["place"]
    assert place.type == MemoryType.SESSION_STATE
    assert place.session_id == session.pk
    assert place.content == "用户提到的地点：国贸"
    assert place.source_message_id == message.pk
    assert place.source_role == "user"
    assert place.data == {"place": "国贸", "extracted_by": {"method": "llm", "model": "qwen2.5:7b"}}
    assert "phone" not in result.changed_keys
    with tenant_scope(enabled.tenant):
        kinds = list(MemoryEvent.objects.for_tenant(enabled.tenant).filter(memory_id=place.pk).values_list("kind"))
    assert kinds == [("create",)]
    assert "extracted_by" not in live["phone"].data


def test_request_is_schema_constrained_and_carries_no_secret(enabled, session, fake_ollama):
    # given
    fake_ollama.script(Reply.content({"facts": []}))
    message = _message(enabled, session)

    # when
    extract_and_store(enabled.tenant, session, message, ask_model=structured_answer)

    # then one non-streaming request, the chat's own num_ctx, the schema as `format`
    [body] = fake_ollama.chat_requests
    assert body["stream"] is False
    assert body["options"]["num_ctx"] == 32768
    assert body["format"] == answer_schema(["name", "address", "product", "organization", "place"])
    prompt = "\n".join(m["content"] for m in body["messages"])
    assert "Abc12345" not in prompt
    assert "[REDACTED:password]" in prompt
    assert "13912345678" in prompt  # a rule fact already found, so the model need not repeat it


def test_the_schema_and_the_validator_agree_on_keys_and_types():
    schema = answer_schema()
    item = schema["properties"]["facts"]["items"]

    assert item["properties"]["key"]["enum"] == list(ALLOWED_KEYS)
    assert set(item["properties"]["type"]["enum"]) == set(KEY_TYPES.values()) <= set(MemoryType.values)
    assert item["properties"]["content"]["maxLength"] == 150
    assert ModelAnswer.model_validate({"facts": [PLACE]}).facts[0].value == "国贸"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        pytest.param("好的，用户提到了国贸。", "not_json", id="not-json"),
        pytest.param('{"facts": [', "not_json", id="truncated-json"),
        pytest.param({"place": "国贸"}, "schema", id="wrong-shape"),
        pytest.param({"facts": [{"key": "place", "content": "国贸"}]}, "schema", id="missing-fields"),
        pytest.param({"facts": [{**PLACE, "confidence": 0.9}]}, "schema", id="extra-field"),
        pytest.param({"facts": [{**PLACE, "key": "hobby"}]}, "schema", id="unknown-key"),
        pytest.param({"facts": [{**PLACE, "type": "preference"}]}, "schema", id="unknown-type"),
        pytest.param({"facts": [{**PLACE, "type": "user_profile"}]}, "not session_state", id="type-not-the-keys"),
        pytest.param({"facts": [{**PLACE, "content": "国贸" + "很" * 149}]}, "string_too_long", id="content-151"),
        pytest.param(
            {"facts": [{**PLACE, "content": "用户提到的地点：三里屯", "value": "三里屯"}]},
            "hallucinated",
            id="hallucinated-value",
        ),
        pytest.param({"facts": [{**PLACE, "content": "用户在一家店买的"}]}, "does not state", id="content-lacks-value"),
        pytest.param(
            {"facts": [{**PLACE, "content": "用户在国贸，订单号 20240001"}]}, "number", id="content-invents-a-number"
        ),
        pytest.param(
            {"facts": [{**PLACE, "key": "name", "type": "user_profile", "value": "[REDACTED:password]"}]},
            "redacted",
            id="placeholder-value",
        ),
        pytest.param({"facts": [{**PLACE, "value": 42}]}, "schema", id="value-not-a-string"),
    ],
)
def test_invalid_answer_is_rejected_logged_and_nothing_of_it_stored(
    enabled, session, fake_ollama, caplog, answer, reason
):
    # given
    fake_ollama.script(Reply.content(answer))
    message = _message(enabled, session)

    # when
    with caplog.at_level(logging.WARNING, logger="memory.extraction.model"):
        result = extract_and_store(enabled.tenant, session, message, ask_model=structured_answer)

    # then the answer is dropped whole, the rule fact is stored, the log says why and quotes nothing
    assert len(fake_ollama.chat_requests) == 1
    assert set(_live(enabled)) == {"phone"}
    assert [fact.key for fact in result.facts] == ["phone"]
    [record] = [r for r in caplog.records if r.name == "memory.extraction.model"]
    assert record.levelno == logging.WARNING
    assert "rejected" in record.getMessage()
    assert reason in record.getMessage()
    for secret_or_text in ("国贸", "13912345678", "Abc12345", "三里屯"):
        assert secret_or_text not in record.getMessage()


def test_one_bad_fact_rejects_the_whole_answer(enabled, session, fake_ollama):
    # given a valid fact next to a hallucinated one
    hallucinated = {"key": "organization", "type": "fact_reference", "content": "用户提到：京东", "value": "京东"}
    fake_ollama.script(Reply.content({"facts": [PLACE, hallucinated]}))

    # when
    extract_and_store(enabled.tenant, session, _message(enabled, session), ask_model=structured_answer)

    # then
    assert set(_live(enabled)) == {"phone"}


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(Reply(status=500), id="http-500"),
        pytest.param(Reply(status=404, error='model "qwen2.5:7b" not found'), id="model-missing"),
        pytest.param(Reply(hang=True), id="timeout"),
    ],
)
def test_model_failure_never_fails_the_turn(enabled, session, fake_ollama, settings, caplog, failure):
    # given a model that fails (the timeout cut short for the test)
    settings.OLLAMA_TIMEOUT_S = 0.5
    fake_ollama.script(failure)

    # when
    with caplog.at_level(logging.WARNING, logger="memory.extraction.model"):
        extract_and_store(enabled.tenant, session, _message(enabled, session), ask_model=structured_answer)

    # then the rule facts are stored and the failure is logged
    assert set(_live(enabled)) == {"phone"}
    assert any("skipped" in r.getMessage() for r in caplog.records if r.name == "memory.extraction.model")


def test_model_host_down_still_stores_the_rule_facts(enabled, session, settings, caplog):
    # given nothing listening at OLLAMA_HOST
    settings.OLLAMA_HOST = f"http://127.0.0.1:{_closed_port()}"
    settings.OLLAMA_TIMEOUT_S = 1.0

    # when
    with caplog.at_level(logging.WARNING, logger="memory.extraction.model"):
        result = extract_and_store(enabled.tenant, session, _message(enabled, session), ask_model=structured_answer)

    # then
    assert set(_live(enabled)) == {"phone"}
    assert [outcome.outcome for outcome in result.written] == ["created"]
    assert any("llm_unavailable" in r.getMessage() for r in caplog.records)


def test_deployment_switch_enables_it_and_a_tenant_can_opt_out(acme, globex, session, fake_ollama, settings):
    # given the deployment-wide switch on, and globex opting out
    settings.MEMDESK_LLM_EXTRACTION = True
    globex.tenant.settings = {**globex.tenant.settings, "llm_extraction": False}
    globex.tenant.save(update_fields=["settings"])
    globex_session = open_session_obj(globex, "bob")
    fake_ollama.script(Reply.content({"facts": [PLACE]}))

    # when
    extract_and_store(acme.tenant, session, _message(acme, session), ask_model=structured_answer)
    extract_and_store(globex.tenant, globex_session, _message(globex, globex_session), ask_model=structured_answer)

    # then only acme's message went to the model
    assert len(fake_ollama.chat_requests) == 1
    assert "place" in _live(acme)
    assert "place" not in _live(globex)


def test_agent_messages_are_not_sent(enabled, session, fake_ollama):
    # given
    reply = _message(enabled, session, text="您好，国贸店的快递今天到。", role=Message.Role.ASSISTANT)

    # when
    extract_and_store(enabled.tenant, session, reply, ask_model=structured_answer)

    # then
    assert fake_ollama.requests == []


def test_model_never_replaces_a_live_memory(enabled, session, fake_ollama, caplog):
    # given alice's name already stored by the rules
    store.do_write_memory(
        enabled.tenant, session, type="user_profile", key="name", content="用户姓名：张伟", data={"name": "张伟"}
    )
    fake_ollama.script(
        Reply.content(
            {"facts": [{"key": "name", "type": "user_profile", "content": "用户姓名：王芳", "value": "王芳"}]}
        )
    )

    # when the model is asked, and answers for the key anyway
    with caplog.at_level(logging.WARNING, logger="memory.extraction.model"):
        extract_and_store(
            enabled.tenant,
            session,
            _message(enabled, session, text="我帮我妈妈王芳问一下国贸店的事"),
            ask_model=structured_answer,
        )

    # then the name was not asked for, and the answer is rejected
    [body] = fake_ollama.chat_requests
    assert "name" not in body["format"]["properties"]["facts"]["items"]["properties"]["key"]["enum"]
    assert _live(enabled)["name"].content == "用户姓名：张伟"
    assert any("was not asked for" in r.getMessage() for r in caplog.records)


def test_env_switch_is_parsed_strictly(monkeypatch):
    monkeypatch.setenv("MEMDESK_LLM_EXTRACTION", "maybe")
    with pytest.raises(ImproperlyConfigured, match="MEMDESK_LLM_EXTRACTION"):
        envbool("MEMDESK_LLM_EXTRACTION", False)

    monkeypatch.setenv("MEMDESK_LLM_EXTRACTION", "1")
    assert envbool("MEMDESK_LLM_EXTRACTION", False) is True


@pytest.mark.django_db(transaction=True)
def test_a_rest_turn_runs_the_model_extraction_before_the_reply(acme, fake_ollama):
    # given an opted-in tenant, and a model that answers the schema request with JSON
    acme.tenant.settings = {**acme.tenant.settings, "llm_extraction": True}
    acme.tenant.save(update_fields=["settings"])
    sid = open_session(acme, "alice")["session_id"]

    def answer(body: dict[str, Any]) -> Reply | str:
        return Reply.content({"facts": [PLACE]}) if "format" in body else "好的，帮您查一下。"

    fake_ollama.script(answer, answer)

    # when a turn goes through the real pipeline (database steps on worker threads)
    response = acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": TEXT}, format="json")

    # then the extraction request came first, and the reply and the model's fact are both there
    assert response.status_code == 200, response.content
    assert response.json()["reply"] == "好的，帮您查一下。"
    first, second = fake_ollama.chat_requests
    assert "format" in first
    assert "format" not in second
    assert "Abc12345" not in json.dumps(first, ensure_ascii=False)
    assert _live(acme)["place"].data["extracted_by"]["method"] == "llm"
