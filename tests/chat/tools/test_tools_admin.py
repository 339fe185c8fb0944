"""Staff see their own tenant's tools and batches in the admin, not others'."""

from __future__ import annotations

from django.test import Client

from chat.models import Tool
from tenants.rls import tenant_scope


def test_tools_are_listed_per_tenant_in_the_admin(staff, acme, globex):
    for ctx, name in ((acme, "acme_lookup"), (globex, "globex_lookup")):
        with tenant_scope(ctx.tenant):
            Tool.objects.create(
                tenant=ctx.tenant, name=name, description="look up", parameters={"type": "object"},
                url="https://example.com/hook",
            )  # fmt: skip
    client = Client()
    client.force_login(staff["owner_a"])
    html = client.get("/admin/chat/tool/").content.decode()
    assert "acme_lookup" in html
    assert "globex_lookup" not in html
    assert client.get("/admin/chat/batch/").status_code == 200
