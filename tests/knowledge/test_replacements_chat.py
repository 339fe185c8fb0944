"""Only the current version reaches the agent: an article replaced many times, each time with another value, puts
only the value of its current version in a chat turn's prompt and only that version in the reply's citations —
through the chat turn (REST), never an old one; once retired, none. A search ``as_of`` a past time still finds the
version that was valid then."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from knowledge import search_knowledge, services
from knowledge.models import ArticleVersion, Passage
from tenants.rls import tenant_scope
from tests.factories import open_session
from tests.knowledge.chat_kit import knowledge_part
from tests.knowledge.conftest import new_version, write_article

# The turn runs its database steps on other threads (and the knowledge search on one of its own): real transactions.
pytestmark = pytest.mark.django_db(transaction=True)

REPLACEMENTS = 20
QUESTION = "How much does standard shipping cost?"
TITLE = "Shipping"


def _fee(n: int) -> str:
    return f"{100 + n} dollars"  # distinct, and none a part of another ("101 dollars" is not in "1101 dollars")


def _body(n: int) -> str:
    return f"Standard shipping costs {_fee(n)} per order.\n\n## Returns\n\nReturns are free."


def _cites_the_fee(body: dict) -> str:
    """A model that reads its prompt and cites the passage that states a shipping fee."""
    labels = [label for label, line in knowledge_part(body).items() if "dollars" in line]
    return "Standard shipping costs what the article says." + "".join(f" [{label}]" for label in labels)


def _fees_in(text: str) -> set[str]:
    return set(re.findall(r"\b\d+ dollars\b", text))


def _ask(ctx, end_user: str) -> dict:
    # a new customer each time: nothing of an earlier turn is in the prompt, only what search finds now
    sid = open_session(ctx, end_user)["session_id"]
    response = ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": QUESTION}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _current_passage_ids(ctx, article, number: int) -> set[str]:
    with tenant_scope(ctx.tenant):
        version = ArticleVersion.objects.for_tenant(ctx.tenant).get(article=article, number=number)
        return set(Passage.objects.for_tenant(ctx.tenant).filter(version=version).values_list("public_id", flat=True))


def test_an_article_replaced_twenty_times_serves_only_its_current_version_to_the_turn(globex, fake_ollama):
    # given a shipping article whose first version started a month ago
    start = timezone.now() - timedelta(days=30)
    article = write_article(globex, _body(0), title=TITLE, valid_from=start.isoformat())
    fake_ollama.default_reply = _cites_the_fee
    for n in range(1, REPLACEMENTS + 1):
        # when it is replaced with another fee (each version an hour after the one before, all in the past)
        new_version(globex, article, _body(n), title=TITLE, valid_from=(start + timedelta(hours=n)).isoformat())
        # and a customer asks
        body = _ask(globex, f"customer-{n}")
        # then the prompt holds the current fee, and no fee of an earlier version anywhere
        request = fake_ollama.chat_requests[-1]
        prompt = "\n".join(str(m.get("content", "")) for m in request["messages"])
        assert _fees_in(prompt) == {_fee(n)}, f"after replacement {n}"
        assert [line for line in knowledge_part(request).values() if "dollars" in line] == [
            f"{TITLE}: Standard shipping costs {_fee(n)} per order."
        ]
        # and the reply's citations point at the current version, at one of its passages
        assert [(c["article_id"], c["version"]) for c in body["citations"]] == [(str(article.pk), n + 1)]
        assert body["citations"][0]["passage_id"] in _current_passage_ids(globex, article, n + 1)

    # when the article is retired
    services.do_retire_article(globex.tenant, article.pk)
    body = _ask(globex, "customer-after-retirement")
    # then no version of it reaches the prompt or the citations
    assert _fees_in("\n".join(str(m.get("content", "")) for m in fake_ollama.chat_requests[-1]["messages"])) == set()
    assert body["citations"] == []

    # and a search as of a past time finds the version valid then
    for n in (0, 7, REPLACEMENTS):
        hits = search_knowledge(globex.tenant, QUESTION, as_of=start + timedelta(hours=n, minutes=30))
        assert [_fees_in(hit.text) for hit in hits if "dollars" in hit.text] == [{_fee(n)}], f"as of version {n + 1}"
