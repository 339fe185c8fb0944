"""Every Django setting the product reads is declared in config/settings.py with its default: no
``getattr(settings, "X", default)`` keeps a second, hidden default beside the code that uses it."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

REPO = Path(__file__).resolve().parents[2]
PRODUCT_PACKAGES = ("config", "tenants", "conversations", "memory", "knowledge", "chat", "staff_auth")
_READ = re.compile(r"\bsettings\.([A-Z][A-Z0-9_]*)\b")
_GETATTR = re.compile(r"getattr\(\s*settings\s*,")


def _sources() -> dict[str, str]:
    return {
        str(path.relative_to(REPO)): path.read_text(encoding="utf-8")
        for package in PRODUCT_PACKAGES
        for path in (REPO / package).rglob("*.py")
        if "migrations" not in path.parts
    }


def test_no_product_code_reads_a_setting_with_a_default_of_its_own():
    readers = [name for name, text in _sources().items() if _GETATTR.search(text)]
    assert readers == []


def test_every_setting_the_product_reads_is_declared():
    read = {(name, where) for where, text in _sources().items() for name in _READ.findall(text)}
    undeclared = sorted((name, where) for name, where in read if not hasattr(settings, name))
    assert undeclared == []


def test_the_memory_settings_have_their_documented_defaults():
    assert settings.MEMDESK_RECALL == {}
    assert settings.MEMDESK_EMBEDDING_MODELS == {}
    assert settings.HEALTH_WINDOW_S == 24 * 3600
    assert settings.AMNESIA_PHRASES is None
