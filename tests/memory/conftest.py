from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections

from tests.factories import open_session_obj


@pytest.fixture
def acme_session(acme: Any) -> Any:
    return open_session_obj(acme, "alice")


@pytest.fixture
def memapi(acme: Any, acme_session: Any) -> Any:
    """acme's API client speaking for alice's session."""
    acme.client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}", HTTP_X_SESSION_ID=str(acme_session.pk))
    return acme.client


def race(*calls: Callable[[], Any], timeout: float = 60) -> list[BaseException]:
    """Run ``calls`` on threads of their own, all released at the same moment; returns what they raised.
    Each thread closes its database connections when done (the test database must be droppable)."""
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call: Callable[[], Any]) -> None:
        try:
            barrier.wait(timeout=10)
            call()
        except BaseException as exc:  # noqa: BLE001 - returned to the test, which asserts on it
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    return errors
