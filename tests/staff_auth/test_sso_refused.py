"""Refused sign-ins: no memdesk group, an id_token changed after the provider signed it, an SSO identity that is
a superuser. Each lands on the admin login page with the reason, signed out, with nothing made."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from staff_auth.models import SsoIdentity, StaffAuthEvent
from tenants.models import Membership
from tests.staff_auth.sso_flow import messages_on, sign_in

pytestmark = pytest.mark.django_db


def test_no_memdesk_group_is_refused_with_a_clear_message(acme, provider):
    # given a person whose groups name no memdesk tenant (another app's, an unknown tenant, an unknown role)
    provider.account.groups = ["wiki-editors", "memdesk:nosuchtenant:agent", "memdesk:acme:janitor"]
    client = Client()

    # when they sign in
    response = sign_in(client)

    # then the admin login page says why, and nobody was made
    assert response["Location"] == "/admin/login/"
    page = messages_on(client, response)
    assert "Your account has no memdesk group at the identity provider" in page
    assert "_auth_user_id" not in client.session
    assert not get_user_model().objects.filter(username="alice").exists()
    assert not Membership.objects.exists()
    refused = StaffAuthEvent.objects.get(kind="sso_refused")
    assert refused.detail["reason"] == "no_memdesk_group"
    assert refused.detail["groups"] == provider.account.groups


def test_a_tampered_id_token_is_refused(acme, globex, provider):
    # given a provider whose id_token (where the groups are) is altered after signing: someone made themselves
    # globex's owner
    provider.groups_in = "id_token"
    provider.account.groups = ["memdesk:acme:agent"]
    provider.tamper_with = {"groups": ["memdesk:globex:owner"]}
    client = Client()

    # when the person signs in
    response = sign_in(client)

    # then the signature check refuses it: nobody is signed in or made
    page = messages_on(client, response)
    assert "answer could not be verified" in page
    assert "_auth_user_id" not in client.session
    assert not SsoIdentity.objects.exists()
    assert not Membership.objects.exists()
    assert len(provider.id_tokens) == 1  # the provider did answer: the refusal is memdesk's


def test_a_userinfo_about_someone_else_is_refused(acme, provider):
    # given a provider whose userinfo describes another person than its id_token
    provider.account.groups = ["memdesk:acme:agent"]
    provider.userinfo_changes = {"sub": "someone-else", "groups": ["memdesk:acme:owner"]}
    client = Client()

    # when the person signs in
    response = sign_in(client)

    # then the mismatch is refused (OpenID Connect Core 5.3.2)
    assert "answer could not be verified" in messages_on(client, response)
    assert not SsoIdentity.objects.exists()


def test_an_sso_identity_that_became_a_superuser_is_refused(acme, provider):
    # given an SSO user an operator made superuser
    provider.account.groups = ["memdesk:acme:agent"]
    sign_in(Client())
    get_user_model().objects.filter(username="alice").update(is_superuser=True)
    client = Client()

    # when they sign in through the provider
    response = sign_in(client)

    # then single sign-on does not open a superuser session
    assert "superuser: sign in with its password" in messages_on(client, response)
    assert "_auth_user_id" not in client.session


def test_a_callback_the_sign_in_did_not_start_is_refused(provider):
    # given a browser that never started a sign-in, handed a callback URL
    client = Client()

    # when it opens the callback
    response = client.get("/oidc/callback/", {"code": "stolen", "state": "made-up"})

    # then it is sent back to the login page, not signed in, and the provider was never asked
    assert "did not complete" in messages_on(client, response)
    assert ("POST", "/token") not in provider.requests


def test_a_refused_sign_in_counts_toward_the_address_lockout(acme, provider, settings):
    # given a lockout after two failures, and a person with no memdesk group
    settings.AXES_FAILURE_LIMIT = 2
    provider.account.groups = []

    # when they are refused twice from one address
    sign_in(Client())
    locked = sign_in(Client())

    # then the address is locked out, and the password form from it too
    assert locked.status_code == 429
    form = {"username": "nobody", "password": "x", "this_is_the_login_form": "1"}
    assert Client().post("/admin/login/?next=/admin/", form).status_code == 429
