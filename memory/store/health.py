"""Memory health (seed S8): freshness, hit rate and amnesia, per tenant.

All three come from the database (memories, the replies' recorded
``recalled``/``used`` lists, amnesia alert rows), never from per-process
counters, so every worker reports the same figures.

- **freshness** = memories meant to be current that are valid now / memories
  meant to be current (healthy > 0.85). *Meant to be current* = not
  superseded: a replaced version is history, kept for ``as_of`` for the
  tenant's ``history_retention_days`` (``memory.store.lifecycle.history_retention``),
  not staleness — so 100 replaces of one key, or a 100-step batch, leave
  freshness at 1.0. A current memory past its ``expires_at`` is stale until
  cleanup removes it.
- **hit rate** = recalled memories that were *used* / recalled memories, over
  the replies of the last ``HEALTH_WINDOW_S`` seconds (healthy > 0.70). A
  recalled memory is *used* when its value appears in the reply (see
  ``chat.turn.finish._used_memories`` and docs/memory.md). No recalls → 1.0.
- **amnesia alerts** = alerts fired in the same window.

Who computes what: the worker's periodic job (``memory.tasks``, every minute)
runs :func:`refresh_all`, which stores each tenant's figures in
``MemoryHealth`` and runs the cleanup when due; ``GET /metrics`` only reads
those rows (:func:`publish_stored`). ``GET /memory/health`` (authenticated)
computes live with :func:`tenant_health`, which writes nothing.

Cleanup is due below the freshness threshold (S8's trigger, at most once per
``CLEANUP_COOLDOWN``) and otherwise once per ``CLEANUP_EVERY``, so superseded
versions past their retention go even while a tenant is healthy. A conditional
UPDATE on ``Tenant.last_cleanup_at`` lets exactly one process win.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from conversations.models import Message
from memory import metrics
from memory.models import AmnesiaAlert, MemoryHealth, MemoryUnit
from memory.store.lifecycle import do_cleanup_expired
from memory.store.read import valid_q
from tenants.models import Tenant
from tenants.rls import operator_scope, tenant_scope

logger = logging.getLogger(__name__)

FRESHNESS_HEALTHY = 0.85
HIT_RATE_HEALTHY = 0.70
CLEANUP_COOLDOWN = timedelta(minutes=10)
#: A healthy tenant is cleaned up this often: superseded versions past their retention, and the few expired
#: memories that never pulled freshness below the threshold.
CLEANUP_EVERY = timedelta(days=1)

DEFAULT_AMNESIA_PHRASES = {
    "zh": ["我不太记得", "请再说一遍", "根据当前信息", "我不记得", "请您再说一遍", "能再说一次吗"],
    "en": [
        "i don't remember", "i do not remember", "could you repeat", "can you repeat", "please repeat",
        "based on the current information", "i don't recall", "i can't recall",
    ],
}  # fmt: skip


@dataclass
class TenantHealth:
    tenant: str
    freshness_ratio: float
    hit_rate: float
    memories: dict[str, int]
    amnesia_alerts: int
    recalled: int
    used: int
    status: str
    #: Superseded versions kept as history; not part of ``memories`` (API.md's shape), never staleness.
    superseded: int = 0

    def as_api(self) -> dict[str, Any]:
        body = asdict(self)
        body.pop("recalled")
        body.pop("used")
        body.pop("superseded")
        return body


def window() -> timedelta:
    return timedelta(seconds=settings.HEALTH_WINDOW_S)


def amnesia_phrase(reply: str) -> str | None:
    """The first amnesia phrase (settings ``AMNESIA_PHRASES``, per language) in ``reply``."""
    phrases = DEFAULT_AMNESIA_PHRASES if settings.AMNESIA_PHRASES is None else settings.AMNESIA_PHRASES
    folded = re.sub(r"\s+", " ", reply.replace("’", "'")).casefold()
    for language_phrases in phrases.values():
        for phrase in language_phrases:
            if phrase.casefold() in folded:
                return phrase
    return None


def tenant_health(tenant: Tenant, *, now: datetime | None = None) -> TenantHealth:
    """The tenant's figures at ``now``, computed from the database; reads only. ``memories`` counts the
    memories meant to be current (not superseded): ``total``, ``valid`` now, ``expired`` (stale)."""
    now = now or timezone.now()
    since = now - window()
    current = Q(superseded_at__isnull=True)
    with tenant_scope(tenant):
        counts = MemoryUnit.objects.for_tenant(tenant).aggregate(
            total=Count("pk", filter=current),
            valid=Count("pk", filter=current & valid_q(now)),
            superseded=Count("pk", filter=~current),
        )
        total, valid = counts["total"], counts["valid"]
        recalled = used = 0
        replies = (
            Message.objects.for_tenant(tenant)
            .filter(role=Message.Role.ASSISTANT, created_at__gte=since)
            .filter(~Q(data__recalled=[]))
            .values_list("data", flat=True)
        )
        for data in replies.iterator(chunk_size=2000):
            recalled += len(data.get("recalled", []))
            used += len(data.get("used", []))
        alerts = AmnesiaAlert.objects.for_tenant(tenant).filter(created_at__gte=since).count()
    freshness = valid / total if total else 1.0
    hit_rate = used / recalled if recalled else 1.0
    degraded = freshness < FRESHNESS_HEALTHY or hit_rate < HIT_RATE_HEALTHY or alerts > 0
    return TenantHealth(
        tenant=tenant.slug,
        freshness_ratio=round(freshness, 4),
        hit_rate=round(hit_rate, 4),
        memories={"total": total, "valid": valid, "expired": total - valid},
        amnesia_alerts=alerts,
        recalled=recalled,
        used=used,
        status="degraded" if degraded else "ok",
        superseded=counts["superseded"],
    )


def combine(parts: list[TenantHealth]) -> dict[str, Any]:
    """All tenants together (the staff view), with each tenant's figures."""
    total = sum(p.memories["total"] for p in parts)
    valid = sum(p.memories["valid"] for p in parts)
    recalled = sum(p.recalled for p in parts)
    used = sum(p.used for p in parts)
    return {
        "freshness_ratio": round(valid / total, 4) if total else 1.0,
        "hit_rate": round(used / recalled, 4) if recalled else 1.0,
        "memories": {"total": total, "valid": valid, "expired": total - valid},
        "amnesia_alerts": sum(p.amnesia_alerts for p in parts),
        "status": "degraded" if any(p.status == "degraded" for p in parts) else "ok",
        "tenants": [p.as_api() for p in parts],
    }


def do_refresh_health(tenant: Tenant, *, now: datetime | None = None) -> TenantHealth:
    """The periodic job's work for one tenant: compute its health, run the cleanup when due (and compute
    again after one that removed something), store the figures for ``/metrics``. Idempotent."""
    now = now or timezone.now()
    health = tenant_health(tenant, now=now)
    if maybe_cleanup(tenant, health, now=now):
        health = tenant_health(tenant, now=now)
    with tenant_scope(tenant):
        MemoryHealth.objects.for_tenant(tenant).update_or_create(
            tenant=tenant,
            defaults={
                "computed_at": now,
                "freshness_ratio": health.freshness_ratio,
                "hit_rate": health.hit_rate,
                "current": health.memories["total"],
                "valid": health.memories["valid"],
                "superseded": health.superseded,
                "amnesia_alerts": health.amnesia_alerts,
                "status": health.status,
            },
        )
    return health


def refresh_all(*, now: datetime | None = None) -> list[TenantHealth]:
    """:func:`do_refresh_health` for every tenant (the worker's periodic job, ``memory.tasks``). One
    tenant's failure is logged and the others go on."""
    with operator_scope():  # the job speaks for every tenant, visibly; each tenant's work is scoped to it
        tenants = list(Tenant.objects.order_by("slug"))
    results = []
    for tenant in tenants:
        try:
            results.append(do_refresh_health(tenant, now=now))
        except Exception:
            logger.exception("memory health of tenant %s: refresh failed; the next run tries again", tenant.slug)
    return results


def publish_stored() -> int:
    """Set the health gauges from the figures the periodic job stored; reads only (``GET /metrics`` calls it
    inside an operator scope). Returns how many tenants were published."""
    rows = MemoryHealth.objects.unscoped(reason="/metrics publishes every tenant's stored figures").values_list(
        "tenant__slug", "freshness_ratio", "hit_rate", "computed_at"
    )
    count = 0
    for slug, freshness, hit_rate, computed_at in rows:
        metrics.FRESHNESS.labels(tenant=slug).set(freshness)
        metrics.HIT_RATE.labels(tenant=slug).set(hit_rate)
        metrics.HEALTH_COMPUTED.labels(tenant=slug).set(computed_at.timestamp())
        count += 1
    return count


_last_check: dict[Any, float] = {}
CHECK_EVERY_S = 60.0


def check_due(tenant: Tenant) -> bool:
    """True at most once a minute per process and tenant (and records it): whether a turn's caller should
    run :func:`check_after_turn` now. Cheap, so the async turn asks it before handing work to a thread."""
    import time

    last = _last_check.get(tenant.pk, 0.0)
    if time.monotonic() - last < CHECK_EVERY_S:
        return False
    _last_check[tenant.pk] = time.monotonic()
    return True


def check_after_turn(tenant: Tenant) -> None:
    """Compute the tenant's health and let a low freshness trigger cleanup. The chat runtime calls it after
    a turn for which :func:`check_due` said so, once the reply has gone out: it reads every reply of the
    window (a busy tenant's day of them) and must not hold up a customer's turn."""
    maybe_cleanup(tenant, tenant_health(tenant))


def maybe_cleanup(tenant: Tenant, health: TenantHealth, *, now: datetime | None = None) -> int | None:
    """Run the tenant's cleanup (``memory.store.lifecycle.do_cleanup_expired``) when due: below the freshness
    threshold once per ``CLEANUP_COOLDOWN``, otherwise once per ``CLEANUP_EVERY`` — across all processes.
    Returns how many memories were removed, or None when no cleanup ran."""
    now = now or timezone.now()
    low = health.freshness_ratio < FRESHNESS_HEALTHY
    interval = CLEANUP_COOLDOWN if low else CLEANUP_EVERY
    won = (
        Tenant.objects.filter(pk=tenant.pk)
        .filter(Q(last_cleanup_at__isnull=True) | Q(last_cleanup_at__lte=now - interval))
        .update(last_cleanup_at=now)
    )
    if not won:
        return None
    removed = do_cleanup_expired(tenant, now=now)
    metrics.CLEANUP.labels(tenant=tenant.slug).inc(removed.total)
    logger.info(
        "memory cleanup for tenant %s (freshness %.2f): %d expired memories and %d superseded versions past "
        "their retention removed",
        tenant.slug, health.freshness_ratio, removed.expired, removed.superseded,
    )  # fmt: skip
    return removed.total
