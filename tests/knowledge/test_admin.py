"""Articles in the admin: read-only, with the version history and the diff between consecutive versions; staff
of another tenant never see them; owners may retire, agents may only look."""

from __future__ import annotations

from knowledge import search_knowledge
from tests.factories import staff_login
from tests.knowledge.conftest import new_version, write_article


def test_the_article_page_shows_versions_and_their_diff(staff, acme):
    # given an article with two versions
    article = write_article(acme, "退货期限为7天。", title="退货", valid_from="2026-01-01T00:00:00Z")
    new_version(acme, article, "退货期限为15天。", title="退货", valid_from="2026-03-01T00:00:00Z")
    # when its owner opens it
    page = staff_login(staff["owner_a"]).get(f"/admin/knowledge/article/{article.pk}/change/")
    # then the history shows the change, line by line
    html = page.content.decode()
    assert page.status_code == 200
    assert "-退货期限为7天。" in html
    assert "+退货期限为15天。" in html
    # and the list shows it to acme's staff only
    assert "退货" in staff_login(staff["owner_a"]).get("/admin/knowledge/article/").content.decode()
    outsider = staff_login(staff["outsider"])
    assert outsider.get(f"/admin/knowledge/article/{article.pk}/change/").status_code in (302, 404)
    assert "退货" not in outsider.get("/admin/knowledge/article/").content.decode()


def test_owners_retire_agents_cannot(staff, acme):
    article = write_article(acme, "Promo code SPRING gives 10 percent off.", title="Promo")
    action = {"action": "retire_now", "_selected_action": [str(article.pk)]}
    # when an agent tries, nothing happens; when the owner does, the article is retired
    staff_login(staff["agent_a"]).post("/admin/knowledge/article/", action)
    assert search_knowledge(acme.tenant, "promo code SPRING")
    staff_login(staff["owner_a"]).post("/admin/knowledge/article/", action)
    assert search_knowledge(acme.tenant, "promo code SPRING") == []
