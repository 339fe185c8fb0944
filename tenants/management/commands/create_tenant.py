from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from tenants.models import Tenant
from tenants.services import do_create_tenant


class Command(BaseCommand):
    help = "Create a tenant and its first API key. Last line: JSON {tenant_id, slug, api_key, signing_secret}."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default=None)
        parser.add_argument("--language", default="zh", choices=["zh", "en"])

    def handle(self, *args: Any, slug: str, name: str | None, language: str, **options: Any) -> None:
        candidate = Tenant(slug=slug, name=name or slug, language=language)
        try:
            candidate.full_clean(exclude=["id", "signing_secret"])
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        provisioned = do_create_tenant(slug, name, language=language)
        tenant = provisioned.tenant
        self.stderr.write(f"Created tenant {tenant.slug}. The API key is shown once; store it now.")
        self.stdout.write(
            json.dumps(
                {
                    "tenant_id": str(tenant.pk),
                    "slug": tenant.slug,
                    "api_key": provisioned.api_key,
                    "signing_secret": tenant.signing_secret,
                }
            )
        )
