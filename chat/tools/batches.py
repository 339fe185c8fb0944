"""Batch operations (seed S12): one tenant tool called once per item, one
item at a time, in the background worker (``manage.py run_worker``).

State. The ``Batch`` row holds the items and the checkpoint ``next_index``;
the session's ``batch_operation`` memory (key ``batch:<task_id>``) mirrors
the progress — ``task_id``, ``tool``, ``completed``, ``failed``, ``total``,
``last_success_id``, ``failures``, ``status`` — in words the rule stage of
recall answers 「进度如何」 with («批量任务 send_coupon：已完成 7/10，失败 1，最后成功 #6»).

Idempotency. The item index is the unit. After an item's call, one
transaction locks the row, checks that ``next_index`` is still that index,
records the outcome, moves ``next_index`` on and rewrites the memory: the
memory and the "done" mark of an item commit together or not at all. A worker
killed at any moment therefore resumes at the first unfinished item; only an
item whose call was in flight when the worker died is called again (with the
same ``X-Memdesk-Call-Id``, so the tenant can recognise the repeat). A failed
item is recorded and the batch goes on.

Queueing. Creating a batch inserts its procrastinate job in the same
transaction as the row (not ``on_commit``): a batch never exists without its
job, and the worker cannot see the job before the batch is committed.
"""

from __future__ import annotations

import logging
from typing import Any

from django.utils import timezone
from procrastinate.contrib.django import app as jobs

from chat import metrics
from chat.models import Batch, Tool
from chat.tools import registry as tools_mod
from chat.tools.call import ToolOutcome, call_tool_sync, tool_error
from config.errors import ApiError, NotFound
from config.ids import parse_uuid
from conversations.access import require_session_id
from conversations.models import ChatSession
from memory.models import MemoryType
from memory.store import do_write_memory
from tenants.models import Tenant
from tenants.rls import tenant_scope

logger = logging.getLogger(__name__)

#: The worker's queue for batches, and the name its task (``chat.tasks.run_batch_task``) is registered under.
BATCH_QUEUE = "batches"
RUN_BATCH = "memdesk.run_batch"

MAX_ITEMS = 1000
#: The progress memory outlives the batch by a week (「进度如何」 the next day).
MEMORY_TTL_S = 7 * 86400
#: The memory keeps the latest failures; the batch row keeps them all.
MEMORY_FAILURES = 100
#: An item's own ``id`` longer than this is shown by index in the memory text.
MAX_SHOWN_ID = 40

_STATUS_TEXT = {
    "zh": {"queued": "排队中", "running": "进行中", "done": "已结束"},
    "en": {"queued": "queued", "running": "running", "done": "done"},
}


class BatchNotFound(NotFound):
    code = "batch_not_found"


class UnknownTool(ApiError):
    code = "unknown_tool"


class InvalidItems(ApiError):
    code = "invalid_items"


class InvalidItem(ApiError):
    code = "invalid_item"


def memory_key(task_id: Any) -> str:
    return f"batch:{task_id}"


def item_id(item: Any, index: int) -> Any:
    """What ``last_success_id`` reports for an item: its own ``id`` field
    when it has a string or integer one, else its index (0-based)."""
    own = item.get("id") if isinstance(item, dict) else None
    if isinstance(own, str | int) and not isinstance(own, bool) and str(own).strip():
        return own
    return index


# --- creating and reading --------------------------------------------------------


def check_batch(tenant: Tenant, tool_name: str, items: Any) -> Tool:
    """The tool, once the batch is known good: the tool exists, there are 1 to
    1000 items, and each is an arguments object valid against the tool's
    schema (else 400 ``invalid_item`` with the ``index`` of the first bad one)."""
    tool = tools_mod.get_tool(tenant, tool_name)
    if tool is None:
        raise UnknownTool(f"No tool named {tool_name!r}; register it with POST /api/v1/tools first.")
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_ITEMS:
        raise InvalidItems(f"items must be a list of 1 to {MAX_ITEMS} argument objects")
    for index, item in enumerate(items):
        problem = None if isinstance(item, dict) else "each item must be an object of arguments"
        problem = problem or tools_mod.validate_arguments(tool.parameters, item)
        if problem is not None:
            raise InvalidItem(f"items[{index}]: {problem}", extra={"index": index})
    return tool


@require_session_id
def do_create_batch(tenant: Tenant, session: ChatSession, *, tool_name: str, items: Any) -> Batch:
    """Create a batch, its progress memory (``queued``) and its job, in one transaction. The job is
    deferred by its task's name (``chat.tasks`` registers it), so this module need not import the task."""
    tool = check_batch(tenant, tool_name, items)
    with tenant_scope(tenant):
        batch = Batch.objects.for_tenant(tenant).create(
            tenant=tenant, session=session, tool_name=tool.name, items=items, total=len(items)
        )
        _write_progress(tenant, session, batch)
        batch.job_id = jobs.configure_task(RUN_BATCH, allow_unknown=False, lock=memory_key(batch.pk)).defer(
            tenant_id=str(tenant.pk), task_id=str(batch.pk)
        )
        Batch.objects.for_tenant(tenant).filter(pk=batch.pk).update(job_id=batch.job_id)
    return batch


@require_session_id
def get_batch(tenant: Tenant, session: ChatSession, task_id: Any) -> Batch:
    task_id = parse_uuid(task_id, BatchNotFound("No such batch."))
    with tenant_scope(tenant):
        batch = Batch.objects.for_tenant(tenant).defer("items").filter(pk=task_id, session=session).first()
    if batch is None:
        raise BatchNotFound("No such batch.")
    return batch


def describe_batch(batch: Batch) -> dict[str, Any]:
    return {
        "task_id": str(batch.pk),
        "completed": batch.completed,
        "failed": batch.failed,
        "total": batch.total,
        "last_success_id": batch.last_success_id,
        "status": batch.status,
    }


# --- the progress memory ---------------------------------------------------------


def progress_text(batch: Batch, language: str) -> str:
    """「批量任务 send_coupon：已完成 7/10，失败 1，最后成功 #6，进行中」 (at most 150 characters)."""
    lang = "zh" if language.lower().startswith("zh") else "en"
    last = batch.last_success_id
    shown = None if last is None else (str(last) if len(str(last)) <= MAX_SHOWN_ID else None)
    status = _STATUS_TEXT[lang][batch.status]
    if lang == "zh":
        text = f"批量任务 {batch.tool_name}：已完成 {batch.completed}/{batch.total}，失败 {batch.failed}"
        text += f"，最后成功 #{shown}" if shown is not None else ""
        return f"{text}，{status}"
    text = f"Batch {batch.tool_name}: completed {batch.completed}/{batch.total}, failed {batch.failed}"
    text += f", last success #{shown}" if shown is not None else ""
    return f"{text}, {status}"


def progress_data(batch: Batch) -> dict[str, Any]:
    return {
        "task_id": str(batch.pk),
        "tool": batch.tool_name,
        "completed": batch.completed,
        "failed": batch.failed,
        "total": batch.total,
        "last_success_id": batch.last_success_id,
        "failures": batch.failures[-MEMORY_FAILURES:],
        "status": batch.status,
    }


def _write_progress(tenant: Tenant, session: ChatSession, batch: Batch) -> None:
    do_write_memory(
        tenant, session, type=MemoryType.BATCH_OPERATION, key=memory_key(batch.pk),
        content=progress_text(batch, tenant.language), data=progress_data(batch), expires_in=MEMORY_TTL_S,
    )  # fmt: skip


# --- running (the worker) --------------------------------------------------------


def run_batch(tenant_id: Any, task_id: Any, *, should_stop: Any = None) -> str:
    """Run the batch's unfinished items in order. ``should_stop`` (a callable)
    is asked between items: a worker shutting down stops there and the job
    is retried later, resuming at the next item. Returns the batch's status
    (``"gone"`` when the batch, its session or its tenant no longer exist)."""
    tenant = Tenant.objects.filter(pk=tenant_id).first()
    if tenant is None:
        return "gone"
    with tenant_scope(tenant):
        batch = (
            Batch.objects.for_tenant(tenant).select_related("session", "session__end_user").filter(pk=task_id).first()
        )
    if batch is None:
        return "gone"
    if batch.status == Batch.Status.DONE:
        return batch.status
    session = batch.session
    items = batch.items
    tool = tools_mod.get_tool(tenant, batch.tool_name)
    if batch.status == Batch.Status.QUEUED:
        _mark_running(tenant, session, batch.pk)
    while True:
        with tenant_scope(tenant):
            index = Batch.objects.for_tenant(tenant).filter(pk=batch.pk).values_list("next_index", flat=True).first()
        if index is None:
            return "gone"
        if index >= len(items):
            return Batch.Status.DONE
        if should_stop is not None and should_stop():
            return Batch.Status.RUNNING
        outcome = _call(tenant, session, tool, batch, index, items[index])
        recorded = _record_item(tenant, session, batch.pk, index, items[index], outcome)
        if recorded is None:
            logger.warning("batch %s: item %s was recorded by another run; this run stops", batch.pk, index)
            return "gone"


def _call(tenant: Tenant, session: ChatSession, tool: Tool | None, batch: Batch, index: int, item: Any) -> Any:
    if tool is None:
        outcome = tool_error("tool_not_found", f"the tool {batch.tool_name!r} was deleted")
    elif (problem := tools_mod.validate_arguments(tool.parameters, item)) is not None:
        outcome = tool_error("invalid_arguments", problem)
    else:
        outcome = call_tool_sync(
            tenant, tool, item, session_id=session.pk, end_user_id=session.end_user.external_id,
            call_id=f"{memory_key(batch.pk)}:{index}",
        )  # fmt: skip
    metrics.TOOL_CALLS.labels(
        tenant=tenant.slug, tool=batch.tool_name if tool else "unknown", outcome=outcome.metric
    ).inc()
    return outcome


def _mark_running(tenant: Tenant, session: ChatSession, task_id: Any) -> None:
    with tenant_scope(tenant):
        batch = Batch.objects.for_tenant(tenant).select_for_update().defer("items").filter(pk=task_id).first()
        if batch is None or batch.status != Batch.Status.QUEUED:
            return
        batch.status = Batch.Status.RUNNING
        batch.updated_at = timezone.now()
        batch.save(update_fields=["status", "updated_at"])
        _write_progress(tenant, session, batch)


def _record_item(
    tenant: Tenant, session: ChatSession, task_id: Any, index: int, item: Any, outcome: ToolOutcome
) -> Batch | None:
    """Record item ``index``'s outcome, move the checkpoint and rewrite the
    memory, in one transaction. None when the item was already recorded (a
    duplicate run of the job) or the batch is gone."""
    with tenant_scope(tenant):
        batch = Batch.objects.for_tenant(tenant).select_for_update().defer("items").filter(pk=task_id).first()
        if batch is None or batch.next_index != index:
            return None
        if outcome.ok:
            batch.completed += 1
            batch.last_success_id = item_id(item, index)
        else:
            error = outcome.result.get("error", {}) if isinstance(outcome.result, dict) else {}
            batch.failed += 1
            batch.failures = [
                *batch.failures,
                {"index": index, "error": f"{error.get('code', 'tool_error')}: {error.get('message', '')}"[:200]},
            ]
        batch.next_index = index + 1
        batch.updated_at = timezone.now()
        if batch.next_index >= batch.total:
            batch.status = Batch.Status.DONE
            batch.finished_at = batch.updated_at
        else:
            batch.status = Batch.Status.RUNNING
        batch.save(
            update_fields=[
                "completed", "failed", "last_success_id", "failures", "next_index", "status", "updated_at",
                "finished_at",
            ]
        )  # fmt: skip
        _write_progress(tenant, session, batch)
    metrics.BATCH_ITEMS.labels(tenant=tenant.slug, status="ok" if outcome.ok else "failed").inc()
    return batch
