from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from chat.privacy.retention import do_apply_retention
from tenants.models import Tenant


class Command(BaseCommand):
    help = (
        "Apply each tenant's retention settings now (what the worker does hourly): messages older than "
        "message_retention_days, memories and their audit events older than memory_retention_days, superseded "
        "versions past history_retention_days, then the sessions left empty. Prints counts per tenant; "
        "--dry-run counts and deletes nothing. Safe to run while memdesk serves."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tenant", help="slug of one tenant (default: every tenant)")
        parser.add_argument("--dry-run", action="store_true", help="count what would be deleted; delete nothing")

    def handle(self, *args: Any, tenant: str | None, dry_run: bool, **options: Any) -> None:
        tenants = Tenant.objects.order_by("slug")
        if tenant:
            tenants = tenants.filter(slug=tenant)
            if not tenants.exists():
                raise CommandError(f"no tenant with slug {tenant!r}")
        verb = "would delete" if dry_run else "deleted"
        total = 0
        for t in tenants:  # unlike the worker's job, a tenant's failure stops the command, with its error
            r = do_apply_retention(t, dry_run=dry_run)
            total += r.messages + r.sessions + r.memories + r.memory_events + r.history
            self.stdout.write(
                f"{r.tenant}: {verb} {r.messages} messages, {r.sessions} sessions, {r.memories} memories, "
                f"{r.memory_events} memory events, {r.history} superseded versions"
            )
        self.stdout.write(f"total: {total} rows {verb}")
