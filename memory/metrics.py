"""memdesk's own Prometheus metrics (``memdesk_*``).

Counters and histograms are recorded where things happen. The memory-health
gauges (freshness, hit rate) are computed from the database when ``/metrics``
is scraped, so every worker process reports the same truth. Under several
ASGI workers set ``PROMETHEUS_MULTIPROC_DIR`` (an empty directory per host):
prometheus_client's multiprocess mode then merges the workers' files; the
health gauges use ``mostrecent`` and the connection gauge ``livesum``.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
OLLAMA_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 80.0)
#: Around the chat-turn overhead target (p95 ≤ 50 ms, bench/chat_load.py), with room above it.
TURN_BUCKETS = (0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5)
TOKEN_BUCKETS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)

FRESHNESS = Gauge(
    "memdesk_memory_freshness_ratio", "Valid memories / all memories, per tenant (healthy > 0.85)",
    ["tenant"], multiprocess_mode="mostrecent",
)  # fmt: skip
HIT_RATE = Gauge(
    "memdesk_memory_hit_rate", "Recalled memories used in a reply / recalled memories, sliding window (healthy > 0.70)",
    ["tenant"], multiprocess_mode="mostrecent",
)  # fmt: skip
AMNESIA_ALERTS = Counter("memdesk_amnesia_alerts", "Amnesia alerts fired", ["tenant"])
RECALL_LATENCY = Histogram(
    "memdesk_recall_latency_seconds", "Recall latency per stage", ["stage"], buckets=LATENCY_BUCKETS
)
PROMPT_TOKENS = Histogram("memdesk_prompt_tokens", "Prompt size in Qwen2.5 tokens", buckets=TOKEN_BUCKETS)
OLLAMA_TTFT = Histogram("memdesk_ollama_ttft_seconds", "Ollama time to first token", buckets=OLLAMA_BUCKETS)
OLLAMA_LATENCY = Histogram("memdesk_ollama_latency_seconds", "Ollama whole-reply latency", buckets=OLLAMA_BUCKETS)
TURN_OVERHEAD = Histogram(
    "memdesk_turn_overhead_seconds",
    "Chat turn time memdesk adds to the model's: from the message's arrival until its reply is stored, less the "
    "generation (model calls and the tool calls between them); completed turns only",
    buckets=TURN_BUCKETS,
)
TURN_STAGE = Histogram(
    "memdesk_turn_stage_seconds",
    "Chat turn time per unit of work (store: the user message; prepare: extraction, recall, prompt; finish: the "
    "reply and its feedback), waiting for a database thread and connection included",
    ["stage"],
    buckets=TURN_BUCKETS,
)
OLLAMA_ERRORS = Counter("memdesk_ollama_errors", "Failed model calls", ["code"])
TOOL_CALLS = Counter("memdesk_tool_calls", "Tenant tool calls", ["tenant", "tool", "outcome"])
WEBSOCKETS = Gauge("memdesk_websocket_connections", "Open chat WebSockets", multiprocess_mode="livesum")
BATCH_ITEMS = Counter("memdesk_batch_items", "Batch items processed", ["tenant", "status"])
CLEANUP = Counter("memdesk_memory_cleanup", "Memories removed by cleanup", ["tenant"])


def observe_recall(timings_ms: dict[str, float]) -> None:
    for stage in ("rule", "vector", "rerank", "total"):
        if stage in timings_ms:
            RECALL_LATENCY.labels(stage=stage).observe(timings_ms[stage] / 1000.0)
