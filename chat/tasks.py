"""Background jobs (procrastinate; found by its Django app's autodiscovery of
``tasks`` modules). Run them with ``manage.py run_worker``."""

from __future__ import annotations

from django.db import connections
from procrastinate import JobContext, RetryStrategy
from procrastinate.contrib.django import app
from procrastinate.exceptions import JobAborted

from chat.batches import BATCH_QUEUE, RUN_BATCH, run_batch


# Retries are safe: the batch resumes after its last finished item. A worker
# shutting down puts the job back (JobAborted with reason SHUTDOWN is retried).
@app.task(
    name=RUN_BATCH,
    queue=BATCH_QUEUE,
    pass_context=True,
    retry=RetryStrategy(max_attempts=50, wait=2),
)
def run_batch_task(context: JobContext, tenant_id: str, task_id: str) -> str:
    try:
        status = run_batch(tenant_id, task_id, should_stop=context.should_abort)
    finally:
        # Sync jobs run on a pool thread of their own; leave no connection behind.
        connections.close_all()
    if status == "running":
        raise JobAborted(f"batch {task_id}: the worker is shutting down; the job resumes later")
    return status
