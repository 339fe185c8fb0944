"""The admin login locks a username out after ADMIN_LOGIN_FAILURE_LIMIT failures (django-axes): then even the
right password is refused, until the cool-off ends; a success before the limit starts the count again."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/?next=/admin/"
PASSWORD = "pw-owner_a-123"  # noqa: S105 - the staff fixture's password


@pytest.fixture
def limit(settings) -> int:
    settings.AXES_FAILURE_LIMIT = 3
    return 3


def _login(client: Client, password: str, username: str = "owner_a", address: str = "127.0.0.1"):
    form = {"username": username, "password": password, "this_is_the_login_form": "1"}
    return client.post(LOGIN, form, REMOTE_ADDR=address)


def test_the_attempt_after_the_limit_is_refused_even_with_the_right_password(staff, limit):
    # given: as many wrong passwords as the limit; the last of them locks the username out
    client = Client()
    for _ in range(limit - 1):
        assert _login(client, "wrong").status_code == 200  # the form again, with its error
    assert _login(client, "wrong").status_code == 429
    # when: the right password comes next
    refused = _login(client, PASSWORD)
    # then: refused with a wait, and not logged in
    assert refused.status_code == 429
    assert refused.headers["Retry-After"].isdigit()
    assert int(refused.headers["Retry-After"]) > 0
    assert "_auth_user_id" not in client.session


def test_a_success_before_the_limit_resets_the_count(staff, limit):
    # given: one failure short of the limit, then a success
    client = Client()
    for _ in range(limit - 1):
        _login(client, "wrong")
    assert _login(client, PASSWORD).status_code == 302
    client.logout()
    # when: as many failures again, one short of the limit
    for _ in range(limit - 1):
        assert _login(client, "wrong").status_code == 200
    # then: the right password still gets in
    assert _login(client, PASSWORD).status_code == 302
    assert client.session["_auth_user_id"] == str(staff["owner_a"].pk)


def test_the_lockout_holds_the_username_across_addresses_and_the_address_across_usernames(staff, limit):
    # given: owner_a locked out by failures from one address
    for _ in range(limit):
        _login(Client(), "wrong", address="198.51.100.7")
    # when / then: owner_a from another address is refused too
    assert _login(Client(), PASSWORD, address="203.0.113.9").status_code == 429
    # and the guessing address is refused for another username
    assert _login(Client(), "pw-agent_a-123", username="agent_a", address="198.51.100.7").status_code == 429
    # while another staff member elsewhere logs in
    assert _login(Client(), "pw-agent_a-123", username="agent_a", address="203.0.113.10").status_code == 302
