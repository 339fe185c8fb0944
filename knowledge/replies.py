"""What the chat turn records about its use of the knowledge: the citations of a reply and the questions that
found nothing (content gaps). The chat runtime calls these in the transaction that stores the reply
(``chat.turn.finish``); the admin reads them (``knowledge.admin``).

- :func:`do_record_citations` — a reply's citations, one row per passage cited (``Citation``).
- :func:`do_record_gap` — a question about the business no passage answered (``ContentGap``), its secrets redacted.
- :func:`gap_key` — what groups similar questions: their distinctive words, sorted.
- :func:`content_gaps` — the gaps grouped by that key, the most asked first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Max

from knowledge.hits import KnowledgeHit
from knowledge.models import Citation, ContentGap, Passage
from memory.text import query_terms, redact

#: Words that say nothing about what was asked: a question's group is the rest. Chinese function words and
#: pronouns (rjieba cuts them off as words of their own) and English ones.
_STOPWORDS = frozenset(
    "你们 我们 你 我 您 请问 一下 想 问 的 了 吗 呢 吧 呀 啊 是 有 在 能 可以 "
    "怎么 什么 多少 几 哪 哪里 如何 要 会 还 和 "
    "a an the is are was were be do does did can could will would should shall may might i you we they it "
    "your our my me to of on in at for from by with about what when where who whom which why how please "
    "there this that these those have has had any some".split()
)
GAP_KEY_MAX = 200


def gap_key(text: str) -> str:
    """The group of a question: its words (``memory.text.query_terms``, so Chinese is segmented as search
    segments it) less :data:`_STOPWORDS`, English plurals folded, deduplicated and sorted. 「你们周日几点关门？」
    and 「周日几点关门呀」 share 「关门 几点 周日」; "What time do you close on Sundays?" and "when do you
    close on sunday" share "close sunday time" only where both say "time" — the grouping is deliberately
    literal, so staff never see two different questions counted as one."""
    words = set()
    for term in query_terms(text):
        word = term.lower()
        if word in _STOPWORDS or not re.search(r"\w", word):
            continue
        if re.fullmatch(r"[a-z]{4,}s", word) and not word.endswith("ss"):
            word = word[:-1]
        words.add(word)
    key = " ".join(sorted(words)) or " ".join(text.lower().split())
    return key[:GAP_KEY_MAX]


def do_record_citations(tenant: Any, message_id: Any, cited: Sequence[tuple[str, KnowledgeHit]]) -> int:
    """Store that reply ``message_id`` cited each ``(label, hit)``; a passage no longer stored (its article
    deleted since the prompt was built) is skipped. Returns the rows written. Call inside the tenant's scope."""
    if not cited:
        return 0
    public_ids = [hit.passage_id for _, hit in cited]
    versions = dict(
        Passage.objects.for_tenant(tenant).filter(public_id__in=public_ids).values_list("public_id", "version_id")
    )
    rows = [
        Citation(tenant=tenant, message_id=message_id, version_id=versions[hit.passage_id], passage_id=hit.passage_id,
                 label=label)
        for label, hit in cited
        if hit.passage_id in versions
    ]  # fmt: skip
    Citation.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def do_record_gap(tenant: Any, message_id: Any, text: str, best_score: float) -> ContentGap:
    """Store a question about the business that no passage answered (its best passage's score, 0 for none).
    What the customer typed is redacted first (``memory.text.redact``): a gap is read by staff who write
    articles, and a password pasted into a question is nobody's business."""
    clean = redact(text)
    return ContentGap.objects.create(
        tenant=tenant, message_id=message_id, text=clean[:2000], group_key=gap_key(clean), best_score=best_score
    )


@dataclass(frozen=True)
class GapGroup:
    """Similar questions that found nothing: their shared words, how many were asked, an example, the last time."""

    group_key: str
    count: int
    example: str
    last_asked: datetime


def content_gaps(tenant: Any, *, since: datetime | None = None, limit: int = 100) -> list[GapGroup]:
    """The tenant's content gaps grouped by :func:`gap_key`, the most asked first (then the most recent)."""
    gaps = ContentGap.objects.for_tenant(tenant)
    if since is not None:
        gaps = gaps.filter(created_at__gte=since)
    groups = list(
        gaps.values("group_key")
        .annotate(count=Count("id"), last_asked=Max("created_at"), last_id=Max("id"))
        .order_by("-count", "-last_asked")[:limit]
    )
    examples = dict(
        ContentGap.objects.for_tenant(tenant).filter(id__in=[g["last_id"] for g in groups]).values_list("id", "text")
    )
    return [GapGroup(g["group_key"], g["count"], examples.get(g["last_id"], ""), g["last_asked"]) for g in groups]
