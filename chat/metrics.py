"""Chat's Prometheus metrics (``memdesk_*``): turns, the model, tools, batches and sockets.

Recorded where things happen (``chat.turn.run``, ``chat.llm``, ``chat.turn.tool_rounds``, ``chat.tools.batches``,
``chat.handoff.state``,
``chat.consumers``, ``chat.turn.knowledge``). The names are a contract: the alerts in ``platform/prometheus`` and
the Grafana dashboards read them. Memory's own metrics (health gauges, recall, amnesia, cleanup) are in
``memory.metrics``. Under several ASGI workers (``PROMETHEUS_MULTIPROC_DIR``) the connection gauge is
summed over the live workers (``livesum``).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

OLLAMA_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 80.0)
#: Around the chat-turn overhead target (p95 ≤ 50 ms, bench/load/chat_load.py), with room above it.
TURN_BUCKETS = (0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5)
TOKEN_BUCKETS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)

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
# Human handoff (chat.handoff.state): handoffs by what asked for them, and the end users' ratings by who answered.
HANDOFFS = Counter("memdesk_handoffs", "Conversations handed to a person, by trigger", ["tenant", "trigger"])
CSAT = Histogram(
    "memdesk_csat",
    "End users' satisfaction ratings (1-5) by who answered (ai, staff, both); a rating replaced counts again",
    ["tenant", "handled_by"],
    buckets=(1, 2, 3, 4, 5),
)
# The tenant's knowledge in the turn (chat.turn.knowledge).
KNOWLEDGE_CITATIONS = Counter(
    "memdesk_knowledge_citations", "Passages replies cited that were in their prompt", ["tenant"]
)
KNOWLEDGE_INVENTED_CITATIONS = Counter(
    "memdesk_knowledge_invented_citations",
    "Citation labels replies gave that their prompt did not carry (dropped from the citations)",
    ["tenant"],
)
KNOWLEDGE_GROUNDED_REPLIES = Counter(
    "memdesk_knowledge_grounded_replies",
    "Questions about the business answered in grounded mode with 'I do not know' and the offer of a person",
    ["tenant"],
)
KNOWLEDGE_CONTENT_GAPS = Counter(
    "memdesk_knowledge_content_gaps", "Questions about the business no passage answered (content gaps)", ["tenant"]
)
