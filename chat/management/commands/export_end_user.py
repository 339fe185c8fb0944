from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from chat.privacy.rights import export_end_user
from config.errors import ApiError
from tenants.models import Tenant


class Command(BaseCommand):
    help = (
        "Write everything memdesk holds about one end user of a tenant as JSON: the same document as "
        "GET /api/v1/end-users/<end_user_id>/export (docs/privacy.md). To standard output, or --output FILE."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("tenant_slug")
        parser.add_argument("end_user_id", help="the tenant's own id for the end user")
        parser.add_argument("--output", metavar="FILE", help="write the JSON to FILE (default: standard output)")

    def handle(self, *args: Any, tenant_slug: str, end_user_id: str, output: str | None, **options: Any) -> None:
        tenant = Tenant.objects.filter(slug=tenant_slug).first()
        if tenant is None:
            raise CommandError(f"no tenant with slug {tenant_slug!r}")
        try:
            chunks = export_end_user(tenant, end_user_id)
        except ApiError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from None
        if output is None:
            for chunk in chunks:
                self.stdout.write(chunk, ending="")
            self.stdout.write("")
            return
        written = 0
        with open(output, "w", encoding="utf-8") as file:
            for chunk in chunks:
                written += file.write(chunk)
        self.stderr.write(f"{tenant.slug}: wrote {written} characters to {output}")
