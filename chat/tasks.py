"""Background jobs (procrastinate; found by its Django app's autodiscovery of
``tasks`` modules). Run them with ``manage.py run_worker``: batch operations, and
the hourly retention job (``chat.privacy.retention``)."""

from __future__ import annotations

from typing import Any

from django.db import connections
from procrastinate import JobContext, RetryStrategy
from procrastinate.contrib.django import app
from procrastinate.exceptions import JobAborted

from chat.imports.run import run_import_at_low_priority
from chat.imports.service import IMPORT_QUEUE, RUN_IMPORT
from chat.privacy.retention import apply_retention_all
from chat.tools.batches import BATCH_QUEUE, RUN_BATCH, run_batch
from memory.tasks import HEALTH_QUEUE

#: Ids of the batch jobs this process is running. A worker starved of CPU sends its heartbeat late, and its
#: own watch for stalled jobs (``run_worker``) must never take one of these for a dead worker's and queue it
#: again: the copy would find the items recorded by this run, stop, and end the job while this run goes on.
RUNNING_JOBS: set[int] = set()

APPLY_RETENTION = "chat.apply_retention"
#: Hourly, at a minute of its own (away from the top of the hour, when other schedules crowd in).
RETENTION_CRON = "17 * * * *"


# Retries are safe: the batch resumes after its last finished item. A worker
# shutting down puts the job back (JobAborted with reason SHUTDOWN is retried).
@app.task(
    name=RUN_BATCH,
    queue=BATCH_QUEUE,
    pass_context=True,
    retry=RetryStrategy(max_attempts=50, wait=2),
)
def run_batch_task(context: JobContext, tenant_id: str, task_id: str) -> str:
    job_id = context.job.id
    if job_id is not None:
        RUNNING_JOBS.add(job_id)
    try:
        status = run_batch(tenant_id, task_id, should_stop=context.should_abort)
    finally:
        RUNNING_JOBS.discard(job_id)
        # Sync jobs run on a pool thread of their own; leave no connection behind.
        connections.close_all()
    if status == "running":
        raise JobAborted(f"batch {task_id}: the worker is shutting down; the job resumes later")
    return status


# On the queue of the periodic memory job, which every worker listens on (run_worker). ``queueing_lock`` and
# ``lock``: one run waiting, one running, whatever the number of workers; a slow run never piles up jobs. The
# job is idempotent: a run cut short leaves the rest to the next hour.
@app.periodic(cron=RETENTION_CRON, periodic_id="retention")
@app.task(name=APPLY_RETENTION, queue=HEALTH_QUEUE, queueing_lock=APPLY_RETENTION, lock=APPLY_RETENTION)
def apply_retention_task(timestamp: int) -> dict[str, dict[str, Any]]:
    try:
        return {result.tenant: result.as_dict() for result in apply_retention_all()}
    finally:
        # Sync jobs run on a pool thread of their own; leave no connection behind.
        connections.close_all()


# An imported conversation turned into memory (chat.imports.run). On a queue of its own, so a tenant's import
# of thousands of conversations waits behind itself, not behind (or in front of) batch operations. Retries
# are safe: the job resumes after the last chunk it wrote.
@app.task(name=RUN_IMPORT, queue=IMPORT_QUEUE, pass_context=True, retry=RetryStrategy(max_attempts=5, wait=5))
def run_import_task(context: JobContext, tenant_id: str, imported_id: int) -> str:
    try:
        status = run_import_at_low_priority(tenant_id, imported_id, should_stop=context.should_abort)
    finally:
        connections.close_all()
    if status == "indexing":
        raise JobAborted(f"import {imported_id}: the worker is shutting down; the job resumes later")
    return status
