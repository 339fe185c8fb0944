"""「进度如何」 is answered from the batch_operation memory through the rule stage."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from memory.models import MemoryUnit
from tenants.rls import tenant_scope
from tests.chat.tools.backend import Answer
from tests.chat.tools.conftest import register
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}


def test_progress_question_recalls_the_batch_memory(acme, backend, fake_ollama):
    # given a finished batch of 4 where item b2 failed
    register(acme, backend.url, name="send_coupon", schema=SCHEMA)
    sid = open_session(acme)["session_id"]
    backend.responder = lambda r: Answer(status=500, json={}) if r.arguments["id"] == "b2" else Answer(json={})
    items = [{"id": f"b{i}"} for i in range(4)]
    task_id = acme.client.post(
        f"/api/v1/sessions/{sid}/batches", {"tool": "send_coupon", "items": items}, format="json"
    ).json()["task_id"]
    call_command("run_worker", "--once", "--poll", "0.2", "--heartbeat", "0.5", "--stalled-after", "5")
    with tenant_scope(acme.tenant):
        memory = MemoryUnit.objects.for_tenant(acme.tenant).get(key=f"batch:{task_id}", superseded_at__isnull=True)
    assert memory.content == "批量任务 send_coupon：已完成 3/4，失败 1，最后成功 #b3，已结束"
    fake_ollama.script("批量任务已完成 3/4，失败 1 个。")
    # when
    response = acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "进度如何"}, format="json")
    # then
    assert response.status_code == 200, response.content
    assert response.json()["recalled"][0] == str(memory.pk)
    system = fake_ollama.chat_requests[-1]["messages"][0]["content"]
    assert f"[batch_operation] {memory.content}" in system


def test_the_latest_batch_of_the_session_answers(acme, backend, fake_ollama):
    # given two batches, the second queued after the first finished
    register(acme, backend.url, name="send_coupon", schema=SCHEMA)
    sid = open_session(acme)["session_id"]
    post = acme.client.post
    first = post(f"/api/v1/sessions/{sid}/batches", {"tool": "send_coupon", "items": [{"id": "x"}]}, format="json")
    call_command("run_worker", "--once", "--poll", "0.2", "--heartbeat", "0.5", "--stalled-after", "5")
    second = post(f"/api/v1/sessions/{sid}/batches", {"tool": "send_coupon", "items": [{"id": "y"}] * 2}, format="json")
    # when
    response = post(f"/api/v1/sessions/{sid}/messages", {"text": "进度如何"}, format="json")
    # then
    with tenant_scope(acme.tenant):
        latest = MemoryUnit.objects.for_tenant(acme.tenant).get(
            key=f"batch:{second.json()['task_id']}", superseded_at__isnull=True
        )
    assert first.status_code == 202
    assert response.json()["recalled"][0] == str(latest.pk)
    assert "已完成 0/2" in fake_ollama.chat_requests[-1]["messages"][0]["content"]
