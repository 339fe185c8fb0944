"""Memory's background jobs (procrastinate; found by its Django app's autodiscovery of ``tasks`` modules and
run by ``manage.py run_worker``, which listens on :data:`HEALTH_QUEUE`).

* Every minute the worker computes each tenant's memory health, stores the figures that ``GET /metrics``
  serves, and runs the cleanup when due (``memory.health``). The scrape itself only reads.
* After each chat turn, the turn's conversation units (``memory.conversation.index_turn``): the chat
  runtime queues :data:`INDEX_TURN` once the reply is out, so the web process serving the next turns never
  spends its CPU on them (``MEMORY_WRITER``, docs/memory.md); a job never queued is written by the worker's
  sweep.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.db import DatabaseError, connections, transaction
from procrastinate.contrib.django import app

from memory.conversation import index_turn
from memory.health import refresh_all
from tenants.models import Tenant

logger = logging.getLogger(__name__)

HEALTH_QUEUE = "memory"
REFRESH_HEALTH = "memory.refresh_health"
INDEX_TURN = "memory.index_turn"


# ``queueing_lock``: a run still waiting is not queued twice (a slow run never piles up jobs behind it);
# ``lock``: two workers never run it at once. Several workers still defer each minute's job only once
# (procrastinate records periodic defers by task, periodic id and timestamp).
@app.periodic(cron="* * * * *", periodic_id="memory-health")
@app.task(name=REFRESH_HEALTH, queue=HEALTH_QUEUE, queueing_lock=REFRESH_HEALTH, lock=REFRESH_HEALTH)
def refresh_health_task(timestamp: int) -> dict[str, str]:
    try:
        return {health.tenant: health.status for health in refresh_all()}
    finally:
        # Sync jobs run on a pool thread of their own; leave no connection behind.
        connections.close_all()


# No lock: turns of different sessions index in parallel, and two jobs for the same messages cannot both
# write them (``index_messages`` marks the rows first, in its transaction). A failed job is not retried:
# its messages stay unmarked and the worker's sweep (``manage.py index_messages``) writes them.
@app.task(name=INDEX_TURN, queue=HEALTH_QUEUE)
def index_turn_task(tenant_id: str, session_id: str, message_ids: list[str]) -> int:
    try:
        tenant = Tenant.objects.filter(pk=tenant_id).first()
        if tenant is None:  # deleted since the turn
            return 0
        return index_turn(tenant, session_id, message_ids)
    finally:
        connections.close_all()


def queue_index(tenant: Tenant, session_id: Any, message_ids: Sequence[Any]) -> None:
    """Queue the messages' conversation units for the worker (:data:`INDEX_TURN`): in the caller's transaction
    when it has one (a staff message's: the job exists exactly when the message does), else in a transaction
    of its own (a chat turn's, once its reply is out). A job that cannot be queued fails alone (a savepoint)
    and is logged; the messages stay unmarked and the worker's sweep writes them."""
    try:
        with transaction.atomic():
            index_turn_task.defer(
                tenant_id=str(tenant.pk), session_id=str(session_id), message_ids=[str(m) for m in message_ids]
            )
    except DatabaseError:
        logger.exception("queueing the memory of session %s failed; the worker's sweep writes it", session_id)
