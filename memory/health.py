"""Memory health (seed S8): freshness, hit rate and amnesia, per tenant.

All three come from the database (memories, the replies' recorded
``recalled``/``used`` lists, amnesia alert rows), never from per-process
counters, so every worker reports the same figures.

- **freshness** = memories valid now / all stored memories (healthy > 0.85).
  Replaced and expired memories count as not valid until cleanup removes them.
- **hit rate** = recalled memories that were *used* / recalled memories, over
  the replies of the last ``HEALTH_WINDOW_S`` seconds (healthy > 0.70). A
  recalled memory is *used* when its value appears in the reply (see
  ``chat.services._used_memories`` and docs/memory.md). No recalls → 1.0.
- **amnesia alerts** = alerts fired in the same window.

Below the freshness threshold a cleanup of the tenant's expired memories runs,
once: a conditional UPDATE on ``Tenant.last_cleanup_at`` lets exactly one
process win per ``CLEANUP_COOLDOWN``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from conversations.models import Message
from memory import metrics
from memory.models import AmnesiaAlert, MemoryUnit
from memory.services import do_cleanup_expired
from tenants.models import Tenant
from tenants.rls import tenant_scope

logger = logging.getLogger(__name__)

FRESHNESS_HEALTHY = 0.85
HIT_RATE_HEALTHY = 0.70
CLEANUP_COOLDOWN = timedelta(minutes=10)

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

    def as_api(self) -> dict[str, Any]:
        body = asdict(self)
        body.pop("recalled")
        body.pop("used")
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


def tenant_health(tenant: Tenant, *, now: Any = None) -> TenantHealth:
    now = now or timezone.now()
    since = now - window()
    with tenant_scope(tenant):
        memories = MemoryUnit.objects.for_tenant(tenant)
        total = memories.count()
        valid = memories.filter(created_at__lte=now, expires_at__gt=now).count()
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


def refresh_gauges(tenants: list[Tenant]) -> list[TenantHealth]:
    """Compute each tenant's health, publish the gauges, trigger cleanup."""
    results = []
    for tenant in tenants:
        health = tenant_health(tenant)
        metrics.FRESHNESS.labels(tenant=tenant.slug).set(health.freshness_ratio)
        metrics.HIT_RATE.labels(tenant=tenant.slug).set(health.hit_rate)
        maybe_cleanup(tenant, health)
        results.append(health)
    return results


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


def maybe_cleanup(tenant: Tenant, health: TenantHealth) -> int | None:
    """Below the freshness threshold, remove the tenant's expired memories —
    once per cooldown across all processes. Returns the count, or None when
    no cleanup ran."""
    if health.freshness_ratio >= FRESHNESS_HEALTHY:
        return None
    now = timezone.now()
    won = (
        Tenant.objects.filter(pk=tenant.pk)
        .filter(Q(last_cleanup_at__isnull=True) | Q(last_cleanup_at__lt=now - CLEANUP_COOLDOWN))
        .update(last_cleanup_at=now)
    )
    if not won:
        return None
    removed = do_cleanup_expired(tenant)
    metrics.CLEANUP.labels(tenant=tenant.slug).inc(removed)
    logger.info(
        "memory cleanup for tenant %s: freshness %.2f < %.2f, %d expired memories removed",
        tenant.slug, health.freshness_ratio, FRESHNESS_HEALTHY, removed,
    )  # fmt: skip
    return removed
