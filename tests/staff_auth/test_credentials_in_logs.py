"""An invitation's token and single sign-on's authorization code never reach the server's log: uvicorn's access
log and Django's request log name paths, and these are credentials in a path or a query string."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from config import logs
from tests.staff_auth.invitations_helpers import invite

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('"GET /staff/invitations/Ab-9_x/ HTTP/1.1" 200', '"GET /staff/invitations/[redacted]/ HTTP/1.1" 200'),
        ("/staff/invitations/Ab-9_x", "/staff/invitations/[redacted]"),
        ("GET /oidc/callback/?code=Zx81&state=s1", "GET /oidc/callback/?code=[redacted]&state=s1"),
        ("/x?zipcode=12345", "/x?zipcode=12345"),  # not a credential
    ],
)
def test_the_credential_is_replaced(line, expected):
    assert logs.redact_query(line) == expected


def test_a_refused_invitation_is_logged_without_its_token(acme, staff, caplog):
    # given Django's request log filtered as a server process has it (config/asgi.py calls install)
    logs.install()
    path = invite(acme.tenant, staff["owner_a"])
    token = path.split("/")[-2]
    client = Client()
    client.force_login(staff["agent_a"])  # not the invited address: a 403, which Django logs

    # when the wrong account opens the link
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert client.get(path).status_code == 403

    # then the line names the page, not the token
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "/staff/invitations/[redacted]/" in logged
    assert token not in logged
