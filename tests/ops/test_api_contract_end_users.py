"""API.md's "End users" and "Past conversations (import)" sections against the OpenAPI schema: every path they
name is served, and every path the schema serves under /api/v1/end-users and /api/v1/me is in the contract (or
documented as an extension)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
#: The contract lives beside the project (../shared/API.md) on the team's machines; a clone elsewhere (CI) has
#: the copy kept under tests/ops/data, which must equal it wherever both exist (the last test).
SHARED_API_MD = ROOT.parent / "shared" / "API.md"
COPY_API_MD = Path(__file__).resolve().parent / "data" / "API.md"
API_MD = SHARED_API_MD if SHARED_API_MD.exists() else COPY_API_MD
EXTENSIONS_MD = ROOT / "docs" / "api-extensions.md"
PREFIXES = ("/api/v1/end-users", "/api/v1/me")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
#: "`GET /api/v1/me/memories`", "`GET | PATCH | DELETE /api/v1/memories/<id>`"
_OPERATION = re.compile(r"`((?:[A-Z]+ \| )*[A-Z]+) (/api/v1/[^`\s]*)")


def _ours(path: str) -> bool:
    """Under /api/v1/end-users or /api/v1/me (not /api/v1/memories)."""
    return any(path == prefix or path.startswith(prefix + "/") for prefix in PREFIXES)


def _normal(path: str) -> str:
    """A path with its parameters unnamed: API.md's ``<id>`` and the schema's ``{memory_id}`` are one slot."""
    return re.sub(r"<[^>]+>|\{[^}]+\}", "{}", path.rstrip("/"))


def _operations(markdown: str) -> set[tuple[str, str]]:
    found = set()
    for methods, path in _OPERATION.findall(markdown):
        for method in methods.split(" | "):
            if method in METHODS and _ours(path):
                found.add((method, _normal(path)))
    return found


def _section(markdown: str, title: str) -> str:
    start = markdown.index(f"\n## {title}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start : end if end != -1 else None]


@pytest.fixture(scope="module")
def contract() -> set[tuple[str, str]]:
    text = API_MD.read_text(encoding="utf-8")
    # the import of past conversations is a section of its own, under the same paths
    operations = _operations(_section(text, "End users") + _section(text, "Past conversations (import)"))
    assert len(operations) >= 5, operations  # the section's own paths, parsed
    return operations


@pytest.fixture
def served(client) -> set[tuple[str, str]]:
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    return {
        (method.upper(), _normal(path))
        for path, item in response.json()["paths"].items()
        if _ours(path)
        for method in item
        if method.upper() in METHODS
    }


def test_every_end_user_path_of_the_contract_is_served(contract, served):
    assert sorted(contract - served) == []


def test_every_served_end_user_path_is_in_the_contract_or_documented(contract, served):
    documented = _operations(EXTENSIONS_MD.read_text(encoding="utf-8"))
    assert sorted(served - contract - documented) == []


def test_the_end_user_operations_are_named(client):
    paths = client.get("/api/schema/?format=json").json()["paths"]
    assert paths["/api/v1/end-users/{end_user_id}/export"]["get"]["operationId"] == "export_end_user"
    assert paths["/api/v1/end-users/{end_user_id}"]["delete"]["operationId"] == "erase_end_user"


@pytest.mark.skipif(not SHARED_API_MD.exists(), reason="../shared/API.md is not beside this clone")
def test_the_contracts_copy_is_the_contract():
    # then the copy a clone without ../shared compares against is API.md as it stands
    assert COPY_API_MD.read_text(encoding="utf-8") == SHARED_API_MD.read_text(encoding="utf-8"), (
        "tests/ops/data/API.md differs from ../shared/API.md: copy it again"
    )
