"""An owner invites by e-mail from the admin; the link lets the invitee in with the chosen role: a new account
with the password they set, or their own signed-in account."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from staff_auth.models import Invitation, StaffAuthEvent
from tenants.models import Membership
from tests.factories import staff_login
from tests.staff_auth.invitations_helpers import PASSWORD, invite, set_password

pytestmark = pytest.mark.django_db

EMAIL = "new.agent@example.com"


def test_owner_invites_and_the_invitee_joins_the_tenant(
    acme, globex, staff, mailoutbox, django_capture_on_commit_callbacks
):
    # given acme's owner in the admin
    owner = staff_login(staff["owner_a"])

    # when they invite an agent by e-mail
    with django_capture_on_commit_callbacks(execute=True):
        response = owner.post(
            "/admin/staff_auth/invitation/add/", {"tenant": acme.tenant.pk, "email": EMAIL, "role": "agent"}
        )

    # then the invitation is stored and the e-mail carries its link (the token itself is not stored)
    assert response.status_code == 302
    invitation = Invitation.objects.get()
    assert (invitation.tenant, invitation.email, invitation.role, invitation.invited_by) == (
        acme.tenant,
        EMAIL,
        "agent",
        staff["owner_a"],
    )
    assert len(mailoutbox) == 1
    mail = mailoutbox[0]
    assert mail.to == [EMAIL]
    assert "Acme" in mail.subject
    path = re.search(r"http://testserver(/staff/invitations/[\w-]+/)", mail.body).group(1)
    assert invitation.token_hash not in mail.body
    assert path.split("/")[-2] != invitation.token_hash

    # when the invitee opens the link and sets a password
    invitee = Client()
    page = invitee.get(path)
    assert page.status_code == 200
    assert "You are invited to join <strong>Acme</strong> as <strong>Agent</strong>" in page.content.decode()
    accepted = invitee.post(path, set_password())

    # then they have an account and acme's membership, and are in the admin seeing acme only
    assert accepted.status_code == 302
    assert accepted["Location"] == "/admin/"
    user = get_user_model().objects.get(username=EMAIL)
    assert user.is_staff
    assert not user.is_superuser
    assert user.email == EMAIL
    assert Membership.objects.get(user=user).tenant == acme.tenant
    assert Membership.objects.get(user=user).role == "agent"
    tenants = invitee.get("/admin/tenants/tenant/").content.decode()
    assert f"/admin/tenants/tenant/{acme.tenant.pk}/change/" in tenants
    assert f"/admin/tenants/tenant/{globex.tenant.pk}/change/" not in tenants
    invitation.refresh_from_db()
    assert invitation.accepted_by == user
    assert invitation.accepted_at is not None
    # and they log in later with that password
    form = {"username": EMAIL, "password": PASSWORD, "this_is_the_login_form": "1", "next": "/admin/"}
    assert Client().post("/admin/login/?next=/admin/", form).status_code == 302
    # every step is in the audit trail
    kinds = list(StaffAuthEvent.objects.filter(invitation=invitation).order_by("id").values_list("kind", "actor"))
    assert kinds == [("invitation_sent", staff["owner_a"].pk), ("invitation_accepted", staff["owner_a"].pk)]


def test_a_weak_password_is_refused_and_nothing_is_made(acme, staff):
    path = invite(acme.tenant, staff["owner_a"])
    page = Client().post(path, set_password("123"))
    assert page.status_code == 200
    assert "too short" in page.content.decode()
    assert not get_user_model().objects.filter(username=EMAIL).exists()


def test_a_signed_in_invitee_accepts_with_their_own_account(acme, staff):
    # given a staff member of globex whose e-mail is the invited address
    outsider = staff["outsider"]
    outsider.email = "Outsider@Example.com"
    outsider.save()
    path = invite(acme.tenant, staff["owner_a"], email="outsider@example.com", role="admin")
    client = staff_login(outsider)

    # when they open the link and accept
    assert "You are signed in as outsider" in client.get(path).content.decode()
    response = client.post(path)

    # then their account has acme's membership too
    assert response.status_code == 302
    assert Membership.objects.get(user=outsider, tenant=acme.tenant).role == "admin"


def test_an_existing_account_is_asked_to_sign_in_first(acme, staff):
    # given an account that already has the invited address
    get_user_model().objects.create_user("carol", email=EMAIL, password="pw-carol-123456")
    path = invite(acme.tenant, staff["owner_a"])

    # when the link is opened signed out, and someone tries to make a second account anyway
    page = Client().get(path).content.decode()
    forced = Client().post(path, set_password())

    # then the page says to sign in, and no second account is made
    assert "already exists: sign in first" in page
    assert f"/admin/login/?next={path}" in page
    assert "already exists: sign in first" in forced.content.decode()
    assert get_user_model().objects.filter(email=EMAIL).count() == 1


def test_a_signed_in_user_with_another_address_cannot_accept(acme, staff):
    # given a link for someone else, opened by agent_a while signed in
    path = invite(acme.tenant, staff["owner_a"], role="owner")
    client = staff_login(staff["agent_a"])

    # when agent_a tries to accept it
    response = client.post(path)

    # then it is refused and agent_a's role is unchanged
    assert response.status_code == 403
    assert 'data-code="invitation_for_another_address"' in response.content.decode()
    assert Membership.objects.get(user=staff["agent_a"]).role == "agent"
    assert StaffAuthEvent.objects.filter(kind="invitation_refused").get().detail == {
        "reason": "invitation_for_another_address"
    }
