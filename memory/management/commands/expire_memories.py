from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from memory.services import do_cleanup_expired
from tenants.models import Tenant


class Command(BaseCommand):
    help = (
        "Delete memories that have expired (their audit events keep the content). "
        "Safe to run while memdesk serves. Prints counts per tenant."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tenant", help="slug of one tenant (default: every tenant)")
        parser.add_argument(
            "--older-than", type=float, default=0.0, metavar="DAYS",
            help="only memories that expired more than DAYS days ago (default 0: every expired one)",
        )  # fmt: skip

    def handle(self, *args: Any, tenant: str | None, older_than: float, **options: Any) -> None:
        if older_than < 0:
            raise CommandError("--older-than must be >= 0")
        tenants = Tenant.objects.order_by("slug")
        if tenant:
            tenants = tenants.filter(slug=tenant)
            if not tenants.exists():
                raise CommandError(f"no tenant with slug {tenant!r}")
        total = 0
        for t in tenants:
            removed = do_cleanup_expired(t, older_than=timedelta(days=older_than))
            total += removed
            self.stdout.write(f"{t.slug}: {removed} expired memories removed")
        self.stdout.write(f"total: {total}")
