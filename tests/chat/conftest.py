"""Fixtures for the chat tests. The cast (acme, globex, staff, anon_client)
lives in ``tests/conftest.py``; nothing here overrides it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fake_ollama import DEFAULT_MODEL, FakeOllama


@pytest.fixture
def fake_ollama(settings: Any) -> Iterator[FakeOllama]:
    """A started fake Ollama server, with Django's ``OLLAMA_*`` settings
    pointing at it (so ``chat.llm.get_llm()`` talks to it) and a short
    timeout, and the context-size cache emptied before and after."""
    from chat.llm import clear_context_cache

    with FakeOllama() as fake:
        settings.OLLAMA_HOST = fake.host
        settings.OLLAMA_MODEL = DEFAULT_MODEL
        settings.OLLAMA_TIMEOUT_S = 5.0
        clear_context_cache()
        yield fake
    clear_context_cache()
