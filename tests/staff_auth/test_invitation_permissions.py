"""Only a tenant's owners (and superusers) invite into it: its admins and agents cannot, nor can another tenant's
owner; the admin's form and the service both refuse."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from staff_auth.invitations import InvitationError, do_invite
from staff_auth.models import Invitation
from tenants.models import Membership
from tests.factories import staff_login

pytestmark = pytest.mark.django_db

ADD = "/admin/staff_auth/invitation/add/"


def _post(client: Client, tenant) -> int:
    return client.post(ADD, {"tenant": tenant.pk, "email": "x@example.com", "role": "agent"}).status_code


@pytest.fixture
def admin_a(acme):
    user = get_user_model().objects.create_user("admin_a", password="pw-admin_a-123", is_staff=True)
    Membership.objects.create(user=user, tenant=acme.tenant, role=Membership.Role.ADMIN)
    return user


@pytest.mark.parametrize("who", ["admin_a", "agent_a"])
def test_an_admin_or_agent_of_the_tenant_cannot_invite(acme, staff, admin_a, who):
    # given acme's admin or agent in the admin
    client = staff_login(admin_a if who == "admin_a" else staff[who])

    # when they open the invitation form or post one
    page = client.get(ADD)
    status = _post(client, acme.tenant)

    # then both are refused, and they do not even see the invitations
    assert page.status_code == 403
    assert status == 403
    assert client.get("/admin/staff_auth/invitation/").status_code == 403
    assert not Invitation.objects.exists()


def test_another_tenants_owner_cannot_invite_into_this_tenant(acme, globex, staff):
    # given globex's owner in the admin
    client = staff_login(staff["outsider"])

    # when they post an invitation into acme
    response = client.post(ADD, {"tenant": acme.tenant.pk, "email": "x@example.com", "role": "owner"})

    # then the form refuses the tenant, offers only globex, and nothing is stored
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    form_choices = response.context["adminform"].form.fields["tenant"].queryset
    assert list(form_choices) == [globex.tenant]
    assert not Invitation.objects.exists()


def test_the_service_refuses_a_non_owner_whatever_calls_it(acme, staff, admin_a):
    # given an invitation into acme, asked for by globex's owner, acme's admin and acme's agent
    for user in (staff["outsider"], admin_a, staff["agent_a"]):
        # when the service is called directly
        with pytest.raises(InvitationError) as refused:
            do_invite(Invitation(tenant=acme.tenant, email="x@example.com", role="agent"), invited_by=user, link=str)
        # then it refuses, with the stable code
        assert refused.value.code == "not_allowed_to_invite"
    assert not Invitation.objects.exists()


def test_a_superuser_and_the_owner_invite(acme, globex, staff, mailoutbox, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        assert _post(staff_login(staff["root"]), globex.tenant) == 302
        assert _post(staff_login(staff["owner_a"]), acme.tenant) == 302
    assert sorted(Invitation.objects.values_list("tenant__slug", flat=True)) == ["acme", "globex"]
    assert len(mailoutbox) == 2


def test_an_owner_sees_only_their_tenants_invitations(acme, globex, staff):
    # given one invitation in each tenant
    do_invite(Invitation(tenant=acme.tenant, email="a@example.com"), invited_by=staff["owner_a"], link=str)
    do_invite(Invitation(tenant=globex.tenant, email="g@example.com"), invited_by=staff["outsider"], link=str)

    # when acme's owner lists them
    listing = staff_login(staff["owner_a"]).get("/admin/staff_auth/invitation/").content.decode()

    # then acme's only
    assert "a@example.com" in listing
    assert "g@example.com" not in listing
