"""The tenant's knowledge in a chat turn (docs/knowledge.md, "What the agent does with them").

- **Beside recall.** :func:`search_soon` starts ``knowledge.search_knowledge`` for the user's message on a pool
  thread of its own (with its own database connection, handed back when the search ends) and returns at once:
  ``chat.turn.prepare`` starts it right after reading the session, so the search runs while the message's facts
  are extracted and memory is recalled, and waits for it only to build the prompt. A tenant without any article
  searches nothing. For a tenant whose last turn in this process found articles the search starts earlier still,
  as the stored message's answer begins (:func:`search_early`, before the forget check and the session's read);
  the prepared turn uses it when the session's audience is the one it searched (:func:`search_for_turn`).
  The search's audience is the session's ``metadata["segment"]`` (the tenant's back end sets it
  when it opens the session), else everyone's articles only.
- **Labels.** The passages found, best first, enter the prompt as ``K1``…``K5`` (:func:`labelled`); the model
  is told to cite the labels it used (``[K1]``).
- **Citations.** :func:`citations` reads the labels the reply cites (``[K1]``, ``【K2】``, ``[K1, K3]``) and keeps
  those the prompt carried (a passage cut to fit the budget was not in front of the model); a label the prompt
  did not carry is invented, dropped and counted (``memdesk_knowledge_invented_citations``).
- **Grounded mode and content gaps.** :func:`settings_of` reads ``Tenant.settings["knowledge"]``:
  ``grounded`` (default false) and ``threshold`` (default :data:`DEFAULT_THRESHOLD`). A message *asks about the
  business* (:func:`asks_the_business`) when it is a question — one of its sentences ends with a question mark
  or a question particle (「…吗」), asks with a question word (「几点」, 「多少」, 「怎么」, 「有没有」) or opens
  with one ("what", "when", "can", "do"…) — and memory's rule stage did not read it as a question about the
  customer's own facts (「我的订单到哪了」: ``RecallResult.rule_keys``). A greeting or a thank-you is not a
  question; 「我的手机号是多少」 is the customer's, not the business's. Such a message with no passage scoring at
  least the threshold is a content gap (recorded for staff, counted); in grounded mode it is answered without
  the model: the agent says it does not know and offers a person (:func:`grounded_reply`), counted as
  ``memdesk_knowledge_grounded_replies``. The score is search's fused rank score (``knowledge.search``): first by
  the words alone is 2/3, by the meaning alone 1/3, so the default threshold asks that both legs, the words and the
  meaning, find the passage.
"""

from __future__ import annotations

import logging
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from chat import metrics
from chat.handoff.options import handoff_settings
from chat.prompt.build import knowledge_line
from config.db.sql import release_connection
from conversations.models import ChatSession
from knowledge import KnowledgeHit, search_knowledge
from tenants.models import Tenant

logger = logging.getLogger(__name__)

#: Passages a prompt carries (the budget may cut the last ones).
KNOWLEDGE_K = 5
#: A passage passes when its score reaches this (tenants set ``settings["knowledge"]["threshold"]``).
DEFAULT_THRESHOLD = 0.7
#: The longest a turn waits for its knowledge search once everything else is ready; past it, no knowledge.
SEARCH_WAIT_S = 10.0
LABEL_PREFIX = "K"

# [K1], 【K2】, [K1, K3], [k1]: the labels a reply cites.
_CITE = re.compile(r"[\[【]\s*(K\d{1,2}(?:\s*[,，、;；/]\s*K\d{1,2})*)\s*[\]】]", re.IGNORECASE)
# One sentence that asks: a question mark or particle at its end, a question word in it, an English one opening it.
_QUESTION = re.compile(
    r"[?？]\s*$|[吗么呢]\s*[。！!～~]*\s*$"
    r"|多少|几[点号天个次时岁位种家]|什么|啥|哪[里儿个天些家]|怎么|怎样|如何|为什么|是不是|有没有|能不能|可不可以|是否|能否"
    r"|^(?i:(?:what|when|where|who|whom|which|why|how|is|are|do|does|did|can|could|will|would|should|may|have|has)\b)"
)
_SENTENCE = re.compile(r"(?<=[。！!？?；;\n])|(?<=[.])\s+")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _search_pool() -> ThreadPoolExecutor:
    """Threads that run knowledge searches beside a turn's extraction and recall; each search opens its own
    connection and hands it back when it ends (a turn's connection stays with its own thread)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="knowledge-search")
    return _pool


@dataclass(frozen=True)
class KnowledgeSettings:
    grounded: bool = False
    threshold: float = DEFAULT_THRESHOLD


def settings_of(tenant: Tenant) -> KnowledgeSettings:
    """``Tenant.settings["knowledge"]``; a missing or malformed key takes its default (a typo in the admin must
    not fail every turn)."""
    conf = tenant.settings.get("knowledge") if isinstance(tenant.settings, dict) else None
    conf = conf if isinstance(conf, dict) else {}
    grounded = conf.get("grounded")
    threshold = conf.get("threshold")
    ok = isinstance(threshold, int | float) and not isinstance(threshold, bool) and 0 <= threshold <= 1
    return KnowledgeSettings(
        grounded=grounded if isinstance(grounded, bool) else False,
        threshold=float(threshold) if ok else DEFAULT_THRESHOLD,
    )


def segment_of(session: ChatSession) -> str | None:
    value = session.metadata.get("segment") if isinstance(session.metadata, dict) else None
    return value.strip() if isinstance(value, str) and value.strip() else None


def _search(tenant: Tenant, text: str, segment: str | None) -> list[KnowledgeHit]:
    try:
        return search_knowledge(tenant, text, k=KNOWLEDGE_K, segment=segment)
    except Exception:  # the turn goes on without knowledge rather than failing the customer's message
        logger.exception("knowledge search failed for tenant %s", tenant.slug)
        return []
    finally:
        release_connection()


def search_soon(tenant: Tenant, session: ChatSession, text: str) -> Future[list[KnowledgeHit]]:
    """Start the turn's knowledge search on a pool thread and return at once (the module's docstring)."""
    return _search_pool().submit(_search, tenant, text, segment_of(session))


@dataclass(frozen=True)
class EarlySearch:
    """A search started when the turn began (:func:`search_early`), with the audience it searched for."""

    segment: str | None
    future: Future[list[KnowledgeHit]]


#: Tenants whose last turn in this process found articles (``prepare_turn`` records it): their next turn starts
#: its search as soon as it begins, before the turn's state is read.
_with_knowledge: dict[object, bool] = {}


def search_early(tenant: Tenant, session: ChatSession, text: str) -> EarlySearch | None:
    """The turn's search started at once, for a tenant whose last turn in this process had articles (else None:
    ``prepare_turn`` starts it once it has read whether the tenant has any)."""
    if not _with_knowledge.get(tenant.pk):
        return None
    return EarlySearch(segment_of(session), search_soon(tenant, session, text))


def search_for_turn(
    tenant: Tenant, session: ChatSession, text: str, has_knowledge: bool, early: EarlySearch | None
) -> Future[list[KnowledgeHit]] | None:
    """The turn's search, given what its state says (``has_knowledge``, the session as read): the early one when
    it searched the session's audience, else a new one; None for a tenant without articles."""
    _with_knowledge[tenant.pk] = has_knowledge
    if not has_knowledge:
        return None
    if early is not None and early.segment == segment_of(session):
        return early.future
    return search_soon(tenant, session, text)


def finished(search: Future[list[KnowledgeHit]] | None) -> list[KnowledgeHit]:
    """The search's passages, waiting for it at most ``SEARCH_WAIT_S``; none when there was no search."""
    if search is None:
        return []
    try:
        return search.result(timeout=SEARCH_WAIT_S)
    except FutureTimeout:
        logger.warning("knowledge search took over %ss; the turn goes on without it", SEARCH_WAIT_S)
        return []


def labelled(hits: list[KnowledgeHit]) -> list[tuple[str, KnowledgeHit]]:
    """``(K1, best), (K2, next)…``: the labels of this prompt's passages."""
    return [(f"{LABEL_PREFIX}{i}", hit) for i, hit in enumerate(hits, start=1)]


def prompt_lines(passages: list[tuple[str, KnowledgeHit]]) -> list[tuple[str, str]]:
    """The passages as ``PromptParts.knowledge`` takes them."""
    return [(label, knowledge_line(hit.title, hit.heading_path, hit.text)) for label, hit in passages]


def asks_the_business(text: str, rule_keys: list[str] | tuple[str, ...]) -> bool:
    """Whether ``text`` asks about the business (the module's docstring): a question, not about the customer's
    own facts."""
    if rule_keys:
        return False
    return any(_QUESTION.search(sentence.strip()) for sentence in _SENTENCE.split(text) if sentence.strip())


def best_score(hits: list[KnowledgeHit]) -> float:
    return max((hit.score for hit in hits), default=0.0)


def shown(passages: list[tuple[str, KnowledgeHit]], trimmed: list[str]) -> dict[str, KnowledgeHit]:
    """The labelled passages the final prompt still carried (``knowledge[i]`` in ``trimmed`` was cut)."""
    cut = {int(t[len("knowledge[") : -1]) for t in trimmed if t.startswith("knowledge[")}
    return {label: hit for index, (label, hit) in enumerate(passages) if index not in cut}


def citations(reply: str, carried: dict[str, KnowledgeHit]) -> tuple[list[tuple[str, KnowledgeHit]], list[str]]:
    """The passages ``reply`` cites that its prompt carried, in the order first cited, each once; and the
    labels it cites that the prompt did not carry (invented), each once."""
    cited: list[tuple[str, KnowledgeHit]] = []
    invented: list[str] = []
    seen: set[str] = set()
    for group in _CITE.findall(reply):
        for raw in re.split(r"[,，、;；/]", group):
            label = raw.strip().upper()
            if not label or label in seen:
                continue
            seen.add(label)
            if label in carried:
                cited.append((label, carried[label]))
            else:
                invented.append(label)
    return cited, invented


def count_citations(tenant: Tenant, cited: int, invented: int) -> None:
    if cited:
        metrics.KNOWLEDGE_CITATIONS.labels(tenant=tenant.slug).inc(cited)
    if invented:
        metrics.KNOWLEDGE_INVENTED_CITATIONS.labels(tenant=tenant.slug).inc(invented)


_GROUNDED = {
    "zh": "抱歉，我们的资料里没有找到这个问题的答案，我不想凭猜测给您不准确的信息。",
    "en": "I'm sorry, our help articles don't answer this, and I'd rather not guess and tell you something wrong.",
}
_OFFER = {
    "zh": "如果需要，我可以为您转接人工客服：回复「转人工」即可。",
    "en": ' If you like, I can put you through to a person: just say "talk to a person".',
}


def grounded_reply(tenant: Tenant) -> tuple[str, bool]:
    """The grounded answer to a question the knowledge does not answer, and whether it offers a person: it
    does where the end user may ask for one (``chat.handoff.options``: ``user_request``, on by default), and
    the phrase it suggests is one the handoff's trigger hears."""
    lang = "zh" if (tenant.language or "zh").lower().startswith("zh") else "en"
    offer = handoff_settings(tenant).user_request
    return _GROUNDED[lang] + (_OFFER[lang] if offer else ""), offer
