from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from memory.embeddings import models as embeddings
from memory.models import MemoryUnit
from tenants.models import Tenant
from tenants.rls import tenant_scope


class Command(BaseCommand):
    help = (
        "Re-embed a tenant's memories whose embedding model differs from the one its settings now choose "
        "(after changing Tenant.settings['embedding_model']). Recall stays correct meanwhile: rows of the old "
        "model are only found by the lexical leg until they are re-embedded. Prints progress and counts."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug")
        parser.add_argument("--batch", type=int, default=256)

    def handle(self, *args: Any, tenant: str, batch: int, **options: Any) -> None:
        target = Tenant.objects.filter(slug=tenant).first()
        if target is None:
            raise CommandError(f"no tenant with slug {tenant!r}")
        if batch < 1:
            raise CommandError("--batch must be >= 1")
        done = 0
        for memory_type in MemoryUnit._meta.get_field("type").choices:
            mtype = memory_type[0]
            model = embeddings.model_for(target, mtype)
            while True:
                with tenant_scope(target):
                    rows = list(
                        MemoryUnit.objects.for_tenant(target)
                        .filter(type=mtype)
                        .exclude(embedding_model=model)
                        .order_by("pk")
                        .values_list("pk", "content")[:batch]
                    )
                    if not rows:
                        break
                    vectors = embeddings.embed([content for _, content in rows], model=model, kind="passage")
                    for (pk, _), vector in zip(rows, vectors, strict=True):
                        MemoryUnit.objects.for_tenant(target).filter(pk=pk).update(
                            embedding=vector.tolist(), embedding_model=model
                        )
                done += len(rows)
                self.stdout.write(f"{target.slug}: {done} re-embedded ({mtype} → {model})")
        self.stdout.write(f"{target.slug}: total {done} memories re-embedded")
