"""``manage.py index_messages``: write the conversation units of messages a turn stored but did not index."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from memory.conversation.units import SETTLE
from memory.conversation.writer import index_all_pending
from tenants.models import Tenant


class Command(BaseCommand):
    help = (
        "Write the conversation memory of messages whose turn did not (the process died after the reply, or the "
        "write failed). Safe to run while memdesk serves; the background worker runs it at start and every minute."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tenant", help="slug of one tenant (default: every tenant)")
        parser.add_argument(
            "--settle", type=float, default=SETTLE.total_seconds(), metavar="SECONDS",
            help="leave messages younger than this to the turn writing them (default 60)",
        )  # fmt: skip

    def handle(self, *args: Any, tenant: str | None, settle: float, **options: Any) -> None:
        if settle < 0:
            raise CommandError("--settle must be >= 0")
        if tenant and not Tenant.objects.filter(slug=tenant).exists():
            raise CommandError(f"no tenant with slug {tenant!r}")
        counts = index_all_pending(tenant_slug=tenant, settle=timedelta(seconds=settle))
        for slug, count in counts.items():
            self.stdout.write(f"{slug}: {count} message(s) indexed")
        self.stdout.write(f"total: {sum(counts.values())}")
