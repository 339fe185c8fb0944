"""The embedded PostgreSQL 16 + pgvector used when DATABASE_URL is unset.

The machine's own PostgreSQL has no pgvector, so memdesk runs the server that
ships in the ``pgserver`` wheel, with its data under ``MEMDESK_DATA_DIR/pg``.
``pgserver.get_server`` reuses a server already running on that directory, so
several processes (runserver, manage.py, pytest) share one.

Bootstrap, as the pgserver superuser (idempotent):
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
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

APP_ROLE = "memdesk"
APP_DB = "memdesk"

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


def _superuser_execute(uri: str, dbname: str, statements: list[str]) -> None:
    import psycopg

    host = uri.split("host=", 1)[1]
    with psycopg.connect(host=host, user="postgres", dbname=dbname, autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql)


def ensure_embedded(pgdata: Path) -> EmbeddedServer:
    """Start (or reuse) the embedded server and make sure the app role,
    database and extension exist. Returns where to connect."""
    pgdata = Path(pgdata).resolve()
    with _lock:
        if pgdata in _ready:
            return _ready[pgdata]
        os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver

            pgdata.mkdir(parents=True, exist_ok=True)
            server = pgserver.get_server(pgdata, cleanup_mode=None)
        uri = server.get_uri()
        host = uri.split("host=", 1)[1]
        import psycopg

        with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [APP_ROLE]).fetchone():
                conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN CREATEDB NOSUPERUSER NOBYPASSRLS NOCREATEROLE")
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [APP_DB]).fetchone():
                conn.execute(f"CREATE DATABASE {APP_DB} OWNER {APP_ROLE}")
        for dbname in ("template1", APP_DB):
            _superuser_execute(uri, dbname, ["CREATE EXTENSION IF NOT EXISTS vector", FULL_TEXT_UNDER_RLS])
        info = EmbeddedServer(socket_dir=host, superuser_uri=uri)
        _ready[pgdata] = info
        logger.info("embedded PostgreSQL ready at %s", host)
        return info
