"""Bulk import: JSON Lines and Markdown/HTML files over REST, a folder or a .jsonl file with the command. All or
nothing; an import run twice writes nothing twice; a changed article gets a new version."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from knowledge import search_knowledge
from knowledge.models import Article, ArticleVersion
from tenants.rls import tenant_scope

IMPORT = "/api/v1/knowledge/import"


def _jsonl(*articles):
    return "\n".join(json.dumps(a, ensure_ascii=False) for a in articles)


def _article(external_id, body, **fields):
    return {"external_id": external_id, "title": external_id, "body": body, "format": "markdown", **fields}


def _counts(ctx):
    with tenant_scope(ctx.tenant):
        return Article.objects.for_tenant(ctx.tenant).count(), ArticleVersion.objects.for_tenant(ctx.tenant).count()


def test_jsonl_over_rest_creates_then_updates_only_what_changed(globex):
    body = _jsonl(_article("a", "Alpha text."), _article("b", "Beta text."))
    # when imported
    first = globex.client.generic("POST", IMPORT, body, content_type="application/x-ndjson")
    # then both are created
    assert first.status_code == 200, first.content
    assert first.json() == {"created": 2, "updated": 0, "unchanged": 0}
    # when imported again, one article changed
    again = _jsonl(_article("a", "Alpha text."), _article("b", "Beta text, revised."))
    second = globex.client.generic("POST", IMPORT, again, content_type="application/x-ndjson")
    # then only that one gets a new version
    assert second.json() == {"created": 0, "updated": 1, "unchanged": 1}
    assert _counts(globex) == (2, 3)
    assert [h.text for h in search_knowledge(globex.tenant, "beta")] == ["Beta text, revised."]


def test_a_bad_line_stores_nothing_and_names_the_line(globex):
    body = _jsonl(_article("a", "Alpha text."), _article("b", "Beta.", language="xx"))
    response = globex.client.generic("POST", IMPORT, body, content_type="application/x-ndjson")
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["item"]) == ("unknown_language", "line 2")
    assert _counts(globex) == (0, 0)


def test_an_overlap_in_the_last_item_stores_none_of_the_others(globex):
    # given an article whose current version starts in 2030
    globex.client.generic(
        "POST",
        IMPORT,
        _jsonl(_article("a", "Old.", valid_from="2030-01-01T00:00:00Z")),
        content_type="application/x-ndjson",
    )
    before = _counts(globex)
    # when an import creates one article and puts an overlapping version of the first
    body = _jsonl(_article("new", "New article."), _article("a", "Newer.", valid_from="2029-01-01T00:00:00Z"))
    response = globex.client.generic("POST", IMPORT, body, content_type="application/x-ndjson")
    # then it is refused whole
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "overlapping_validity"
    assert response.json()["error"]["item"] == "line 2"
    assert _counts(globex) == before


@pytest.mark.parametrize(
    ("body", "content_type", "code"),
    [
        ("", "application/x-ndjson", "invalid_import"),
        ("{not json", "application/x-ndjson", "invalid_import"),
        ('{"articles": []}', "application/json", "invalid_import"),
        (_jsonl(_article("a", "x"), _article("a", "y")), "application/x-ndjson", "invalid_import"),
        (_jsonl(_article("a", "x", format="pdf")), "application/x-ndjson", "unknown_format"),
        (_jsonl(_article("a", "")), "application/x-ndjson", "empty_body"),
    ],
)
def test_bad_imports_are_400_and_store_nothing(globex, body, content_type, code):
    response = globex.client.generic("POST", IMPORT, body, content_type=content_type)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code
    assert _counts(globex) == (0, 0)


def test_markdown_and_html_files_over_multipart(globex):
    files = [
        SimpleUploadedFile("returns.md", b"---\ntags: returns, policy\n---\n# Returns\n\nReturn within 30 days."),
        SimpleUploadedFile("warranty.html", b"<h1>Warranty</h1><p>Two years.<script>x()</script></p>"),
    ]
    response = globex.client.post(IMPORT, {"files": files}, format="multipart")
    assert response.status_code == 200, response.content
    assert response.json() == {"created": 2, "updated": 0, "unchanged": 0}
    articles = {a["external_id"]: a for a in globex.client.get("/api/v1/knowledge/articles").json()["articles"]}
    assert (articles["returns.md"]["title"], articles["returns.md"]["tags"]) == ("Returns", ["returns", "policy"])
    assert articles["warranty.html"]["title"] == "Warranty"
    # a file of another kind is refused, nothing stored
    bad = globex.client.post(IMPORT, {"files": [SimpleUploadedFile("a.pdf", b"%PDF")]}, format="multipart")
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "unknown_format")
    assert _counts(globex) == (2, 2)


def test_the_command_imports_a_folder_and_again_writes_nothing(globex, tmp_path):
    # given a folder of Markdown and HTML files
    (tmp_path / "faq").mkdir()
    (tmp_path / "faq" / "hours.md").write_text("# Opening hours\n\nWe are open from 9 to 17.", encoding="utf-8")
    (tmp_path / "refunds.html").write_text("<h1>Refunds</h1><p>Refunds take five days.</p>", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("ignored", encoding="utf-8")
    # when the command imports it, twice
    out = StringIO()
    call_command("import_knowledge", "globex", str(tmp_path), "--no-progress", stdout=out, stderr=StringIO())
    call_command("import_knowledge", "globex", str(tmp_path), "--no-progress", stdout=out, stderr=StringIO())
    # then the first run created both, the second changed nothing
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first == {"created": 2, "updated": 0, "unchanged": 0}
    assert second == {"created": 0, "updated": 0, "unchanged": 2}
    assert search_knowledge(globex.tenant, "opening hours")[0].text == "We are open from 9 to 17."


def test_the_command_imports_jsonl_and_refuses_a_bad_file_whole(globex, tmp_path):
    good = tmp_path / "kb.jsonl"
    good.write_text(_jsonl(_article("a", "Alpha."), _article("b", "Beta.")), encoding="utf-8")
    out = StringIO()
    call_command("import_knowledge", "globex", str(good), "--no-progress", stdout=out, stderr=StringIO())
    assert json.loads(out.getvalue()) == {"created": 2, "updated": 0, "unchanged": 0}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_jsonl(_article("c", "Gamma."), _article("d", "<p>x</p>", format="docx")), encoding="utf-8")
    with pytest.raises(CommandError, match="line 2"):
        call_command("import_knowledge", "globex", str(bad), "--no-progress", stdout=StringIO(), stderr=StringIO())
    assert _counts(globex) == (2, 2)
    with pytest.raises(CommandError, match="no tenant"):
        call_command("import_knowledge", "nobody", str(good), stdout=StringIO(), stderr=StringIO())
