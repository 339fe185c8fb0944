from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from memory.store.lifecycle import do_cleanup_expired, history_retention
from tenants.models import Tenant


class Command(BaseCommand):
    help = (
        "Delete memories that expired while current, and superseded versions past the tenant's "
        "history_retention_days (default 90; as_of answers from the versions kept). Their audit events keep "
        "the content. Safe to run while memdesk serves. Prints counts per tenant."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tenant", help="slug of one tenant (default: every tenant)")
        parser.add_argument(
            "--older-than", type=float, default=0.0, metavar="DAYS",
            help=(
                "only memories that expired more than DAYS days ago (default 0: every expired one); superseded "
                "versions are kept for the longer of DAYS and the tenant's history retention"
            ),
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
            total += removed.total
            self.stdout.write(
                f"{t.slug}: {removed.expired} expired memories removed, {removed.superseded} superseded "
                f"versions past their retention ({history_retention(t).days} days) removed"
            )
        self.stdout.write(f"total: {total}")
