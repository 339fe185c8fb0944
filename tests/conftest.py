"""The cast every test can use: two tenants, each with an API client, staff
with roles, and an outsider who must always be refused."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

# The browser tests' memdesk under uvicorn (tests/browser_kit.py), registered here for every test module.
from tests.browser_kit import asgi_server  # noqa: F401

if TYPE_CHECKING:
    from tests.factories import TenantCtx

# Set before anything imports the product (tests.factories does, so the fixtures import it when called).
# Tests that import the ASGI application must not start its warm-up thread: it would call the embedding
# models while a test counts their calls (tests/ops/test_warmup.py checks the warm-up in a process of its own).
os.environ.setdefault("MEMDESK_WARMUP", "0")


@pytest.fixture
def acme(db: Any) -> TenantCtx:
    from tests.factories import make_tenant

    return make_tenant("acme")


@pytest.fixture
def globex(db: Any) -> TenantCtx:
    """The other tenant: nothing of acme's may ever reach it."""
    from tests.factories import make_tenant

    return make_tenant("globex", language="en")


@pytest.fixture
def anon_client() -> Any:
    from rest_framework.test import APIClient

    return APIClient()


@pytest.fixture
def staff(db: Any, acme: TenantCtx, globex: TenantCtx) -> dict[str, Any]:
    """acme's owner and agent, and an outsider who is staff of globex only."""
    from django.contrib.auth import get_user_model

    from tenants.models import Membership

    User = get_user_model()  # noqa: N806
    users = {}
    for name, tenant, role in (
        ("owner_a", acme.tenant, Membership.Role.OWNER),
        ("agent_a", acme.tenant, Membership.Role.AGENT),
        ("outsider", globex.tenant, Membership.Role.OWNER),
    ):
        user = User.objects.create_user(name, password="pw-" + name + "-123", is_staff=True)
        Membership.objects.create(user=user, tenant=tenant, role=role)
        users[name] = user
    users["root"] = User.objects.create_superuser("root", password="pw-root-123")
    return users


@pytest.fixture
def fake_ollama(settings: Any) -> Iterator[Any]:
    """A started fake Ollama server, with Django's ``OLLAMA_*`` settings
    pointing at it (so ``chat.llm.get_llm()`` talks to it) and a short
    timeout, and the context-size cache emptied before and after."""
    from chat.llm import clear_context_cache
    from testkit.fake_ollama import DEFAULT_MODEL, FakeOllama

    with FakeOllama() as fake:
        settings.OLLAMA_HOST = fake.host
        settings.OLLAMA_MODEL = DEFAULT_MODEL
        settings.OLLAMA_TIMEOUT_S = 5.0
        clear_context_cache()
        yield fake
    clear_context_cache()


@pytest.fixture(autouse=True)
def _memory_written_in_the_turn(settings: Any) -> None:
    """Tests read a turn's conversation memory right after the turn, so the web process writes it
    (``MEMORY_WRITER`` "inline"). The product's default, the background worker, is tested end to end in
    tests/memory/conversation/test_memory_writer_worker.py with a real ``manage.py run_worker``."""
    settings.MEMORY_WRITER = "inline"


@pytest.fixture(autouse=True)
def _close_worker_thread_connections() -> Iterator[None]:
    """database_sync_to_async runs ORM work on asgiref's shared worker thread;
    close that thread's connection after each test so the test database can
    be dropped at the end of the run."""
    yield
    from asgiref.sync import SyncToAsync
    from django.db import connections

    executor = getattr(SyncToAsync, "single_thread_executor", None)
    if executor is not None:
        executor.submit(connections.close_all).result(timeout=10)


@pytest.fixture(scope="session", autouse=True)
def _end_leftover_connections(django_db_setup: Any, django_db_blocker: Any) -> Iterator[None]:
    """Before the test database is dropped, end the connections that worker
    threads (database_sync_to_async pools, servers started by tests) still
    hold, so the drop does not fail with "being accessed by other users"."""
    yield
    from django.db import connection

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
