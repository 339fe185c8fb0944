"""A question unit brings its answer, and a customer's request the value it was answered with: the units of the
message after them rank as they would (``with_answers``): what the query found was asked; the answer is what the
customer needs."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.db import connection

from conversations.models import ChatSession, Message
from memory.conversation.units import is_conversation_key
from memory.recall.candidates import RecallHit
from memory.recall.ranking import weighted_score
from memory.recall.tuning import tuning
from memory.store.read import SCOPE_SQL, fetch_memories, scope_params
from tenants.models import Tenant

# The conversation units of the message that follows each question's (or request's) message in its session: the
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


#: A value an answer states: a number, a time, a code (TR9226, I4012ZAZ, 010-88785188, cb23bu).
_VALUE = re.compile(r"\d")


def states_value(content: str) -> bool:
    """Whether a unit states a value (a digit in it): what a customer's request is answered with."""
    return bool(_VALUE.search(content))


def with_answers(
    tenant: Tenant,
    session: ChatSession,
    hits: list[RecallHit],
    weights: dict[Any, float],
    as_of: datetime,
    *,
    limit: int,
) -> list[RecallHit]:
    """``hits`` ranked by their weighted score, where a unit among the first ``limit`` that was answered brings
    its answer: the units of the next message rank as it would (and never lower than on their own).

    - A question unit (either party's) brings every unit of the reply, at the question's score without its
      question weight: a question found by the query is where its answer is.
    - A customer's statement — a request: "I need a train from Ely to Cambridge on Saturday" — brings the
      units of the agent's reply that state a value (``states_value``: "TR1036 leaves at 14:36"), at its score
      times ``request_answer_weight``: what the customer asked for is what a returning customer asks about,
      while the request restates the question's own words. A reply that states no value ("What time would
      you like to leave?") is not lifted; the replies of two people chatting rarely state one, and LoCoMo's
      figures do not move (bench/RESULTS.md, "Facts found by what they were about")."""
    ranked = sorted(hits, key=lambda h: (-weighted_score(h, weights), str(h.memory.pk)))
    request_weight = float(tuning().request_answer_weight)
    # a unit that was answered → (its hit, what multiplies its score for its answer, values only)
    answered: dict[Any, tuple[RecallHit, float, bool]] = {}
    for hit in ranked[:limit]:
        if not is_conversation_key(hit.memory.key):
            continue
        if (hit.memory.data or {}).get("question"):
            answered[hit.memory.pk] = (hit, 1.0, False)
        elif request_weight > 0 and hit.memory.source_role == Message.Role.USER:
            answered[hit.memory.pk] = (hit, request_weight, True)
    if not answered:
        return ranked
    with connection.cursor() as cursor:
        cursor.execute(
            _ANSWERS_SQL.format(scope=SCOPE_SQL), {**scope_params(tenant, session, as_of), "questions": list(answered)}
        )
        pairs = cursor.fetchall()
    if not pairs:
        return ranked
    by_id = {h.memory.pk: h for h in ranked}
    missing = [a for _, a in pairs if a not in by_id]
    loaded = {m.pk: m for m in fetch_memories(tenant, "m.id = ANY(%(ids)s)", {"ids": missing})} if missing else {}
    lifted: dict[Any, float] = {}
    for asked_id, answer_id in pairs:
        asked, weight, values_only = answered[asked_id]
        answer = by_id[answer_id].memory if answer_id in by_id else loaded.get(answer_id)
        if answer is None or values_only and not states_value(answer.content):
            continue
        if answer_id not in by_id:
            by_id[answer_id] = RecallHit(
                memory=answer, stage=asked.stage, similarity=asked.similarity,
                score=round(asked.similarity * answer.relevance_score, 4), fused=asked.fused,
            )  # fmt: skip
        as_asked = asked.fused * weight * answer.relevance_score
        lifted[answer_id] = max(lifted.get(answer_id, 0.0), as_asked)
    everything = list(by_id.values())
    return sorted(
        everything, key=lambda h: (-max(weighted_score(h, weights), lifted.get(h.memory.pk, 0.0)), str(h.memory.pk))
    )
