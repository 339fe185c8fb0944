from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from chat.privacy.rights import do_erase_end_user
from config.errors import ApiError
from tenants.models import Erasure, Tenant


class Command(BaseCommand):
    help = (
        "Erase everything memdesk holds about one end user of a tenant, in one transaction, as "
        "DELETE /api/v1/end-users/<end_user_id> does (docs/privacy.md); the tombstone names the operator. "
        "Prints the rows deleted per table."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("tenant_slug")
        parser.add_argument("end_user_id", help="the tenant's own id for the end user")

    def handle(self, *args: Any, tenant_slug: str, end_user_id: str, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=tenant_slug).first()
        if tenant is None:
            raise CommandError(f"no tenant with slug {tenant_slug!r}")
        try:
            erasure = do_erase_end_user(tenant, end_user_id, actor=Erasure.Actor.OPERATOR)
        except ApiError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from None
        for table, count in erasure.counts.items():
            self.stdout.write(f"{table}: {count}")
        self.stdout.write(f"total: {sum(erasure.counts.values())} rows (erasure {erasure.pk})")
