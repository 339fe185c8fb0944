"""The staff's knowledge tools in the admin: what the agent would find for a question (as of a date), which replies
cited which article version, and the questions that found nothing grouped with counts — each for the staff's own
tenant only."""

from __future__ import annotations

import pytest

from tests.factories import open_session, staff_login
from tests.knowledge.chat_kit import citing
from tests.knowledge.conftest import new_version, write_article
from tests.knowledge.test_search import ZH_POLICY

pytestmark = pytest.mark.django_db(transaction=True)

FIND = "/admin/knowledge/article/find/"


def _send(ctx, sid, text):
    response = ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": text}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_what_would_the_agent_find_shows_passages_with_scores_as_of_a_date(staff, acme):
    # given a return policy that changed on 1 March
    article = write_article(acme, "退货期限为7天。", title="退货政策", valid_from="2026-01-01T00:00:00Z")
    new_version(acme, article, "退货期限为15天。", title="退货政策", valid_from="2026-03-01T00:00:00Z")
    owner = staff_login(staff["owner_a"])
    # when the owner asks for now, and as of February
    now = owner.get(FIND, {"tenant": acme.tenant.pk, "question": "退货期限是多久"}).content.decode()
    february = owner.get(
        FIND, {"tenant": acme.tenant.pk, "question": "退货期限是多久", "as_of": "2026-02-01 00:00"}
    ).content.decode()
    # then each shows the version served then, with its score
    assert "退货期限为15天。" in now
    assert "退货期限为7天。" not in now
    assert "退货期限为7天。" in february
    assert 'id="find-results"' in now
    assert "v2" in now
    # and the list of articles links to it
    assert FIND in owner.get("/admin/knowledge/article/").content.decode()


def test_the_find_form_offers_only_the_staffs_own_tenants(staff, acme, globex):
    write_article(acme, "退货期限为7天。", title="退货政策")
    outsider = staff_login(staff["outsider"])
    page = outsider.get(FIND, {"tenant": acme.tenant.pk, "question": "退货期限"})
    html = page.content.decode()
    assert "退货期限为7天" not in html
    assert 'id="find-results"' not in html


def test_the_articles_page_shows_which_replies_cited_which_version(staff, acme, fake_ollama):
    # given a reply that cited version 2 of an article
    article = write_article(acme, ZH_POLICY, title="售后政策", valid_from="2026-01-01T00:00:00Z")
    new_version(acme, article, ZH_POLICY.replace("3个工作日", "5个工作日"), title="售后政策")
    fake_ollama.script(citing("退款审核通过后"))
    sid = open_session(acme, "u1")["session_id"]
    reply = _send(acme, sid, "退款多久能到账？")
    assert reply["citations"][0]["version"] == 2
    # when the owner opens the article
    owner = staff_login(staff["owner_a"])
    html = owner.get(f"/admin/knowledge/article/{article.pk}/change/").content.decode()
    # then the reply is listed against version 2
    assert reply["reply_id"] in html
    assert "<td>v2</td>" in html
    # and in the citations' list, not to another tenant's staff
    assert reply["citations"][0]["passage_id"] in owner.get("/admin/knowledge/citation/").content.decode()
    outsider = staff_login(staff["outsider"]).get("/admin/knowledge/citation/").content.decode()
    assert reply["citations"][0]["passage_id"] not in outsider


def test_content_gaps_are_grouped_by_their_words_with_counts(staff, acme, fake_ollama):
    # given three customers asking what no article answers, two of them the same thing
    write_article(acme, ZH_POLICY, title="售后政策")
    for user, text in (("u1", "你们周日几点关门？"), ("u2", "周日几点关门呀"), ("u3", "你们有停车场吗？")):
        _send(acme, open_session(acme, user)["session_id"], text)
    # when the owner opens the content gaps
    html = staff_login(staff["owner_a"]).get("/admin/knowledge/contentgap/").content.decode()
    # then the same question counts twice, the most asked first
    assert "<td>2</td><td><a" in html
    assert html.index("关门 几点 周日") < html.index("停车场")
    assert "<td>1</td>" in html
    # and another tenant's staff see none of them
    assert "关门" not in staff_login(staff["outsider"]).get("/admin/knowledge/contentgap/").content.decode()
