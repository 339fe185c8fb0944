"""Memory's periodic job (procrastinate; found by its Django app's autodiscovery of ``tasks`` modules and run
by ``manage.py run_worker``, which listens on :data:`HEALTH_QUEUE`).

Every minute the worker computes each tenant's memory health, stores the figures that ``GET /metrics``
serves, and runs the cleanup when due (``memory.health``). The scrape itself only reads.
"""

from __future__ import annotations

from django.db import connections
from procrastinate.contrib.django import app

from memory.health import refresh_all

HEALTH_QUEUE = "memory"
REFRESH_HEALTH = "memory.refresh_health"


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
