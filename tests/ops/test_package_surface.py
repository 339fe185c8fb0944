"""The packages' public surface: each package's ``__init__`` maps its modules, exports only names that exist, and
the chat runtime leaves memory's tables to memory (it holds no SQL that names them)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
from django.apps import apps

ROOT = Path(__file__).resolve().parents[2]
APPS = ("chat", "memory")


def _packages() -> list[Path]:
    return sorted(
        path.parent
        for app in APPS
        for path in (ROOT / app).glob("*/__init__.py")
        if path.parent.name not in ("migrations", "management", "static")
    )


@pytest.mark.parametrize("package", _packages(), ids=lambda p: f"{p.parent.name}.{p.name}")
def test_each_package_docstring_names_every_module_it_holds(package):
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""
    modules = sorted(p.stem for p in package.glob("*.py") if p.stem != "__init__")
    assert modules, package
    missing = [name for name in modules if f"``{name}``" not in docstring]
    assert missing == [], f"{package.relative_to(ROOT)}/__init__.py does not say what {missing} hold"


@pytest.mark.parametrize("package", _packages(), ids=lambda p: f"{p.parent.name}.{p.name}")
def test_each_package_exports_what_it_names(package):
    name = f"{package.parent.name}.{package.name}"
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert [n for n in exported if not hasattr(module, n)] == []


def test_the_app_roots_hold_only_djangos_files_transports_and_views():
    # A module at an app's root is one a reader expects there; everything else lives in a package.
    expected = {
        "chat": {"admin", "apps", "consumers", "labels", "llm", "metrics", "models", "pages", "routing",
                 "serializers", "tasks", "views", "ws_auth"},
        "memory": {"admin", "apps", "labels", "metrics", "models", "serializers", "tasks", "views"},
    }  # fmt: skip
    for app, names in expected.items():
        found = {p.stem for p in (ROOT / app).glob("*.py") if p.stem != "__init__"}
        assert found == names, app


def test_the_chat_runtime_holds_no_sql_against_memorys_tables():
    # given memory's tables, by the names the database knows them
    tables = sorted(model._meta.db_table for model in apps.get_app_config("memory").get_models())
    assert "memory_memoryunit" in tables
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, tables)) + r")\b")
    # when every module of the chat runtime is read
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in (ROOT / "chat").rglob("*.py")
        if "migrations" not in path.parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    # then none names one: memory's reads and writes are memory's (memory.store)
    assert found == []
