"""/api/v1/knowledge/articles over the API: the contract's fields, versions by PUT, retire, list with as_of and
tag; bad input is a clear 400 in the project's error shape and stores nothing."""

from __future__ import annotations

from unittest.mock import ANY

import pytest

from knowledge.models import Article, ArticleVersion, Passage
from knowledge.services import MAX_BODY_CHARS
from tenants.rls import tenant_scope

ARTICLE_FIELDS = {
    "id", "external_id", "title", "language", "tags", "url", "segment", "version", "valid_from", "valid_until",
    "created_at",
}  # fmt: skip
BASE = "/api/v1/knowledge/articles"


def _article(**fields):
    return {"title": "Returns", "body": "# Returns\n\nReturn within 30 days.", "format": "markdown", **fields}


def _counts(ctx):
    with tenant_scope(ctx.tenant):
        return tuple(m.objects.for_tenant(ctx.tenant).count() for m in (Article, ArticleVersion, Passage))


def test_create_get_update_retire_over_the_api(globex):
    # when an article is created
    created = globex.client.post(
        BASE, _article(external_id="kb-1", tags=["returns"], url="https://help.example.com/returns"), format="json"
    )
    # then it answers the contract's Article
    assert created.status_code == 201, created.content
    article = created.json()
    assert set(article) == ARTICLE_FIELDS
    assert (article["version"], article["language"], article["valid_until"]) == (1, "en", None)
    # when a new version is PUT from a date (a PUT is the whole article: tags not sent would be none)
    body = _article(body="Return within 60 days.", valid_from="2030-01-01T00:00:00Z", tags=["returns"])
    put = globex.client.put(f"{BASE}/{article['id']}", body, format="json")
    assert put.status_code == 200, put.content
    assert (put.json()["version"], put.json()["valid_from"]) == (2, "2030-01-01T00:00:00Z")
    # then the article lists both versions, the first ending when the second starts
    detail = globex.client.get(f"{BASE}/{article['id']}").json()
    assert [(v["version"], v["valid_until"]) for v in detail["versions"]] == [(1, "2030-01-01T00:00:00Z"), (2, None)]
    assert detail["version"] == 1  # the one valid now
    # and the list by as_of shows the version valid then
    later = globex.client.get(BASE, {"as_of": "2030-06-01T00:00:00Z"}).json()["articles"]
    assert [(a["id"], a["version"]) for a in later] == [(article["id"], 2)]
    assert globex.client.get(BASE, {"tag": "returns"}).json()["articles"][0]["id"] == article["id"]
    assert globex.client.get(BASE, {"tag": "other"}).json()["articles"] == []
    # when it is retired now
    retired = globex.client.post(f"{BASE}/{article['id']}/retire", {}, format="json")
    assert retired.status_code == 200
    # then nothing of it is valid now or later
    assert globex.client.get(BASE, {"as_of": "2031-01-01T00:00:00Z"}).json()["articles"] == []
    now = globex.client.get(BASE, {"as_of": retired.json()["versions"][0]["valid_until"]}).json()["articles"]
    assert now == []


def test_a_repeated_external_id_is_409_and_stores_nothing(globex):
    assert globex.client.post(BASE, _article(external_id="kb-1"), format="json").status_code == 201
    before = _counts(globex)
    response = globex.client.post(BASE, _article(external_id="kb-1"), format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "duplicate_external_id"
    assert _counts(globex) == before


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        (_article(body=""), "empty_body"),
        (_article(body="   "), "empty_body"),
        ({"title": "x", "format": "markdown"}, "empty_body"),
        (_article(body="<script>alert(1)</script><h1>Only a heading</h1>", format="html"), "empty_body"),
        (_article(body="x" * (MAX_BODY_CHARS + 1)), "body_too_long"),
        (_article(language="fr"), "unknown_language"),
        (_article(language="klingon"), "unknown_language"),
        (_article(format="docx"), "unknown_format"),
        (_article(format=None), "unknown_format"),
        (_article(valid_from="2026-01-01"), "invalid_article"),
        (_article(valid_from="2026-03-01T00:00:00Z", valid_until="2026-02-01T00:00:00Z"), "invalid_validity"),
        (_article(url="javascript:alert(1)"), "invalid_article"),
        (_article(tags="returns"), "invalid_article"),
        (_article(surprise=1), "invalid_article"),
        (_article(body="a\x00b"), "invalid_text"),
    ],
)
def test_bad_input_is_a_clear_400_and_stores_nothing(globex, payload, code):
    # given an article already stored
    existing = globex.client.post(BASE, _article(), format="json").json()
    before = _counts(globex)
    # when bad input is posted, and put as a new version
    created = globex.client.post(BASE, payload, format="json")
    updated = globex.client.put(f"{BASE}/{existing['id']}", payload, format="json")
    # then both are 400 with the code, in the project's error shape
    for response in (created, updated):
        assert response.status_code == 400, response.content
        assert response.json()["error"]["code"] == code
        assert response.json()["error"]["message"]
    # and nothing was stored or changed
    assert _counts(globex) == before
    assert globex.client.get(f"{BASE}/{existing['id']}").json() == existing | {"versions": ANY}
    assert globex.client.get(f"{BASE}/{existing['id']}").json()["versions"][0]["valid_until"] is None


def test_an_overlapping_version_is_400_and_changes_nothing(globex):
    # given an article valid from March
    article = globex.client.post(BASE, _article(valid_from="2026-03-01T00:00:00Z"), format="json").json()
    before = globex.client.get(f"{BASE}/{article['id']}").json()
    # when a version from January is put
    response = globex.client.put(
        f"{BASE}/{article['id']}", _article(body="New text.", valid_from="2026-01-01T00:00:00Z"), format="json"
    )
    # then it is refused, naming the field, and the article is as it was
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "overlapping_validity"
    assert response.json()["error"]["field"] == "valid_from"
    assert globex.client.get(f"{BASE}/{article['id']}").json() == before


def test_html_with_scripts_is_stored_sanitised(globex):
    # when HTML with a script is posted
    body = "<h1>Gift cards</h1><p>Gift cards never expire.<script>document.cookie</script></p>"
    article = globex.client.post(BASE, _article(body=body, format="html"), format="json").json()
    # then its text and passages hold no script
    version = globex.client.get(f"{BASE}/{article['id']}").json()["versions"][0]
    assert version["text"] == "# Gift cards\n\nGift cards never expire."
    with tenant_scope(globex.tenant):
        texts = list(Passage.objects.for_tenant(globex.tenant).values_list("text", flat=True))
    assert texts == ["Gift cards never expire."]


def test_unknown_and_malformed_ids_are_404(globex):
    for article_id in ("00000000-0000-0000-0000-000000000000", "not-a-uuid"):
        for response in (
            globex.client.get(f"{BASE}/{article_id}"),
            globex.client.put(f"{BASE}/{article_id}", _article(), format="json"),
            globex.client.post(f"{BASE}/{article_id}/retire", {}, format="json"),
        ):
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "article_not_found"


def test_bad_as_of_and_search_input_are_400(globex):
    assert globex.client.get(BASE, {"as_of": "yesterday"}).json()["error"]["code"] == "invalid_as_of"
    search = "/api/v1/knowledge/search"
    assert globex.client.post(search, {"query": ""}, format="json").json()["error"]["code"] == "invalid_query"
    assert globex.client.post(search, {"query": "x", "k": 0}, format="json").json()["error"]["code"] == "invalid_k"
    assert globex.client.post(search, {"query": "x", "k": 21}, format="json").json()["error"]["code"] == "invalid_k"


def test_the_api_needs_a_tenant_key(anon_client, db):
    assert anon_client.get(BASE).status_code in (401, 403)
    assert anon_client.post("/api/v1/knowledge/search", {"query": "x"}, format="json").status_code in (401, 403)
