"""Stored memories: every write, read and change of ``MemoryUnit`` rows, each with its audit event in the same
transaction. Where a memory is superseded: ``write`` (a keyed memory replacing the live one of its slot).

- ``write`` — one memory or a batch; superseding within a slot; a repeated fact refreshing it.
- ``read`` — scoped reads and the one home of the validity rule; the prompt's anchor facts.
- ``lifecycle`` — after a write: edit, expire, extend, delete; cleanup of expired and superseded rows.
- ``audit`` — who acts, a memory's snapshot, the ``MemoryEvent`` rows.
- ``indexing`` — what a memory's search columns hold.
- ``feedback`` — relevance feedback on used memories, and the recall count.
- ``consent`` — whether memdesk may remember an end user.
- ``retention`` — a tenant's memory and history retention applied.
- ``schema`` — the strict input model and ``check_memory_input`` at the edges.
- ``health`` — freshness, hit rate and amnesia per tenant (seed S8).
"""

from memory.store.consent import memory_enabled_for_session
from memory.store.feedback import apply_feedback, feedback_sql
from memory.store.health import amnesia_phrase, check_after_turn, check_due, combine, publish_stored, tenant_health
from memory.store.read import anchor_facts, scope_q, session_values, valid_q
from memory.store.retention import do_apply_memory_retention
from memory.store.write import do_write_memory

__all__ = [
    "amnesia_phrase",
    "anchor_facts",
    "apply_feedback",
    "check_after_turn",
    "check_due",
    "combine",
    "do_apply_memory_retention",
    "do_write_memory",
    "feedback_sql",
    "memory_enabled_for_session",
    "publish_stored",
    "scope_q",
    "session_values",
    "tenant_health",
    "valid_q",
]
