"""docs/api.md (with docs/api-extensions.md) against the OpenAPI schema and the URL configuration: every REST
operation the schema serves is documented, every operation the docs name is served, and every operation of the
team's contract is documented or named under "Not yet served".

The notation: an operation is `` `METHOD /path` `` (or `` `GET | PATCH | DELETE /path` ``) in backticks,
parameters as ``<name>``; the schema's ``{memory_id}`` and the docs' ``<id>`` are one slot. Text after ``?`` is a
query, not the path. An elided path (`` `GET …/batches/<task_id>` ``) names nothing and is not checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import Resolver404, resolve

ROOT = Path(__file__).resolve().parents[2]
API_DOC = ROOT / "docs" / "api.md"
EXTENSIONS_DOC = ROOT / "docs" / "api-extensions.md"
#: The team's contract, as tests/ops/test_api_contract_end_users.py reads it (the copy equals it where both exist).
SHARED_API_MD = ROOT.parent / "shared" / "API.md"
CONTRACT = SHARED_API_MD if SHARED_API_MD.exists() else Path(__file__).resolve().parent / "data" / "API.md"

NOT_YET = "Not yet served"
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
#: Paths the OpenAPI schema describes; the others (operations, pages) are checked against the URL configuration.
SCHEMA_PREFIX = "/api/v1"
_OPERATION = re.compile(r"`((?:[A-Z]+ \| )*[A-Z]+) (/[^`\s?]*)")
#: "- § Knowledge (the tenant's articles): …" in docs/api.md's last section.
_NOT_YET_ITEM = re.compile(r"^- § (.+?):", re.MULTILINE)
_WEBSOCKET = re.compile(r"\bws/[\w-]+/")

Operation = tuple[str, str]


def _normal(path: str) -> str:
    return re.sub(r"<[^>]+>|\{[^}]+\}", "{}", path.rstrip("/") or "/")


def operations(markdown: str) -> set[Operation]:
    """Every `` `METHOD /path` `` of ``markdown``, its path normalised."""
    found = set()
    for methods, path in _OPERATION.findall(markdown):
        found.update((method, path) for method in methods.split(" | ") if method in METHODS)
    return found


def sections(markdown: str) -> dict[str, str]:
    """``## Title`` → the section's text (up to the next ``## ``)."""
    parts = re.split(r"^## (.+)$", markdown, flags=re.MULTILINE)
    return {title.strip(): body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def _normalised(found: set[Operation]) -> set[Operation]:
    return {(method, _normal(path)) for method, path in found}


def _in_schema(path: str) -> bool:
    return path == SCHEMA_PREFIX or path.startswith(SCHEMA_PREFIX + "/")


@pytest.fixture(scope="module")
def served() -> set[Operation]:
    """Every (METHOD, path) of the OpenAPI schema /api/schema/ serves."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    found = {(method.upper(), _normal(path)) for path, item in schema["paths"].items() for method in item}
    assert len(found) >= 25, found  # the schema's operations, generated
    return found


@pytest.fixture(scope="module")
def doc_sections() -> dict[str, str]:
    return sections(API_DOC.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def documented(doc_sections) -> set[Operation]:
    """What docs/api.md (but its "Not yet served" note) and docs/api-extensions.md name, as written."""
    body = "".join(text for title, text in doc_sections.items() if title != NOT_YET)
    preamble = API_DOC.read_text(encoding="utf-8").split("\n## ", 1)[0]
    found = operations(preamble + body) | operations(EXTENSIONS_DOC.read_text(encoding="utf-8"))
    assert len(found) >= 30, found  # the docs' own operations, parsed
    return found


@pytest.fixture(scope="module")
def contract_sections() -> dict[str, str]:
    return sections(CONTRACT.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def not_yet_served(doc_sections, contract_sections) -> dict[str, set[Operation]]:
    """The contract's sections docs/api.md names under "Not yet served", each with its operations (none once
    everything is served and the note is gone)."""
    if NOT_YET not in doc_sections:
        return {}
    titles = _NOT_YET_ITEM.findall(doc_sections[NOT_YET])
    assert titles, f'docs/api.md § {NOT_YET} names no section as "- § <title>: …"'
    unknown = [title for title in titles if title not in contract_sections]
    assert unknown == [], f"not sections of {CONTRACT.name}: {unknown}"
    return {title: _normalised(operations(contract_sections[title])) for title in titles}


def test_every_operation_of_the_schema_is_documented(served, documented):
    # then nothing the API serves is missing from docs/api.md or docs/api-extensions.md
    missing = sorted(served - _normalised(documented))
    assert not missing, f"served but in neither docs/api.md nor docs/api-extensions.md: {missing}"


def test_every_documented_rest_operation_is_served(served, documented):
    # then every /api/v1/ operation the docs name is in the schema
    rest = {(method, path) for method, path in _normalised(documented) if _in_schema(path)}
    unserved = sorted(rest - served)
    assert not unserved, f"documented but not served (or list its section under '{NOT_YET}'): {unserved}"


def test_every_documented_page_exists(documented):
    # then the paths outside the schema (operations, pages, the schema itself) resolve to a view
    missing = []
    for _method, path in sorted(documented):
        if _in_schema(path):
            continue
        try:
            resolve(re.sub(r"<[^>]+>", "x", path))
        except Resolver404:
            missing.append(path)
    assert not missing, f"documented but no URL serves them: {missing}"


def test_every_operation_of_the_contract_is_documented_or_not_yet_served(documented, not_yet_served):
    # given the operations of the team's contract
    contract = _normalised(operations(CONTRACT.read_text(encoding="utf-8")))
    # then docs/api.md names each, or names its section as not yet served
    pending = set().union(*not_yet_served.values())
    undocumented = sorted(contract - _normalised(documented) - pending)
    assert not undocumented, f"in {CONTRACT.name} but neither in docs/api.md nor under '{NOT_YET}': {undocumented}"


def test_what_is_not_yet_served_is_not_served(served, documented, not_yet_served):
    # then an operation of a section named "Not yet served" that the API now serves fails here: document it,
    # and take its section out of the note once all of it is served
    for title, pending in not_yet_served.items():
        built = (pending - _normalised(documented)) & served
        assert not built, f"§ {title}: {sorted(built)} served now: document them in docs/api.md"


def test_every_websocket_route_is_documented():
    from chat.routing import websocket_urlpatterns

    # given the socket routes and the socket paths the docs name
    routes = {str(pattern.pattern) for pattern in websocket_urlpatterns}
    text = API_DOC.read_text(encoding="utf-8") + EXTENSIONS_DOC.read_text(encoding="utf-8")
    named = set(_WEBSOCKET.findall(text))
    # then they are the same
    assert named == routes


def test_the_notation_normalises_parameters_and_lists():
    # given a doc line with a list of methods, named parameters and a query
    line = "`GET | PATCH | DELETE /api/v1/memories/<id>` and `GET /api/v1/sessions/<session_id>/messages?before=`"
    # when its operations are read
    found = _normalised(operations(line))
    # then each method is an operation, each parameter one slot, the query dropped
    assert found == {
        ("GET", "/api/v1/memories/{}"),
        ("PATCH", "/api/v1/memories/{}"),
        ("DELETE", "/api/v1/memories/{}"),
        ("GET", "/api/v1/sessions/{}/messages"),
    }
    assert _normal("/api/v1/memories/{memory_id}") == _normal("/api/v1/memories/<id>")
