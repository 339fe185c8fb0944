"""Staff see and edit only their own tenants' rows in the admin."""

from __future__ import annotations

import pytest

from tests.factories import open_session_obj, staff_login


@pytest.fixture
def sessions(acme, globex):
    a = open_session_obj(acme, "alice-of-acme")
    g = open_session_obj(globex, "gina-of-globex")
    return a, g


def test_owner_sees_only_own_tenant_sessions(staff, sessions):
    a, g = sessions
    page = staff_login(staff["owner_a"]).get("/admin/conversations/chatsession/")
    assert page.status_code == 200
    html = page.content.decode()
    assert str(a.pk) in html
    assert str(g.pk) not in html


def test_outsider_cannot_open_another_tenants_session(staff, sessions):
    a, _ = sessions
    client = staff_login(staff["outsider"])
    response = client.get(f"/admin/conversations/chatsession/{a.pk}/change/")
    # the admin redirects to its index for an object it cannot see
    assert response.status_code in (302, 403, 404)
    listing = staff_login(staff["outsider"]).get("/admin/conversations/chatsession/").content.decode()
    assert f"/admin/conversations/chatsession/{a.pk}/change/" not in listing
    assert "alice-of-acme" not in listing


def test_outsider_does_not_see_other_end_users_or_tenants(staff, sessions):
    client = staff_login(staff["outsider"])
    users = client.get("/admin/tenants/enduser/").content.decode()
    assert "gina-of-globex" in users
    assert "alice-of-acme" not in users
    tenants = client.get("/admin/tenants/tenant/").content.decode()
    assert "globex" in tenants
    assert "/admin/tenants/tenant/" + str(staff["owner_a"].memberships.get().tenant_id) not in tenants


def test_agent_may_view_but_not_change(staff, sessions):
    a, _ = sessions
    client = staff_login(staff["agent_a"])
    assert client.get(f"/admin/conversations/chatsession/{a.pk}/change/").status_code == 200
    response = client.post(
        f"/admin/conversations/chatsession/{a.pk}/change/",
        {"status": "closed", "metadata": "{}", "last_activity_at_0": "2026-01-01", "last_activity_at_1": "00:00:00"},
    )
    assert response.status_code == 403


def test_superuser_sees_every_tenant(staff, sessions):
    a, g = sessions
    html = staff_login(staff["root"]).get("/admin/conversations/chatsession/").content.decode()
    assert str(a.pk) in html
    assert str(g.pk) in html


def test_admin_creating_an_api_key_shows_it_once(staff, acme):
    from tenants.models import ApiKey

    client = staff_login(staff["owner_a"])
    response = client.post("/admin/tenants/apikey/add/", {"tenant": str(acme.tenant.pk), "name": "ci"}, follow=True)
    assert response.status_code == 200
    html = response.content.decode()
    assert "shown once" in html
    key = ApiKey.objects.for_tenant(acme.tenant).get(name="ci")
    assert key.prefix in html


def _scoped_changelists() -> list[str]:
    from django.contrib import admin

    from tenants.admin_base import TenantScopedAdmin

    return [
        f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        for model, model_admin in admin.site._registry.items()
        if isinstance(model_admin, TenantScopedAdmin)
    ]


OWNERS_ONLY = {
    "/admin/conversations/staffaccess/",
    "/admin/staff_auth/invitation/",
    "/admin/staff_auth/staffauthevent/",
}


def test_tenant_filters_list_only_the_staff_members_tenants(staff, sessions):
    # given acme's agent, who belongs to acme only
    client = staff_login(staff["agent_a"])
    globex_id = str(staff["outsider"].memberships.get().tenant_id)
    # when every tenant-scoped changelist is opened
    pages = {url: client.get(url) for url in _scoped_changelists()}
    # then none names globex or its id (before, each tenant filter listed every tenant)
    assert "/admin/memory/memoryunit/" in pages
    for url, page in pages.items():
        # the tenant's owners' only (tests/chat/test_staff_access.py, tests/staff_auth/test_invitation_permissions.py)
        if url in OWNERS_ONLY:
            assert page.status_code == 403
            continue
        assert page.status_code == 200, url
        html = page.content.decode()
        assert "globex" not in html, url
        assert globex_id not in html, url


def test_a_member_of_two_tenants_filters_by_both_and_superusers_by_all(staff, sessions):
    from tenants.models import Membership
    from tenants.services import do_create_tenant

    # given acme's owner is also a member of a third tenant
    initech = do_create_tenant("initech", "Initech").tenant
    Membership.objects.create(user=staff["owner_a"], tenant=initech, role=Membership.Role.AGENT)
    # when
    mine = staff_login(staff["owner_a"]).get("/admin/conversations/chatsession/").content.decode()
    everything = staff_login(staff["root"]).get("/admin/conversations/chatsession/").content.decode()
    # then
    assert f"?tenant__id__exact={initech.pk}" in mine
    assert "globex" not in mine
    assert "?tenant__id__exact=" in everything
    assert "globex" in everything
    assert f"?tenant__id__exact={initech.pk}" in everything


def test_a_bookmark_of_the_old_session_admin_page_still_leads_there(staff, acme):
    # given a staff member who bookmarked the sessions page when it lived under /admin/chat/
    client = staff_login(staff["owner_a"])
    # when they open the bookmark, with its filter
    response = client.get("/admin/chat/chatsession/?status__exact=open")
    # then they land on the same page at its new address
    assert response.status_code == 301
    assert response["Location"] == "/admin/conversations/chatsession/?status__exact=open"
    assert client.get(response["Location"]).status_code == 200
