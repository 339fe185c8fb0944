"""Versions and validity: a new version supersedes the current one from its valid_from; a retired article is never
served after its end; as_of finds the version that was valid then; overlapping validity is refused and stores
nothing."""

from __future__ import annotations

import pytest

from knowledge import search_knowledge, services
from knowledge.models import ArticleVersion
from tenants.rls import tenant_scope
from tests.knowledge.conftest import new_version, write_article

JAN = "2026-01-01T00:00:00Z"
MAR = "2026-03-01T00:00:00Z"


def _versions(ctx, article):
    with tenant_scope(ctx.tenant):
        return list(
            ArticleVersion.objects.for_tenant(ctx.tenant)
            .filter(article=article)
            .order_by("number")
            .values_list("number", "valid_from", "valid_until")
        )


def _texts(ctx, query, as_of):
    return [hit.text for hit in search_knowledge(ctx.tenant, query, as_of=services.parse_time(as_of, "as_of"))]


def test_an_article_replaced_on_a_date_serves_each_version_in_its_time(globex):
    # given a shipping article valid from January, replaced from March
    article = write_article(globex, "Standard shipping costs 5 dollars.", title="Shipping", valid_from=JAN)
    new_version(globex, article, "Standard shipping costs 8 dollars.", title="Shipping", valid_from=MAR)
    # then the old version ends when the new one starts
    (_, from1, until1), (_, from2, until2) = _versions(globex, article)
    assert until1 == from2 == services.parse_time(MAR, "x")
    assert until2 is None
    # and each time asked finds the version valid then, never the other
    assert _texts(globex, "shipping cost", "2026-02-01T00:00:00Z") == ["Standard shipping costs 5 dollars."]
    assert _texts(globex, "shipping cost", "2026-04-01T00:00:00Z") == ["Standard shipping costs 8 dollars."]
    assert _texts(globex, "shipping cost", "2025-12-01T00:00:00Z") == []


def test_a_retired_promotion_is_never_served_after_its_end(globex):
    # given a promotion, retired at the end of January
    article = write_article(globex, "Spring sale: 20 percent off all shoes.", title="Spring sale", valid_from=JAN)
    services.do_retire_article(globex.tenant, article.pk, at=services.parse_time("2026-02-01T00:00:00Z", "at"))
    # then it is served in January only
    assert _texts(globex, "spring sale shoes", "2026-01-15T00:00:00Z") == ["Spring sale: 20 percent off all shoes."]
    assert _texts(globex, "spring sale shoes", "2026-02-01T00:00:00Z") == []
    assert search_knowledge(globex.tenant, "spring sale shoes") == []


def test_retire_cancels_a_version_scheduled_after_it(globex):
    # given a version scheduled for a future date
    article = write_article(globex, "Returns within 30 days.", title="Returns", valid_from=JAN)
    new_version(globex, article, "Returns within 60 days.", title="Returns", valid_from="2030-01-01T00:00:00Z")
    # when the article is retired now
    services.do_retire_article(globex.tenant, article.pk)
    # then neither version is served, now or later
    assert search_knowledge(globex.tenant, "returns days") == []
    assert _texts(globex, "returns days", "2031-01-01T00:00:00Z") == []
    # and both are kept for the record
    assert len(_versions(globex, article)) == 2


def test_a_new_version_starting_before_the_current_one_overlaps_and_stores_nothing(globex):
    # given an article whose current version starts in March
    article = write_article(globex, "Hours: 9 to 17.", title="Hours", valid_from=MAR)
    before = _versions(globex, article)
    # when a new version would start before (or when) it does
    for start in (JAN, MAR):
        checked = services.check_article_input(
            {"title": "Hours", "body": "Hours: 8 to 18.", "format": "markdown", "valid_from": start}
        )
        with pytest.raises(services.OverlappingValidity):
            services.do_update_article(globex.tenant, article.pk, checked, services.prepare(globex.tenant, checked))
    # then nothing changed
    assert _versions(globex, article) == before


def test_a_version_overlapping_a_scheduled_one_is_refused(globex):
    # given a current version and one scheduled for 2030
    article = write_article(globex, "Price 10.", title="Price", valid_from=JAN)
    new_version(globex, article, "Price 12.", title="Price", valid_from="2030-01-01T00:00:00Z")
    # when a version from March with no end would run into it
    checked = services.check_article_input(
        {"title": "Price", "body": "Price 11.", "format": "markdown", "valid_from": MAR}
    )
    with pytest.raises(services.OverlappingValidity):
        services.do_update_article(globex.tenant, article.pk, checked, services.prepare(globex.tenant, checked))
    # then one that ends before 2030 is accepted, between the two
    new_version(globex, article, "Price 11.", title="Price", valid_from=MAR, valid_until="2029-06-01T00:00:00Z")
    assert _texts(globex, "price", "2028-01-01T00:00:00Z") == ["Price 11."]
    assert _texts(globex, "price", "2029-07-01T00:00:00Z") == []
    assert _texts(globex, "price", "2030-02-01T00:00:00Z") == ["Price 12."]


def test_validity_in_python_and_sql_agree(globex):
    # given versions with closed and open intervals
    article = write_article(globex, "Alpha rule.", title="Alpha", valid_from=JAN)
    new_version(globex, article, "Beta rule.", title="Alpha", valid_from=MAR)
    with tenant_scope(globex.tenant):
        versions = list(ArticleVersion.objects.for_tenant(globex.tenant).filter(article=article))
    # then for each instant the version valid_at says is the one search serves
    for when in (JAN, "2026-02-28T23:59:59Z", MAR, "2027-01-01T00:00:00Z", "2025-01-01T00:00:00Z"):
        at = services.parse_time(when, "at")
        expected = [v.text for v in versions if v.valid_at(at)]
        assert _texts(globex, "rule", when) == expected
