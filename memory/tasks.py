"""Memory's background jobs (procrastinate; found by its Django app's autodiscovery of ``tasks`` modules and
run by ``manage.py run_worker``, which listens on :data:`HEALTH_QUEUE`).

* Every minute the worker computes each tenant's memory health, stores the figures that ``GET /metrics``
  serves, and runs the cleanup when due (``memory.store.health``). The scrape itself only reads.
* :data:`INDEX_TURN`, a turn's conversation units (``memory.conversation.units.index_turn``): jobs an earlier
  release queued after each turn still run. Turns now announce their messages to the worker's batched
  writer instead (``memory.conversation.writer``: a notification, not a job row per turn).
"""

from __future__ import annotations

import logging

from django.db import connections
from procrastinate.contrib.django import app

from memory.conversation.units import index_turn
from memory.store.health import refresh_all
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


# Jobs queued by an earlier release (upgrades keep them). No lock: two jobs for the same messages cannot both
# write them (``index_messages`` marks the rows first, in its transaction). A failed job is not retried: its
# messages stay unmarked and the worker's sweep (``manage.py index_messages``) writes them.
@app.task(name=INDEX_TURN, queue=HEALTH_QUEUE)
def index_turn_task(tenant_id: str, session_id: str, message_ids: list[str]) -> int:
    try:
        tenant = Tenant.objects.filter(pk=tenant_id).first()
        if tenant is None:  # deleted since the turn
            return 0
        return index_turn(tenant, session_id, message_ids)
    finally:
        connections.close_all()
