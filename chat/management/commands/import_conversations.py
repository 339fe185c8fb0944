from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from chat.imports.service import do_import_conversation
from config.errors import ApiError
from tenants.models import Tenant


class Command(BaseCommand):
    help = (
        "Import a tenant's past conversations from a JSON Lines file: one conversation per line, the body of "
        'POST /api/v1/end-users/<end_user_id>/conversations plus its "end_user_id" (docs/import.md). Each is '
        "checked and stored as the API does (idempotent by external_id: a rerun skips what was imported) and "
        "indexed into memory by the worker (manage.py run_worker). Prints progress to stderr and a summary: "
        "imported, skipped as duplicates, refused with the line and the reason. Exits 1 when a line was refused."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("tenant", help="the tenant's slug")
        parser.add_argument("file", help="a .jsonl file (UTF-8), or - for standard input")
        parser.add_argument("--quiet", action="store_true", help="no progress line")

    def handle(self, *args: Any, tenant: str, file: str, quiet: bool, **options: Any) -> None:
        found = Tenant.objects.filter(slug=tenant).first()
        if found is None:
            raise CommandError(f"no tenant with slug {tenant!r}")
        if file == "-":
            lines = sys.stdin.read().splitlines()
        else:
            path = Path(file)
            if not path.is_file():
                raise CommandError(f"{file}: no such file")
            lines = path.read_text(encoding="utf-8").splitlines()
        counts: Counter[str] = Counter()
        refused: list[str] = []
        started = time.monotonic()
        total = sum(1 for line in lines if line.strip())
        done = 0
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            done += 1
            try:
                body = json.loads(line)
                if not isinstance(body, dict):
                    raise ApiError("the line is not a JSON object")
                end_user_id = body.pop("end_user_id", None)
                if not isinstance(end_user_id, str):
                    raise ApiError("end_user_id must be a string", code="invalid_import")
                result = do_import_conversation(found, end_user_id, body)
                counts["imported" if result.created else "duplicate"] += 1
            except json.JSONDecodeError as exc:
                counts["refused"] += 1
                refused.append(f"line {number}: invalid JSON ({exc.msg})")
            except ApiError as exc:
                counts["refused"] += 1
                refused.append(f"line {number}: {exc.code}: {exc.message}")
            if not quiet and (done % 50 == 0 or done == total):
                rate = done / max(time.monotonic() - started, 1e-9)
                self.stderr.write(f"\r{done}/{total} conversations ({rate:.0f}/s)", ending="")
                self.stderr.flush()
        if not quiet and total:
            self.stderr.write("")
        self.stdout.write(
            f"imported {counts['imported']}, skipped as duplicates {counts['duplicate']}, refused {counts['refused']}"
        )
        for reason in refused:
            self.stdout.write(f"  {reason}")
        if refused:
            sys.exit(1)
