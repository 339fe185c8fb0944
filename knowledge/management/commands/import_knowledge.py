from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from config.errors import ApiError
from knowledge.files import items_from_path
from knowledge.services import do_import_articles
from tenants.models import Tenant


class Command(BaseCommand):
    help = (
        "Import a tenant's knowledge articles: a folder of Markdown (.md) and HTML (.html) files, or a JSON Lines "
        "file (one article per line, the body of POST /api/v1/knowledge/articles). Everything is checked first and "
        "written in one transaction: a bad article stores none. Articles with an external_id (a file's path) that "
        "exist get a new version when they changed, none when not. Last line: JSON {created, updated, unchanged}."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("tenant", help="tenant slug")
        parser.add_argument("path", help="a folder of .md/.html files, or a .jsonl file")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar (plain counts only)")

    def handle(self, *args: Any, tenant: str, path: str, no_progress: bool, **options: Any) -> None:
        target = Tenant.objects.filter(slug=tenant).first()
        if target is None:
            raise CommandError(f"no tenant with slug {tenant!r}")
        source = Path(path)
        if not source.exists():
            raise CommandError(f"{path}: no such file or folder")
        try:
            items = items_from_path(source)
        except ApiError as exc:
            raise CommandError(f"{exc.code}: {exc.message} (nothing was imported)") from None
        self.stderr.write(f"{target.slug}: {len(items)} articles checked")
        bars = {
            step: tqdm(total=len(items), desc=label, unit="article", disable=no_progress or None, leave=True)
            for step, label in (("embed", "embedding"), ("write", "writing"))
        }
        try:
            counts = do_import_articles(target, items, progress=lambda step, n: bars[step].update(n))
        except ApiError as exc:
            raise CommandError(f"{exc.code}: {exc.message} (nothing was imported)") from None
        finally:
            for bar in bars.values():
                bar.close()
        self.stderr.write(
            f"{target.slug}: {counts.created} created, {counts.updated} updated, {counts.unchanged} unchanged"
        )
        self.stdout.write(json.dumps(counts.as_dict()))
