"""Conversation import: how fast past conversations become memory, the worker included.

Path measured: each conversation through ``POST /api/v1/end-users/<id>/conversations`` (Django's test client
against the product's URL configuration and middleware, tenant key; no HTTP socket), then ``manage.py
run_worker --once`` in this process until every import is ``done``. Data: the Chinese customer-service set
(``bench/data/zh_cs_memory.json``), its dialogues replayed as past conversations of pseudo customers, each
message a minute after the one before, ending days ago.

Run: ``nice -n 5 .venv/bin/python bench/load/import_rate.py [--conversations 200]`` (own benchmark database,
dropped first). Prints and writes ``bench/out/import_rate.json``: conversations and messages per second for the
API calls, the worker, and both.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench import common  # noqa: E402


@functools.cache
def _dialogues() -> list[list[tuple[str, str]]]:
    """Each session of the Chinese set as one past conversation: ``(role, text)`` lines."""
    data = json.loads((common.BENCH_DIR / "data" / "zh_cs_memory.json").read_text(encoding="utf-8"))
    roles = {"user": "user", "assistant": "agent"}
    return [
        [(roles[t["role"]], t["text"]) for t in session["turns"] if t["role"] in roles]
        for dialogue in data["dialogues"]
        for session in dialogue["sessions"]
    ]


def past_conversation(i: int, *, end: datetime | None = None) -> dict:
    """The ``i``-th past conversation: a session of the Chinese set, a minute between messages, ending days ago."""
    dialogues = _dialogues()
    lines = dialogues[i % len(dialogues)][:40]
    end = end or datetime.now(UTC) - timedelta(days=3)
    first = end - timedelta(minutes=len(lines) + i)
    return {
        "external_id": f"bench-{i}",
        "started_at": first.isoformat(),
        "messages": [
            {"role": role, "text": text, "sent_at": (first + timedelta(minutes=n)).isoformat()}
            for n, (role, text) in enumerate(lines)
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=200)
    args = parser.parse_args()
    common.setup_django("memdesk_bench_import", fresh=True)
    from django.core.management import call_command
    from django.db.models import Count
    from rest_framework.test import APIClient

    from conversations.models import ImportedConversation
    from tenants.rls import tenant_scope

    provisioned = common.make_tenant("importbench")
    client = APIClient(SERVER_NAME="localhost")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {provisioned.api_key}")
    # the worker's models loaded before the clock starts (a worker loads them once, at its start)
    call_command("run_worker", "--once", "--nice", "0")
    messages = 0
    start = time.perf_counter()
    for i in range(args.conversations):
        body = past_conversation(i)
        response = client.post(f"/api/v1/end-users/customer-{i % 40}/conversations", body, format="json")
        if response.status_code != 202:
            raise SystemExit(f"import {i}: {response.status_code} {response.content[:300]!r}")
        messages += len(body["messages"])
    api_s = time.perf_counter() - start
    start = time.perf_counter()
    call_command("run_worker", "--once", "--nice", "0", "--concurrency", "1")
    worker_s = time.perf_counter() - start
    with tenant_scope(provisioned.tenant):
        statuses = dict(
            ImportedConversation.objects.for_tenant(provisioned.tenant)
            .values_list("status")
            .annotate(n=Count("id"))
            .order_by()
        )
    total = api_s + worker_s
    result = {
        "path": "POST /api/v1/end-users/<id>/conversations (test client) + manage.py run_worker --once",
        "conversations": args.conversations,
        "messages": messages,
        "statuses": statuses,
        "api_s": round(api_s, 2),
        "worker_s": round(worker_s, 2),
        "api_conversations_per_s": round(args.conversations / api_s, 1),
        "worker_messages_per_s": round(messages / worker_s, 1),
        "conversations_per_s": round(args.conversations / total, 2),
        "messages_per_s": round(messages / total, 1),
        "machine": common.machine_info(),
        "git": common.git_state(),
    }
    common.write_result("import_rate", result)
    print(json.dumps({k: v for k, v in result.items() if k not in ("machine", "git")}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
