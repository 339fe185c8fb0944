from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

from tenants.models import Tenant
from tenants.services import do_create_tenant


class Command(BaseCommand):
    help = "Create the 'demo' tenant when no tenant exists yet, and print its API key once."

    def handle(self, *args: Any, **options: Any) -> None:
        if Tenant.objects.exists():
            self.stdout.write(f"{Tenant.objects.count()} tenant(s) exist; no demo tenant created.")
            return
        provisioned = do_create_tenant("demo", "Demo tenant")
        self.stdout.write("Demo tenant created. Its API key (shown once, store it now):")
        self.stdout.write(
            json.dumps({"tenant_id": str(provisioned.tenant.pk), "slug": "demo", "api_key": provisioned.api_key})
        )
