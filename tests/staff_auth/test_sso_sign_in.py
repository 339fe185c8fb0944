"""Single sign-on end to end against a real provider: the redirect flow lands in the admin, signed in as a staff
user (never a superuser, no usable password) with the claimed tenant's membership, seeing that tenant only."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from staff_auth.models import SsoIdentity, SsoMembership, StaffAuthEvent
from tenants.models import Membership
from tests.staff_auth.sso_flow import sign_in

pytestmark = pytest.mark.django_db


def _changelist(client: Client) -> str:
    page = client.get("/admin/tenants/tenant/")
    assert page.status_code == 200
    return page.content.decode()


def test_sign_in_lands_in_the_admin_with_the_claimed_tenant_only(acme, globex, provider):
    # given a person in acme's agent group (and a group that is none of memdesk's business)
    provider.account.groups = ["memdesk:acme:agent", "wiki-editors"]
    client = Client()

    # when they sign in through the provider
    response = sign_in(client, next_url="/admin/")

    # then they land in the admin, signed in
    assert response.status_code == 302
    assert response["Location"] == "/admin/"
    assert client.get("/admin/").status_code == 200
    user = get_user_model().objects.get(pk=client.session["_auth_user_id"])
    assert user.is_staff
    assert not user.is_superuser
    assert not user.has_usable_password()
    assert (user.username, user.email, user.first_name) == ("alice", "alice@example.com", "Alice")
    assert SsoIdentity.objects.get(user=user).subject == provider.account.sub
    # with acme's membership, made by single sign-on
    membership = Membership.objects.get(user=user)
    assert (membership.tenant, membership.role) == (acme.tenant, Membership.Role.AGENT)
    assert SsoMembership.objects.get(membership=membership).group == "memdesk:acme:agent"
    # and the admin shows acme and not globex
    tenants = _changelist(client)
    assert f"/admin/tenants/tenant/{acme.tenant.pk}/change/" in tenants
    assert f"/admin/tenants/tenant/{globex.tenant.pk}/change/" not in tenants
    kinds = set(StaffAuthEvent.objects.filter(user=user).values_list("kind", flat=True))
    assert kinds == {"sso_membership_added", "sso_login"}


def test_the_next_sign_in_finds_the_same_user_by_subject_not_by_email(acme, provider):
    # given a first sign-in, and a password account that carries the same e-mail address
    provider.account.groups = ["memdesk:acme:owner"]
    sign_in(Client())
    other = get_user_model().objects.create_user("bob", email="alice2@example.com", password="pw-bob-123456")

    # when the person signs in again, with a changed e-mail address that the password account has
    provider.account.email = "alice2@example.com"
    client = Client()
    sign_in(client)

    # then it is the same SSO user, with the new address; the password account is not taken over
    user = SsoIdentity.objects.get(subject=provider.account.sub).user
    assert client.session["_auth_user_id"] == str(user.pk)
    assert user.email == "alice2@example.com"
    assert get_user_model().objects.filter(username__startswith="alice").count() == 1
    assert not Membership.objects.filter(user=other).exists()


def test_groups_only_in_the_id_token_are_read_too(acme, provider):
    # given a provider that puts the groups in the id_token only (as Microsoft Entra ID does)
    provider.groups_in = "id_token"
    provider.account.groups = ["memdesk:acme:admin"]
    client = Client()

    # when the person signs in
    sign_in(client)

    # then the id_token's groups gave the membership
    assert Membership.objects.get(user__username="alice").role == Membership.Role.ADMIN


def test_password_login_still_works_and_an_sso_account_has_no_password(acme, staff, provider):
    # given an SSO user
    provider.account.groups = ["memdesk:acme:agent"]
    sign_in(Client())
    form = {"this_is_the_login_form": "1", "next": "/admin/"}

    # when a password user logs in, and someone tries the SSO user's name with a password
    password_login = Client().post(
        "/admin/login/?next=/admin/", {**form, "username": "owner_a", "password": "pw-owner_a-123"}
    )
    sso_by_password = Client().post("/admin/login/?next=/admin/", {**form, "username": "alice", "password": ""})

    # then the password user is in, and the SSO user's name gets nowhere
    assert password_login.status_code == 302
    assert sso_by_password.status_code == 200


def test_sign_in_returns_to_the_page_asked_for(acme, provider):
    # given a signed-out person who opened acme's memory list
    provider.account.groups = ["memdesk:acme:agent"]
    client = Client()

    # when they sign in through the provider from there
    response = sign_in(client, next_url="/admin/memory/memoryunit/")

    # then they land on that page, not the admin's index (the library keeps it in the session: docs/internals.md)
    assert response.status_code == 302
    assert response["Location"] == "/admin/memory/memoryunit/"
