"""An invitation link that is tampered with, expired or already used gives a clear page, and nothing is made."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from staff_auth.models import Invitation, StaffAuthEvent
from tenants.models import Membership
from tests.staff_auth.invitations_helpers import invite, set_password

pytestmark = pytest.mark.django_db


def _nothing_made() -> bool:
    return not get_user_model().objects.filter(username="new.agent@example.com").exists()


def _code(response) -> str:
    html = response.content.decode()
    return html.split('data-code="', 1)[1].split('"', 1)[0]


def test_a_tampered_link_is_refused(acme, staff):
    # given a real invitation link with one character of its token changed
    path = invite(acme.tenant, staff["owner_a"])
    token = path.split("/")[-2]
    forged = path.replace(token, ("A" if token[0] != "A" else "B") + token[1:])

    # when it is opened and posted
    page = Client().get(forged)
    posted = Client().post(forged, set_password())

    # then both say the link is not valid, and nothing is made
    assert page.status_code == posted.status_code == 404
    assert _code(page) == _code(posted) == "invitation_not_found"
    assert "This invitation link is not valid" in page.content.decode()
    assert _nothing_made()
    assert Invitation.objects.get().accepted_at is None


def test_an_expired_link_is_refused(acme, staff, settings):
    # given an invitation past its INVITATION_TTL_DAYS
    path = invite(acme.tenant, staff["owner_a"])
    Invitation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    # when the invitee opens it and tries to accept
    page = Client().get(path)
    posted = Client().post(path, set_password())

    # then it says so, nothing is made, and the attempt is in the audit trail
    assert page.status_code == posted.status_code == 410
    assert _code(posted) == "invitation_expired"
    assert "This invitation has expired" in page.content.decode()
    assert _nothing_made()
    assert StaffAuthEvent.objects.get(kind="invitation_refused").detail == {"reason": "invitation_expired"}


def test_the_ttl_comes_from_the_setting(acme, staff, settings):
    settings.INVITATION_TTL_DAYS = 2
    invite(acme.tenant, staff["owner_a"])
    invitation = Invitation.objects.get()
    assert invitation.expires_at - invitation.created_at == timedelta(days=2)


def test_a_used_link_is_refused(acme, staff):
    # given an invitation accepted once
    path = invite(acme.tenant, staff["owner_a"])
    first = Client()
    assert first.post(path, set_password()).status_code == 302
    user = get_user_model().objects.get(username="new.agent@example.com")

    # when the link is used again, signed out and signed in
    again = Client().post(path, set_password("another-Long-pass-1"))
    first_again = first.post(path)

    # then both are refused and nothing changes
    assert again.status_code == first_again.status_code == 410
    assert _code(again) == _code(first_again) == "invitation_used"
    assert Membership.objects.filter(user=user).count() == 1
    assert get_user_model().objects.filter(email="new.agent@example.com").count() == 1
    assert user.check_password("a-Long-pass-2026")
