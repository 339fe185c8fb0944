"""Memory's Prometheus metrics (``memdesk_*``): health gauges, recall latency, amnesia alerts, cleanup.

Counters and histograms are recorded where things happen. The memory-health
gauges (freshness, hit rate, when they were computed) are set on each ``/metrics``
scrape from the figures the worker's periodic job stored in the database
(``memory.store.health``), so every process reports the same truth and a scrape
writes nothing. Cleanup runs in the worker: ``memdesk_memory_cleanup_total``
is counted there. Under several
ASGI workers set ``PROMETHEUS_MULTIPROC_DIR`` (an empty directory per host):
prometheus_client's multiprocess mode then merges the workers' files; the
health gauges use ``mostrecent``. The turn's and the model's metrics are
chat's (``chat.metrics``).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

FRESHNESS = Gauge(
    "memdesk_memory_freshness_ratio", "Valid / current (not superseded) memories, per tenant (healthy > 0.85)",
    ["tenant"], multiprocess_mode="mostrecent",
)  # fmt: skip
HIT_RATE = Gauge(
    "memdesk_memory_hit_rate", "Recalled memories used in a reply / recalled memories, sliding window (healthy > 0.70)",
    ["tenant"], multiprocess_mode="mostrecent",
)  # fmt: skip
HEALTH_COMPUTED = Gauge(
    "memdesk_memory_health_computed_timestamp_seconds",
    "When the worker's periodic job last computed the tenant's memory health (Unix time); stale = worker down",
    ["tenant"], multiprocess_mode="mostrecent",
)  # fmt: skip
AMNESIA_ALERTS = Counter("memdesk_amnesia_alerts", "Amnesia alerts fired", ["tenant"])
RECALL_LATENCY = Histogram(
    "memdesk_recall_latency_seconds", "Recall latency per stage", ["stage"], buckets=LATENCY_BUCKETS
)
CLEANUP = Counter("memdesk_memory_cleanup", "Memories removed by cleanup", ["tenant"])


def observe_recall(timings_ms: dict[str, float]) -> None:
    for stage in ("rule", "vector", "rerank", "total"):
        if stage in timings_ms:
            RECALL_LATENCY.labels(stage=stage).observe(timings_ms[stage] / 1000.0)
