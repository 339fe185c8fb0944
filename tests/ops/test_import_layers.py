"""The import contracts hold (pyproject.toml, run by ``make lint``): the layers config → tenants → conversations →
memory → chat, memory's packages in their order, chat's and memory's packages private to their app, and
``memory.text`` free of Django. A reversed import in a copy of the code breaks its contract, and the check says
so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("config", "tenants", "conversations", "memory", "knowledge", "chat", "staff_auth")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_imports(where: Path) -> subprocess.CompletedProcess[str]:
    if not LINT_IMPORTS.exists():
        pytest.skip("import-linter is not installed (requirements-dev.txt)")
    env = {**os.environ, "PYTHONPATH": str(where)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=where, env=env, capture_output=True, text=True, timeout=120
    )


def _copy(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__", "static"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_code_keeps_its_layers():
    # when the contract is checked on the code as it is
    result = _lint_imports(ROOT)
    # then it holds
    assert result.returncode == 0, result.stdout + result.stderr
    assert "KEPT" in result.stdout


@pytest.mark.parametrize(
    ("module", "reversed_import"),
    [
        ("memory/models.py", "from chat import llm"),  # memory reaching up into the chat runtime
        ("tenants/models.py", "from conversations.models import Message"),  # tenants above the conversation record
        ("conversations/models.py", "import memory.recall.pipeline"),
    ],
)
def test_a_reversed_import_breaks_the_contract(tmp_path, module, reversed_import):
    # given a copy of the code where a lower layer imports a higher one
    copy = _copy(tmp_path)
    path = copy / module
    path.write_text(path.read_text() + f"\n{reversed_import}  # reversed on purpose\n")
    # when the contract is checked on that copy
    result = _lint_imports(copy)
    # then it fails and names the import
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    lower, higher = module.split("/")[0], reversed_import.split()[1].split(".")[0]
    assert f"{lower} is not allowed to import {higher}" in result.stdout


@pytest.mark.parametrize(
    ("module", "reversed_import", "contract", "named"),
    [
        # another app reaching past a package's __init__ into one of its modules
        (
            "chat/views.py",
            "from memory.store.write import do_write_memory",
            "memory's packages are private",
            "chat.views -> memory.store.write",
        ),
        (
            "config/urls.py",
            "from chat.turn.run import run_turn",
            "chat's packages are private",
            "config.urls -> chat.turn.run",
        ),
        # a lower package of memory importing a higher one
        (
            "memory/store/write.py",
            "from memory.recall import recall",
            "memory's packages in order",
            "memory.store.write -> memory.recall",
        ),
        (
            "memory/text/phones.py",
            "from memory.embeddings import embed_one",
            "memory's packages in order",
            "memory.text.phones -> memory.embeddings",
        ),
        # pure text reaching for Django
        (
            "memory/text/phones.py",
            "from django.conf import settings",
            "memory.text is pure",
            "memory.text.phones -> django",
        ),
    ],
)
def test_an_import_against_a_package_contract_breaks_it(tmp_path, module, reversed_import, contract, named):
    # given a copy of the code with one import that the contract forbids
    copy = _copy(tmp_path)
    path = copy / module
    path.write_text(path.read_text() + f"\n{reversed_import}  # reversed on purpose\n")
    # when the contracts are checked on that copy
    result = _lint_imports(copy)
    # then that contract is broken, and the import is named
    assert result.returncode != 0
    broken = [line for line in result.stdout.splitlines() if line.startswith(contract)]
    assert broken, result.stdout
    assert named in result.stdout
