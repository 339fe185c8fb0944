"""The layers hold: config → tenants → conversations → memory → chat (pyproject.toml's import contract,
run by ``make lint``). A reversed import in a copy of the code breaks the contract, and the check says so."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("config", "tenants", "conversations", "memory", "chat", "staff_auth")
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
