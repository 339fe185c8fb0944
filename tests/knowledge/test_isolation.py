"""Another tenant's knowledge never reaches a tenant: not over the API, not through search_knowledge, and not
through raw SQL either (row-level security alone, the second wall)."""

from __future__ import annotations

import pytest
from django.db import connection

from knowledge import search_knowledge
from knowledge.models import Article
from tenants.rls import tenant_scope
from tenants.scoping import UnscopedQueryError
from tests.knowledge.conftest import write_article

TABLES = ("knowledge_article", "knowledge_articleversion", "knowledge_passage")


def _raw_count(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608 - fixed table names
        return cursor.fetchone()[0]


@pytest.fixture
def two_kbs(acme, globex):
    secret = write_article(acme, "The acme staff discount code is ACME-4242.", title="Staff discount")
    public = write_article(globex, "Globex ships worldwide within a week.", title="Shipping")
    return secret, public


def test_another_tenants_articles_are_never_returned(two_kbs, acme, globex):
    secret, public = two_kbs
    # then globex's search for acme's words finds nothing of acme's
    assert search_knowledge(globex.tenant, "staff discount code ACME-4242") == []
    assert [hit.article_id for hit in search_knowledge(acme.tenant, "discount code ACME-4242")] == [str(secret.pk)]
    # and over the API acme's article is not found, not listed, not searchable, not changeable
    assert globex.client.get(f"/api/v1/knowledge/articles/{secret.pk}").status_code == 404
    assert [a["id"] for a in globex.client.get("/api/v1/knowledge/articles").json()["articles"]] == [str(public.pk)]
    found = globex.client.post("/api/v1/knowledge/search", {"query": "ACME-4242 discount"}, format="json").json()
    assert found["results"] == []
    assert globex.client.post(f"/api/v1/knowledge/articles/{secret.pk}/retire", {}, format="json").status_code == 404
    assert acme.client.get(f"/api/v1/knowledge/articles/{secret.pk}").json()["versions"][0]["valid_until"] is None


@pytest.mark.parametrize("table", TABLES)
def test_raw_sql_without_a_scope_sees_no_knowledge(two_kbs, table):
    assert _raw_count(table) == 0


@pytest.mark.parametrize("table", TABLES)
def test_raw_sql_in_a_tenants_scope_sees_only_its_own(two_kbs, acme, globex, table):
    with tenant_scope(acme.tenant):
        mine = _raw_count(table)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {table} WHERE tenant_id = %s", [str(globex.tenant.pk)])  # noqa: S608
            assert cursor.fetchone()[0] == 0
    assert mine >= 1


def test_the_search_sql_alone_is_held_by_rls(two_kbs, acme, globex):
    # given the search's own statements, both legs, run for acme's tenant id
    from knowledge import search as search_module
    from knowledge.indexing import knowledge_model
    from memory.embeddings import embed_one

    model = knowledge_model(acme.tenant)
    params = {
        "tenant": acme.tenant.pk, "as_of": "2999-01-01", "segment": "", "model": model, "n": 10, "k1": 1.2, "b": 0.75,
        "qvec": search_module._vector_literal(embed_one("staff discount code", model=model, kind="query")),
    }  # fmt: skip
    terms = ["staff", "discount"]

    def legs() -> tuple[list, list]:
        with connection.cursor() as cursor:
            return search_module._vector(cursor, params), search_module._lexical(cursor, terms, params)

    # in acme's own scope they find acme's passage by its meaning and by its words
    with tenant_scope(acme.tenant):
        near, lexical = legs()
    assert len(near) == 1
    assert len(lexical) == 1
    # inside globex's scope (a scoping bug) row-level security returns none of acme's passages
    with tenant_scope(globex.tenant):
        assert legs() == ([], [])


def test_the_orm_refuses_an_unscoped_query(db):
    with pytest.raises(UnscopedQueryError):
        list(Article.objects.all())


def test_the_vector_index_path_finds_what_exact_distances_find_and_never_another_tenants(
    two_kbs, acme, globex, monkeypatch
):
    # given more articles for both tenants, with overlapping words
    for i in range(12):
        write_article(acme, f"Acme store {i} opens at {8 + i % 3} am and sells discount shoes.", title=f"Store {i}")
        write_article(globex, f"Globex store {i} opens at {9 + i % 2} am and sells discount hats.", title=f"Shop {i}")
    from knowledge import search as search_module

    questions = ("when does the store open", "discount code", "where can I buy shoes", "staff discount code")
    exact = {q: [h.passage_id for h in search_knowledge(acme.tenant, q)] for q in questions}
    # when the search walks the HNSW index (as for a large tenant) instead of reading exact distances
    monkeypatch.setattr(search_module, "EXACT_UP_TO", 0)
    monkeypatch.setattr(search_module, "INDEX_MIN_SHARE", 0.0)
    walked = {q: search_knowledge(acme.tenant, q) for q in questions}
    # then it finds the same passages, all of them acme's
    assert {q: [h.passage_id for h in hits] for q, hits in walked.items()} == exact
    with tenant_scope(acme.tenant):
        acme_articles = {str(pk) for pk in Article.objects.for_tenant(acme.tenant).values_list("pk", flat=True)}
    assert all(h.article_id in acme_articles for hits in walked.values() for h in hits)
