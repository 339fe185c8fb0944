"""POST/GET …/batches: validation, one-by-one execution by the worker, a
failed item recorded while the batch goes on, progress in a batch_operation memory."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from memory.models import MemoryUnit
from tenants.rls import tenant_scope
from tests.chat.tools.backend import Answer
from tests.chat.tools.conftest import register
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

COUPON_SCHEMA = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "user": {"type": "string"}, "amount": {"type": "integer", "minimum": 1}},
    "required": ["id", "user", "amount"],
}


def _items(n):
    return [{"id": f"c{i}", "user": f"u{i}", "amount": 10} for i in range(n)]


def _create(ctx, sid, items, tool="send_coupon"):
    return ctx.client.post(f"/api/v1/sessions/{sid}/batches", {"tool": tool, "items": items}, format="json")


def _progress(ctx, sid, task_id):
    response = ctx.client.get(f"/api/v1/sessions/{sid}/batches/{task_id}")
    assert response.status_code == 200, response.content
    return response.json()


def _run_worker():
    # --nice 0: in-process, a lower priority would stay with the test run
    call_command("run_worker", "--once", "--poll", "0.2", "--heartbeat", "0.5", "--stalled-after", "5", "--nice", "0")


@pytest.mark.parametrize("nice", ["-1", "20"])
def test_a_worker_priority_out_of_range_is_refused(nice, capsys):
    with pytest.raises(SystemExit) as stopped:
        call_command("run_worker", "--once", "--nice", nice)
    assert stopped.value.code == 2
    assert "--nice must be between 0 and 19" in capsys.readouterr().err


def _batch_memory(ctx, task_id):
    with tenant_scope(ctx.tenant):
        return MemoryUnit.objects.for_tenant(ctx.tenant).get(
            type="batch_operation", key=f"batch:{task_id}", superseded_at__isnull=True
        )


@pytest.fixture
def sid(acme, backend):
    register(acme, backend.url, name="send_coupon", schema=COUPON_SCHEMA)
    return open_session(acme, "ops-user")["session_id"]


def test_a_batch_is_queued_and_not_run_in_the_request(acme, backend, sid):
    # when
    response = _create(acme, sid, _items(3))
    # then
    assert response.status_code == 202, response.content
    body = response.json()
    assert set(body) == {"task_id", "total"}
    assert body["total"] == 3
    assert _progress(acme, sid, body["task_id"]) == {
        "task_id": body["task_id"],
        "completed": 0,
        "failed": 0,
        "total": 3,
        "last_success_id": None,
        "status": "queued",
    }
    assert backend.requests == []
    assert _batch_memory(acme, body["task_id"]).content == "批量任务 send_coupon：已完成 0/3，失败 0，排队中"


def test_a_batch_of_ten_with_one_failing_item_ends_9_1_done(acme, backend, sid):
    # given item c3 fails at the tenant
    backend.responder = lambda r: (
        Answer(status=500, json={"error": "no such user"}) if r.arguments["id"] == "c3" else Answer(json={"ok": True})
    )
    task_id = _create(acme, sid, _items(10)).json()["task_id"]
    # when
    _run_worker()
    # then
    assert _progress(acme, sid, task_id) == {
        "task_id": task_id,
        "completed": 9,
        "failed": 1,
        "total": 10,
        "last_success_id": "c9",
        "status": "done",
    }
    assert [r.arguments["id"] for r in backend.requests] == [f"c{i}" for i in range(10)]
    assert {r.headers["X-Memdesk-Call-Id"] for r in backend.requests} == {f"batch:{task_id}:{i}" for i in range(10)}
    memory = _batch_memory(acme, task_id)
    assert memory.content == "批量任务 send_coupon：已完成 9/10，失败 1，最后成功 #c9，已结束"
    assert memory.session_id is not None
    assert memory.data == {
        "task_id": task_id,
        "tool": "send_coupon",
        "completed": 9,
        "failed": 1,
        "total": 10,
        "last_success_id": "c9",
        "failures": [{"index": 3, "error": "tool_http_error: the tool answered HTTP 500"}],
        "status": "done",
    }


def test_items_without_an_id_report_their_index(acme, backend, sid):
    # given a schema without ids
    register(acme, backend.url, name="ping", schema={"type": "object"})
    task_id = _create(acme, sid, [{}, {}, {}], tool="ping").json()["task_id"]
    # when
    _run_worker()
    # then
    assert _progress(acme, sid, task_id)["last_success_id"] == 2


def test_the_memory_is_updated_after_each_item(acme, backend, sid):
    # given a back end that looks at the progress memory while each item runs
    seen = []

    def observe(request):
        from memory.models import MemoryUnit as Unit

        with tenant_scope(acme.tenant):
            live = Unit.objects.for_tenant(acme.tenant).get(type="batch_operation", superseded_at__isnull=True)
        seen.append(live.data["completed"])
        return Answer(json={"ok": True})

    backend.responder = observe
    _create(acme, sid, _items(4))
    # when
    _run_worker()
    # then
    assert seen == [0, 1, 2, 3]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"tool": "nope", "items": [{}]}, "unknown_tool"),
        ({"tool": "send_coupon", "items": []}, "invalid_items"),
        ({"tool": "send_coupon", "items": {"id": "c0"}}, "invalid_items"),
        ({"tool": "send_coupon", "items": _items(1001)}, "invalid_items"),
        ({"tool": "send_coupon"}, "invalid_request"),
    ],
)
def test_bad_batches_are_clear_400s(acme, sid, body, code):
    response = acme.client.post(f"/api/v1/sessions/{sid}/batches", body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code


def test_the_first_bad_item_is_named_by_its_index(acme, sid):
    # given items 2 and 4 break the schema
    items = _items(5)
    items[2]["amount"] = 0
    items[4] = "not an object"
    # when
    response = _create(acme, sid, items)
    # then
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_item"
    assert error["index"] == 2
    assert error["message"].startswith("items[2]: amount:")


def test_a_batch_is_visible_only_in_its_session(acme, globex, sid):
    # given
    task_id = _create(acme, sid, _items(1)).json()["task_id"]
    other = open_session(acme, "someone-else")["session_id"]
    foreign = open_session(globex)["session_id"]
    # then
    assert acme.client.get(f"/api/v1/sessions/{other}/batches/{task_id}").json()["error"]["code"] == "batch_not_found"
    assert globex.client.get(f"/api/v1/sessions/{sid}/batches/{task_id}").status_code == 404
    assert globex.client.get(f"/api/v1/sessions/{foreign}/batches/{task_id}").status_code == 404
    assert acme.client.get(f"/api/v1/sessions/{sid}/batches/not-a-uuid").status_code == 404
