"""Access follows the provider at every sign-in: a group taken away there removes the membership single sign-on
gave, a changed group changes the role, and memberships made by hand are never touched."""

from __future__ import annotations

import pytest
from django.test import Client

from staff_auth.models import SsoIdentity, SsoMembership, StaffAuthEvent
from tenants.models import Membership
from tests.staff_auth.sso_flow import messages_on, sign_in

pytestmark = pytest.mark.django_db


def _roles(user) -> dict[str, str]:
    return {m.tenant.slug: m.role for m in Membership.objects.filter(user=user).select_related("tenant")}


def test_a_removed_group_claim_removes_the_membership_at_the_next_sign_in(acme, globex, provider):
    # given a person signed in once with groups for acme and globex
    provider.account.groups = ["memdesk:acme:agent", "memdesk:globex:owner"]
    sign_in(Client())
    user = SsoIdentity.objects.get().user
    assert _roles(user) == {"acme": "agent", "globex": "owner"}

    # when the provider takes the globex group away and makes them acme's admin, and they sign in again
    provider.account.groups = ["memdesk:acme:admin"]
    client = Client()
    sign_in(client)

    # then globex's membership is gone and acme's role changed
    assert _roles(user) == {"acme": "admin"}
    tenants = client.get("/admin/tenants/tenant/").content.decode()
    assert f"/admin/tenants/tenant/{acme.tenant.pk}/change/" in tenants
    assert f"/admin/tenants/tenant/{globex.tenant.pk}/change/" not in tenants
    assert client.get(f"/admin/tenants/tenant/{globex.tenant.pk}/change/").status_code in (302, 403, 404)
    removed = StaffAuthEvent.objects.get(kind="sso_membership_removed")
    assert (removed.tenant, removed.detail["role"]) == (globex.tenant, "owner")
    changed = StaffAuthEvent.objects.get(kind="sso_membership_changed")
    assert (changed.detail["before"], changed.detail["role"]) == ("agent", "admin")


def test_a_hand_made_membership_of_the_same_user_survives(acme, globex, provider):
    # given an SSO user to whom an operator gave globex by hand, and acme's owner role by hand over the claim
    provider.account.groups = ["memdesk:acme:agent"]
    sign_in(Client())
    user = SsoIdentity.objects.get().user
    Membership.objects.create(user=user, tenant=globex.tenant, role=Membership.Role.AGENT)

    # when they sign in again, the claims naming acme only, then none of globex ever
    sign_in(Client())

    # then the hand-made globex membership is still there, unmarked
    assert _roles(user) == {"acme": "agent", "globex": "agent"}
    assert not SsoMembership.objects.filter(membership__tenant=globex.tenant).exists()


def test_a_hand_made_membership_for_a_claimed_tenant_keeps_its_role(acme, provider):
    # given a user whose acme membership was made by hand before the provider claimed acme for them
    provider.account.groups = ["memdesk:acme:agent"]
    sign_in(Client())
    user = SsoIdentity.objects.get().user
    membership = Membership.objects.get(user=user)
    SsoMembership.objects.filter(membership=membership).delete()  # as if made by hand
    Membership.objects.filter(pk=membership.pk).update(role=Membership.Role.OWNER)

    # when they sign in with acme's agent group, and then with acme's admin group
    sign_in(Client())
    owner_after_claim = _roles(user)
    provider.account.groups = ["memdesk:acme:admin"]
    sign_in(Client())

    # then single sign-on never changed it
    assert owner_after_claim == {"acme": "owner"}
    assert _roles(user) == {"acme": "owner"}


def test_losing_every_group_refuses_the_sign_in_and_removes_what_sso_gave(acme, provider):
    # given a person signed in once through acme's group
    provider.account.groups = ["memdesk:acme:agent"]
    sign_in(Client())
    user = SsoIdentity.objects.get().user

    # when the provider drops them from it and they try again
    provider.account.groups = []
    client = Client()
    response = sign_in(client)

    # then they are refused, and acme's membership is gone
    assert "no memdesk group" in messages_on(client, response)
    assert "_auth_user_id" not in client.session
    assert _roles(user) == {}
