"""Behind PgBouncer in transaction mode (docs/operations.md): the tenant values a scope sets travel with its
transaction's ``BEGIN`` and end with it, so connections that share one server connection never see each
other's tenant, and a chat turn's message store (its session lock sent with that ``BEGIN``) still numbers
messages without a gap or a repeat.

A real PgBouncer (Debian's ``pgbouncer``; ``.ci/run`` installs it) with a pool of **one** server
connection in front of the test database, and memdesk configured as docs/operations.md says for a
PgBouncer older than 1.21: no prepared statements (``DB_PREPARED_STATEMENTS=0``) and no pool of its own.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections

from tenants.rls import tenant_scope
from tests.factories import open_session_obj
from tests.memory.conftest import race

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(shutil.which("pgbouncer") is None, reason="pgbouncer is not installed (.ci/run installs it)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def bouncer(request: Any, db: Any) -> Iterator[dict[str, Any]]:
    """A PgBouncer in transaction mode in front of the test database, with one server connection (or as
    many as an indirect parameter says); yields the settings a Django connection needs to go through it."""
    pool_size = getattr(request, "param", 1)
    params = connection.get_connection_params()
    host, dbname, user = params["host"], params["dbname"], params["user"]
    server = f"host={host} dbname={dbname} user={user}"  # the embedded server's socket, or DATABASE_URL's host
    server += "".join(f" {key}={params[key]}" for key in ("port", "password") if params.get(key))
    port = _free_port()
    folder = Path(tempfile.mkdtemp(prefix="memdesk-pgbouncer-"))
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        f"[databases]\n{dbname} = {server}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        f"pool_mode = transaction\ndefault_pool_size = {pool_size}\nmin_pool_size = 0\nreserve_pool_size = 0\n"
        f"max_client_conn = 50\nlogfile = {folder / 'pgbouncer.log'}\npidfile = {folder / 'pgbouncer.pid'}\n"
    )
    command = ["pgbouncer", str(folder / "pgbouncer.ini")]
    if os.getuid() == 0:  # PgBouncer refuses to run as root: run it as the owner of the server's socket
        owner = Path(host).owner() if host.startswith("/") else "nobody"
        shutil.chown(folder, user=owner)
        for path in folder.iterdir():
            shutil.chown(path, user=owner)
        command[1:1] = ["-u", owner]
    output = folder / "output.txt"  # a file, not a pipe: a full pipe would stall PgBouncer's logging
    with output.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"pgbouncer did not start: {output.read_text(errors='replace')}")
                time.sleep(0.05)
        yield {"HOST": "127.0.0.1", "PORT": str(port), "EMBEDDED": False, "OPTIONS": {}}
    finally:
        process.terminate()
        process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def _through(bouncer: dict[str, Any]) -> None:
    """Point this thread's default database connection at the PgBouncer."""
    wrapper = connections.create_connection("default")
    wrapper.settings_dict = {**wrapper.settings_dict, **bouncer}
    connections["default"] = wrapper


def _in_threads(bouncer: dict[str, Any], work: list[Callable[[], None]]) -> list[BaseException]:
    """Run each callable in a thread of its own, all at once, through the PgBouncer; the errors they raised."""

    def through(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            _through(bouncer)
            fn()

        return run

    return race(*(through(fn) for fn in work), timeout=120)


def _visible_sessions() -> tuple[int, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), current_setting('app.tenant_ids', true) FROM chat_chatsession")
        count, ids = cursor.fetchone()
        return count, ids or ""


def test_tenant_scopes_sharing_one_server_connection_never_see_each_others_tenant(acme, globex, bouncer):
    # given two sessions of acme and one of globex, committed
    open_session_obj(acme, "alice")
    open_session_obj(acme, "bob")
    open_session_obj(globex, "alice")
    seen: dict[str, list[tuple[int, str]]] = {"acme": [], "globex": [], "unscoped": []}

    def scopes(name: str, tenant: Any) -> Callable[[], None]:
        def run() -> None:
            for _ in range(40):
                with tenant_scope(tenant):
                    seen[name].append(_visible_sessions())
                    time.sleep(0.001)  # hold the shared server connection while the others queue for it
                seen["unscoped"].append(_visible_sessions())  # the next transaction on that connection

        return run

    # when four clients, two per tenant, open scopes at once through PgBouncer's one server connection
    errors = _in_threads(bouncer, [scopes("acme", acme.tenant), scopes("globex", globex.tenant)] * 2)

    # then each scope saw its own tenant only, and nothing outside a scope saw anything
    assert errors == []
    assert (len(seen["acme"]), len(seen["globex"]), len(seen["unscoped"])) == (80, 80, 160)
    assert set(seen["acme"]) == {(2, str(acme.tenant.pk))}
    assert set(seen["globex"]) == {(1, str(globex.tenant.pk))}
    assert set(seen["unscoped"]) == {(0, "")}


@pytest.mark.parametrize("bouncer", [3], indirect=True)
def test_concurrent_turns_of_one_session_store_their_messages_in_order_through_pgbouncer(acme, bouncer):
    # given a session, and a PgBouncer with a server connection for each client (so the stores do overlap)
    from chat.sessions.messages import store_user_message
    from conversations.models import Message

    acme.tenant.settings = {"rate_limits": {"per_session_per_minute": 1000}}
    acme.tenant.save(update_fields=["settings"])
    session = open_session_obj(acme, "alice")

    def turns(client: int) -> Callable[[], None]:
        def run() -> None:
            for n in range(10):
                store_user_message(acme.tenant, session, f"message {n} of client {client}", f"{client}-{n}")

        return run

    # when three clients store messages in the same session at once, each store's lock sent with its BEGIN
    errors = _in_threads(bouncer, [turns(client) for client in range(3)])

    # then every message is stored once, numbered 1..30 without a gap or a repeat
    assert errors == []
    with tenant_scope(acme.tenant):
        stored = list(
            Message.objects.for_tenant(acme.tenant).filter(session=session).values_list("seq", "client_msg_id")
        )
    assert sorted(seq for seq, _ in stored) == list(range(1, 31))
    assert {msg_id for _, msg_id in stored} == {f"{c}-{n}" for c in range(3) for n in range(10)}
