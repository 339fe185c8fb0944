"""Past conversations imported with their own times (API.md "Past conversations (import)").

Every import goes through ``POST /api/v1/end-users/<id>/conversations`` with the tenant's key; the background
worker (``manage.py run_worker --once``) turns it into memory; every question goes through
``POST /api/v1/memories/recall`` from a new session of the end user, ``as_of`` where the question is asked at
another time — what a customer who comes back gets.
"""

from __future__ import annotations

import json
import os
import re
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from conversations.models import ChatSession, ImportedConversation, Message
from memory.models import MemoryUnit
from tenants.rls import tenant_scope
from testkit.fake_ollama import Reply
from tests.factories import TenantCtx, open_session

pytestmark = pytest.mark.django_db(transaction=True)

#: Every time below is whole days before this test's start, at 10:00 UTC: within the product's retention, so
#: what expired or was replaced is still there to be asked about ``as_of`` (docs/memory.md, cleanup).
TODAY = timezone.now().astimezone(UTC).replace(hour=10, minute=0, second=0, microsecond=0)


def _day(days: int, minute: int = 0) -> datetime:
    """``days`` days from today (negative: ago), at 10:00 plus ``minute`` minutes, UTC."""
    return TODAY + timedelta(days=days, minutes=minute)


def _at(days: int, minute: int = 0) -> str:
    return _day(days, minute).isoformat()


def _conversation(external_id: str, days: int, lines: list[tuple[str, str]], **extra: Any) -> dict:
    return {
        "external_id": external_id,
        "started_at": _at(days),
        "messages": [{"role": role, "text": text, "sent_at": _at(days, i + 1)} for i, (role, text) in enumerate(lines)],
        **extra,
    }


def _import(ctx: TenantCtx, end_user: str, body: Any) -> Any:
    # JSON written with ASCII escapes, as a client's encoder would send a lone surrogate (\\ud800)
    raw = json.dumps(body, ensure_ascii=True)
    return ctx.client.post(f"/api/v1/end-users/{end_user}/conversations", raw, content_type="application/json")


def _imported(ctx: TenantCtx, external_id: str) -> ImportedConversation:
    with tenant_scope(ctx.tenant):
        return ImportedConversation.objects.for_tenant(ctx.tenant).get(external_id=external_id)


def _worker() -> None:
    call_command("run_worker", "--once", "--poll", "0.2", "--heartbeat", "0.5", "--stalled-after", "5", "--nice", "0")


def _recall(ctx: TenantCtx, end_user: str, query: str, **extra: Any) -> list[dict[str, Any]]:
    sid = open_session(ctx, end_user)["session_id"]
    response = ctx.client.post(
        "/api/v1/memories/recall", {"query": query, "k": 5, **extra}, format="json", HTTP_X_SESSION_ID=sid
    )
    assert response.status_code == 200, response.content
    return [{**r["memory"], "current": r["current"]} for r in response.json()["results"]]


def _phone(ctx: TenantCtx, end_user: str, **extra: Any) -> list[str]:
    """The phone numbers among the keyed memories recalled for "what is my phone number"."""
    recalled = _recall(ctx, end_user, "我的手机号是多少", **extra)
    return [re.search(r"1\d{10}", m["content"]).group() for m in recalled if m.get("key") == "phone"]


def _stored(ctx: TenantCtx) -> dict[str, int]:
    with tenant_scope(ctx.tenant):
        return {
            "sessions": ChatSession.objects.for_tenant(ctx.tenant).count(),
            "messages": Message.objects.for_tenant(ctx.tenant).count(),
            "imports": ImportedConversation.objects.for_tenant(ctx.tenant).count(),
            "memories": MemoryUnit.objects.for_tenant(ctx.tenant).count(),
        }


def test_an_imported_conversation_becomes_memory_at_its_own_time_and_a_live_fact_wins(acme, fake_ollama):
    body = _conversation("zd-1001", -20, [("user", "我的手机号是13800138000"), ("agent", "好的，已记录您的手机号。")])

    response = _import(acme, "cust-1", body)

    assert response.status_code == 202, response.content
    session_id = response.json()["session_id"]
    assert response.json() == {"session_id": session_id, "messages": 2, "status": "queued"}
    _worker()
    status = acme.client.get(f"/api/v1/end-users/cust-1/conversations/{session_id}").json()
    assert status == {"session_id": session_id, "status": "done", "messages": 2, "indexed": 2}
    assert _phone(acme, "cust-1") == ["13800138000"]  # remembered from day one

    # the customer gives a new number in a live chat today
    sid = open_session(acme, "cust-1")["session_id"]
    fake_ollama.script(Reply(text="好的，已更新。"))
    live = acme.client.post(
        f"/api/v1/sessions/{sid}/messages", {"text": "我换号了，新手机号是13900139000"}, format="json"
    )
    assert live.status_code == 200, live.content
    # and an older conversation is imported afterwards: March's number must not replace today's
    older = _conversation("zd-0999", -30, [("user", "手机号13700137000")])
    assert _import(acme, "cust-1", older).status_code == 202
    _worker()

    assert _phone(acme, "cust-1") == ["13900139000"]
    assert _phone(acme, "cust-1", as_of=_at(-10)) == ["13800138000"]
    assert _phone(acme, "cust-1", as_of=_at(-25)) == ["13700137000"]
    with tenant_scope(acme.tenant):
        imported = MemoryUnit.objects.for_tenant(acme.tenant).get(key="phone", content__contains="13800138000")
        assert imported.created_at == _day(-20, 1)


def test_a_coupon_imported_with_its_validity_is_current_before_its_date_and_not_after(acme):
    # said three days ago: "valid until <the day ten days from now>", as a date in words
    until = _day(10)
    body = _conversation(
        "zd-2001",
        -3,
        [("user", "有优惠券吗？"), ("agent", f"给您发了一张券DX80，有效期到{until.month}月{until.day}日。")],
    )
    assert _import(acme, "cust-2", body).status_code == 202
    _worker()

    before = _recall(acme, "cust-2", "优惠券DX80现在还在有效期吗", as_of=_at(5))
    after = _recall(acme, "cust-2", "优惠券DX80现在还在有效期吗", as_of=_at(15))

    assert [m["current"] for m in before if "DX80" in m["content"]] == [True]
    assert [m["current"] for m in after if "DX80" in m["content"]] in ([], [False])


def test_a_repeated_import_answers_the_first_and_writes_nothing(acme):
    body = _conversation("zd-3001", -12, [("user", "我的邮箱是li@example.com")])
    first = _import(acme, "cust-3", body)
    _worker()
    before = _stored(acme)

    again = _import(acme, "cust-3", body)
    _worker()

    assert first.status_code == 202
    assert again.status_code == 200
    assert again.json()["session_id"] == first.json()["session_id"]
    assert again.json()["status"] == "done"
    assert _stored(acme) == before


@pytest.mark.parametrize(
    ("change", "code", "field"),
    [
        (lambda b: b.update(messages=[]), "invalid_import", "messages"),
        (lambda b: b.update(messages=b["messages"] * 251), "invalid_import", "messages"),
        (lambda b: b["messages"][0].update(role="bot"), "invalid_import", "messages[0].role"),
        (lambda b: b["messages"][0].update(text="a\x00b"), "invalid_text", "messages[0]"),
        (lambda b: b["messages"][0].update(text="\ud800"), "invalid_text", "messages[0]"),
        (lambda b: b["messages"][0].update(text="字" * 4001), "message_too_long", "messages[0]"),
        (lambda b: b["messages"][0].update(sent_at="2024-03-05T10:00:00"), "invalid_import", "messages[0].sent_at"),
        (lambda b: b["messages"][1].update(sent_at=_at(-9)), "invalid_import", "messages[1].sent_at"),
        (
            lambda b: b["messages"][1].update(sent_at=(timezone.now() + timedelta(days=1)).isoformat()),
            "invalid_import",
            "messages[1].sent_at",
        ),
        (lambda b: b.update(started_at="yesterday"), "invalid_import", "started_at"),
        (lambda b: b.pop("external_id"), "invalid_import", "external_id"),
        (lambda b: b.update(metadata=[1]), "invalid_import", "metadata"),
        (lambda b: b.update(extra=1), "invalid_import", "extra"),
    ],
)
def test_bad_input_is_refused_with_its_code_and_nothing_is_stored(acme, change, code, field):
    body = _conversation("zd-4001", -5, [("user", "你好"), ("agent", "您好")])
    change(body)
    before = _stored(acme)

    response = _import(acme, "cust-4", body)

    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code
    assert response.json()["error"].get("field", field).startswith(field)
    assert _stored(acme) == before


def test_the_body_limit_holds_before_anything_is_read(acme, settings):
    body = _conversation("zd-4002", -5, [("user", "字" * 4000)] * 40)
    before = _stored(acme)
    response = _import(acme, "cust-4", body)
    assert response.status_code == 413
    assert _stored(acme) == before


def test_another_tenants_end_user_of_the_same_id_never_sees_the_import(acme, globex):
    body = _conversation("zd-5001", -20, [("user", "我的手机号是13800138000")])
    open_session(globex, "cust-5")  # globex has its own cust-5
    assert _import(acme, "cust-5", body).status_code == 202
    _worker()

    assert _phone(acme, "cust-5") == ["13800138000"]
    assert _phone(globex, "cust-5") == []
    session_id = _imported(acme, "zd-5001").session_id
    assert globex.client.get(f"/api/v1/end-users/cust-5/conversations/{session_id}").status_code == 404


def test_erasure_removes_imported_history_and_export_includes_it(acme):
    body = _conversation("zd-6001", -20, [("user", "我的手机号是13800138000")])
    assert _import(acme, "cust-6", body).status_code == 202
    _worker()
    exported = acme.client.get("/api/v1/end-users/cust-6/export")
    assert "13800138000" in b"".join(exported.streaming_content).decode()

    assert acme.client.delete("/api/v1/end-users/cust-6").status_code == 204

    assert _stored(acme) == {"sessions": 0, "messages": 0, "imports": 0, "memories": 0}


def test_the_memory_switch_applies_to_imported_history(acme):
    acme.tenant.settings = {**acme.tenant.settings, "end_user_memory": "off"}
    acme.tenant.save()
    assert (
        _import(acme, "cust-7", _conversation("zd-7001", -20, [("user", "我的手机号是13800138000")])).status_code == 202
    )
    _worker()
    with tenant_scope(acme.tenant):
        assert not MemoryUnit.objects.for_tenant(acme.tenant).exists()


def test_live_turns_answer_while_an_import_runs(acme, fake_ollama):
    lines = [
        line
        for i in range(100)
        for line in (("user", f"第{i}个问题，订单号SO{i:05d}"), ("agent", "好的，已为您查询。"))
    ]
    assert _import(acme, "cust-8", _conversation("zd-8001", -2, lines)).status_code == 202
    worker = threading.Thread(target=_worker)
    worker.start()
    sid = open_session(acme, "cust-9")["session_id"]
    try:
        for i in range(5):
            fake_ollama.script(Reply(text=f"好的{i}"))
            reply = acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": f"你好{i}"}, format="json")
            assert reply.status_code == 200, reply.content
            assert reply.json()["reply"] == f"好的{i}"
    finally:
        worker.join(timeout=300)
    assert _imported(acme, "zd-8001").status == "done"


def test_the_command_imports_a_file_with_a_summary_and_a_rerun_skips_what_was_imported(acme, tmp_path, capsys):
    good = {"end_user_id": "cust-10", **_conversation("zd-9001", -4, [("user", "我的邮箱是li@example.com")])}
    bad = {"end_user_id": "cust-10", **_conversation("zd-9002", -4, [("robot", "hi")])}
    path = tmp_path / "export.jsonl"
    path.write_text("\n".join([json.dumps(good), "{not json", json.dumps(bad), ""]), encoding="utf-8")

    with pytest.raises(SystemExit) as ended:
        call_command("import_conversations", acme.tenant.slug, str(path))
    out = capsys.readouterr()

    assert ended.value.code == 1
    assert "imported 1, skipped as duplicates 0, refused 2" in out.out
    assert "line 2: invalid JSON" in out.out
    assert "line 3: invalid_import: messages[0].role must be one of user, agent, staff" in out.out
    assert "3/3 conversations" in out.err
    with pytest.raises(SystemExit):
        call_command("import_conversations", acme.tenant.slug, str(path), "--quiet")
    assert "imported 0, skipped as duplicates 1, refused 2" in capsys.readouterr().out
    assert _imported(acme, "zd-9001").messages == 1


def test_imports_have_a_rate_of_their_own_and_leave_live_chat_its_limits(acme, fake_ollama, settings):
    rates = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {**rates, "imports": "2/min"}}
    acme.tenant.settings = {**acme.tenant.settings, "rate_limits": {"per_tenant_per_minute": 3}}
    acme.tenant.save()
    lines = [("user", f"第{i}句") for i in range(20)]

    answers = [_import(acme, "cust-11", _conversation(f"zd-11{i}", -3, lines)).status_code for i in range(3)]
    sid = open_session(acme, "cust-12")["session_id"]
    fake_ollama.script(Reply(text="您好"))
    live = acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "你好"}, format="json")

    assert answers == [202, 202, 429]
    assert live.status_code == 200  # 40 imported messages did not use up the tenant's 3 live messages a minute


def test_imports_of_one_customer_indexed_side_by_side_all_finish(acme):
    # several conversations of one customer stating the same keys and the same sentences, indexed by jobs that
    # run at once: each store takes its keys in one order and no transaction holds one store's locks into the next
    lines = [
        line
        for i in range(10)
        for line in (
            ("user", f"我的手机号是1380013800{i}"),
            ("agent", "好的，已为您更新。"),
            ("user", "谢谢，订单DD1001"),
        )
    ]
    for n in range(6):
        assert _import(acme, "cust-13", _conversation(f"zd-13{n}", -6 + n, lines)).status_code == 202

    call_command("run_worker", "--once", "--poll", "0.2", "--nice", "0", "--concurrency", "4")

    assert [_imported(acme, f"zd-13{n}").status for n in range(6)] == ["done"] * 6
    assert _phone(acme, "cust-13") == ["13800138009"]


def test_an_import_runs_on_a_thread_of_its_own_at_the_lowest_priority(monkeypatch):
    from chat.imports import run as import_run

    seen = {}

    def fake_run(tenant_id, imported_id, *, should_stop):
        seen["thread"] = threading.get_native_id()
        seen["niceness"] = os.getpriority(os.PRIO_PROCESS, seen["thread"])
        return "done"

    monkeypatch.setattr(import_run, "run_import", fake_run)
    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    assert import_run.run_import_at_low_priority("t", 1, should_stop=lambda: False) == "done"
    assert seen["niceness"] == import_run.IMPORT_NICENESS
    assert seen["thread"] != threading.get_native_id()
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before  # the job's own thread is untouched


def test_a_later_state_imported_before_the_earlier_still_holds(acme, fake_ollama):
    # A backfill that sends the newest conversation first: the ticket's state on day -2 holds, though the state
    # of day -9 was written after it
    newer = _conversation(
        "crm-2",
        -2,
        [("user", "工单GD2024061188修好了吗"), ("agent", "工单GD2024061188已标记为「已完工」，30天内可申请返修。")],
    )
    older = _conversation(
        "crm-1", -9, [("user", "卫生间漏水"), ("agent", "已创建报修工单GD2024061188，当前状态「待上门」。")]
    )
    assert _import(acme, "cust-9", newer).status_code == 202
    _worker()
    assert _import(acme, "cust-9", older).status_code == 202
    _worker()

    recalled = _recall(acme, "cust-9", "工单GD2024061188现在什么状态？")
    assert "已完工" in recalled[0]["content"], recalled
    assert not any("待上门" in m["content"] for m in recalled if m["current"]), recalled
    then = _recall(acme, "cust-9", "工单GD2024061188什么状态？", as_of=_at(-5))
    assert any("待上门" in m["content"] and m["current"] for m in then), then


def test_each_changed_word_is_credited_to_the_statement_that_changed_it(acme, fake_ollama):
    # given a car said to be a 2019 Lavida with 68,000 km, and weeks later, in one imported conversation, first the
    # mileage corrected and then the model: the audit trail (the data export) credits each change to its own
    # statement, not both to the first one written
    older = _conversation("car-1", -20, [("user", "我想买辆二手车，2019年的大众朗逸，表显里程6.8万公里。")])
    newer = _conversation(
        "car-2",
        -3,
        [("user", "里程我上次说错了，是8.6万公里，不是6.8万。"), ("agent", "好的，已更正。"),
         ("user", "还有，车其实是途观，不是朗逸，卖家之前发错照片了。"), ("agent", "好的，已记下。")],
    )  # fmt: skip
    assert _import(acme, "cust-car", older).status_code == 202
    _worker()
    assert _import(acme, "cust-car", newer).status_code == 202
    _worker()

    exported = json.loads(b"".join(acme.client.get("/api/v1/end-users/cust-car/export").streaming_content))
    content = {m["id"]: m["content"] for m in exported["memories"]}
    car = next(i for i, c in content.items() if "大众朗逸" in c)
    notes = [e["note"] for e in exported["memory_events"] if e["memory_id"] == car and "changed by" in e["note"]]
    credited = {
        attr.strip(): content[by.strip()]
        for note in notes
        for part in note.split(";")
        for attrs, by in [part.split("changed by")]
        for attr in attrs.split(",")
    }
    assert "途观" in credited["term:朗逸"], credited
    assert "8.6万" in credited["term:6.8万"], credited
