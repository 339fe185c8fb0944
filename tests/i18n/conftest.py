"""The staff language tests: the compiled catalogues must be there, and no test leaves a language active.

Django's ``LocaleMiddleware`` activates the request's language on the thread that runs it and never puts the
previous one back; the test client runs requests on the test's own thread, so a Chinese request would leave
Chinese active for whatever the next test calls outside a request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.utils import translation

LOCALE = Path(__file__).resolve().parents[2] / "locale"


@pytest.fixture(autouse=True)
def _english_after_each_test() -> Iterator[None]:
    yield
    translation.deactivate()


@pytest.fixture(scope="session", autouse=True)
def _compiled_catalogues() -> None:
    for po in LOCALE.glob("*/LC_MESSAGES/django.po"):
        mo = po.with_suffix(".mo")
        if not mo.exists() or mo.stat().st_mtime < po.stat().st_mtime:
            pytest.fail(
                f"{mo.relative_to(LOCALE.parent)} is missing or older than its .po: run "
                "`python manage.py compile_catalogues` (make test does)"
            )
