"""A question unit brings its answer: the units of the message after a question's rank as the question would
(``with_answers``): a question found by the query is where its answer is."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection

from conversations.models import ChatSession
from memory.conversation.units import is_conversation_key
from memory.recall.candidates import RecallHit
from memory.recall.ranking import weighted_score
from memory.store.read import SCOPE_SQL, fetch_memories, scope_params
from tenants.models import Tenant

# The conversation units of the message that follows each question unit's message in its session: the
# answer to a question is what was said next (the agent's reply to the user's question, the user's reply
# to the agent's). The messages come first, in a CTE of their own: the statement is prepared, and a generic
# plan (one for every parameter value, which PostgreSQL switches to after five runs when it looks no dearer)
# that started from the scope's side read every memory of the end user to find the few answers.
_ANSWERS_SQL = """
WITH answered AS MATERIALIZED (
    SELECT q.id AS question_id, am.id AS message_id
    FROM memory_memoryunit q
    JOIN chat_message qm ON qm.tenant_id = q.tenant_id AND qm.id = q.source_message_id
    JOIN chat_message am ON am.tenant_id = qm.tenant_id AND am.session_id = qm.session_id AND am.seq = qm.seq + 1
    WHERE q.tenant_id = %(tenant)s AND q.id = ANY(%(questions)s)
)
SELECT a.question_id, m.id AS answer_id
FROM answered a JOIN memory_memoryunit m ON m.tenant_id = %(tenant)s AND m.source_message_id = a.message_id
WHERE {scope}
ORDER BY m.created_at, m.id
"""


def with_answers(
    tenant: Tenant,
    session: ChatSession,
    hits: list[RecallHit],
    weights: dict[Any, float],
    as_of: datetime,
    *,
    limit: int,
) -> list[RecallHit]:
    """``hits`` ranked by their weighted score, where a question unit among the first ``limit`` brings its
    answer: the units of the next message rank as the question would without its question weight (and
    never lower than on their own). A question found by the query is where its answer is."""
    ranked = sorted(hits, key=lambda h: (-weighted_score(h, weights), str(h.memory.pk)))
    questions = {
        h.memory.pk: h
        for h in ranked[:limit]
        if is_conversation_key(h.memory.key) and (h.memory.data or {}).get("question")
    }
    if not questions:
        return ranked
    with connection.cursor() as cursor:
        cursor.execute(
            _ANSWERS_SQL.format(scope=SCOPE_SQL), {**scope_params(tenant, session, as_of), "questions": list(questions)}
        )
        pairs = cursor.fetchall()
    if not pairs:
        return ranked
    by_id = {h.memory.pk: h for h in ranked}
    missing = [a for _, a in pairs if a not in by_id]
    loaded = {m.pk: m for m in fetch_memories(tenant, "m.id = ANY(%(ids)s)", {"ids": missing})} if missing else {}
    lifted: dict[Any, float] = {}
    for question_id, answer_id in pairs:
        question = questions[question_id]
        if answer_id not in by_id:
            if answer_id not in loaded:
                continue
            by_id[answer_id] = RecallHit(
                memory=loaded[answer_id], stage=question.stage, similarity=question.similarity,
                score=round(question.similarity * loaded[answer_id].relevance_score, 4), fused=question.fused,
            )  # fmt: skip
        as_question = question.fused * by_id[answer_id].memory.relevance_score
        lifted[answer_id] = max(lifted.get(answer_id, 0.0), as_question)
    everything = list(by_id.values())
    return sorted(
        everything, key=lambda h: (-max(weighted_score(h, weights), lifted.get(h.memory.pk, 0.0)), str(h.memory.pk))
    )
