"""Invitations made the way the admin makes them (``do_invite``), the link's path kept for the test."""

from __future__ import annotations

from typing import Any

from staff_auth.invitations import do_invite
from staff_auth.models import Invitation

PASSWORD = "a-Long-pass-2026"  # noqa: S105 - a test invitee's new password


def invite(tenant: Any, by: Any, email: str = "new.agent@example.com", role: str = "agent") -> str:
    """Invites ``email``; returns the acceptance page's path."""
    paths: list[str] = []

    def link(token: str) -> str:
        paths.append(f"/staff/invitations/{token}/")
        return "http://testserver" + paths[-1]

    do_invite(Invitation(tenant=tenant, email=email, role=role), invited_by=by, link=link)
    return paths[0]


def set_password(password: str = PASSWORD) -> dict[str, str]:
    return {"new_password1": password, "new_password2": password}
