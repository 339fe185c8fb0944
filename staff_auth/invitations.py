"""Invitations: a tenant's owner invites someone by e-mail to join the tenant's staff with a role.

- ``check_can_invite``: only an owner of the tenant, or a superuser, invites into it (the admin's form offers
  only those tenants; this is the rule, and the second wall behind the form).
- ``do_invite`` stores the invitation with the hash of a random token, writes ``invitation_sent`` and, once the
  transaction has committed, e-mails the link ``/staff/invitations/<token>/`` through Django's e-mail backend.
  The token is in the e-mail only: nobody can read it back from memdesk.
- ``check_acceptance`` answers what the link is worth to whoever opened it: ``invitation_not_found`` (never
  issued, mistyped, tampered with, or withdrawn by deleting it), ``invitation_used``, ``invitation_expired``
  (``INVITATION_TTL_DAYS`` after it was sent), ``invitation_for_another_address`` (signed in as someone else),
  ``account_exists`` (signed out, but the address has an account: sign in first).
- ``do_accept_invitation`` makes the membership, once: the invitation row is locked, checked again and marked
  accepted in one transaction, so a link opened twice at once gives one membership and one refusal. The invitee
  is either the signed-in user whose e-mail is the invited address, or a new account (username and e-mail the
  invited address, the password they chose) when no account has that address.

A refused attempt (a POST) on a real invitation writes ``invitation_refused``; a token that matches nothing
writes only a log line, so that anyone on the internet cannot fill the table. Looking at the page writes
nothing.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import BaseUserManager
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.translation import gettext

from staff_auth.audit import record_event
from staff_auth.models import Invitation, SsoMembership, StaffAuthEvent, hash_invitation_token
from tenants.local_time import tenant_timezone
from tenants.models import Membership, Tenant

logger = logging.getLogger(__name__)

Kind = StaffAuthEvent.Kind


class InvitationError(Exception):
    """A refused step; ``code`` is stable snake_case, ``message`` is for the person, ``status`` the HTTP one."""

    def __init__(self, code: str, message: str, status: int, invitation: Invitation | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.invitation = invitation


def _not_found() -> InvitationError:
    return InvitationError(
        "invitation_not_found",
        gettext(
            "This invitation link is not valid. Check that you opened the whole link from the e-mail; the "
            "invitation may also have been withdrawn. Ask the person who invited you for a new one."
        ),
        404,
    )


def _used() -> InvitationError:
    return InvitationError(
        "invitation_used", gettext("This invitation has already been accepted. Sign in to the admin instead."), 410
    )


def _expired() -> InvitationError:
    return InvitationError(
        "invitation_expired",
        gettext("This invitation has expired. Ask the person who invited you to send a new one."),
        410,
    )


def may_invite(user: Any, tenant: Tenant) -> bool:
    if not (user.is_authenticated and user.is_active and user.is_staff):
        return False
    if user.is_superuser:
        return True
    return Membership.objects.filter(user=user, tenant=tenant, role=Membership.Role.OWNER).exists()


def check_can_invite(user: Any, tenant: Tenant) -> None:
    if not may_invite(user, tenant):
        raise InvitationError(
            "not_allowed_to_invite",
            gettext("Only an owner of %(tenant)s can invite staff to it.") % {"tenant": tenant.slug},
            status=403,
        )


def do_invite(invitation: Invitation, *, invited_by: Any, link: Callable[[str], str]) -> None:
    """Stores ``invitation`` (unsaved, with ``tenant``, ``email`` and ``role`` set) and sends its e-mail after
    commit; ``link(token)`` gives the absolute URL of the acceptance page."""
    check_can_invite(invited_by, invitation.tenant)
    token = secrets.token_urlsafe(32)
    now = timezone.now()
    invitation.email = BaseUserManager.normalize_email(invitation.email)
    invitation.token_hash = hash_invitation_token(token)
    invitation.invited_by = invited_by
    invitation.created_at = now
    invitation.expires_at = now + timedelta(days=settings.INVITATION_TTL_DAYS)
    url = link(token)
    with transaction.atomic():
        invitation.save(force_insert=True)
        record_event(
            Kind.INVITATION_SENT,
            tenant=invitation.tenant,
            actor=invited_by,
            invitation=invitation,
            email=invitation.email,
            role=invitation.role,
            expires_at=invitation.expires_at.isoformat(),
        )
        language = translation.get_language()  # the inviter's: the e-mail is written in it
        transaction.on_commit(lambda: _send(invitation, url, language))


def _send(invitation: Invitation, url: str, language: str | None) -> None:
    zone = tenant_timezone(invitation.tenant)
    context = {
        "invitation": invitation, "tenant": invitation.tenant, "url": url, "inviter": invitation.invited_by,
        "zone": zone, "zone_name": str(zone),
    }  # fmt: skip
    try:
        with translation.override(language):
            subject = gettext("You are invited to %(tenant)s on memdesk") % {"tenant": invitation.tenant.name}
            body = render_to_string("staff_auth/invitation_email.txt", context)
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [invitation.email])
    except Exception:
        # After commit: the invitation stands, only its e-mail failed. The owner sees it as pending and can
        # delete it and invite again once the mail server answers.
        logger.exception("the invitation e-mail to %s (invitation %s) was not sent", invitation.email, invitation.pk)


def _find(token: str, *, lock: bool = False) -> Invitation | None:
    digest = hash_invitation_token(token)
    rows = Invitation.objects.select_related("tenant")
    if lock:
        rows = rows.select_for_update(of=("self",))
    invitation = rows.filter(token_hash=digest).first()
    if invitation is None or not hmac.compare_digest(invitation.token_hash, digest):
        return None
    return invitation


def _state_error(invitation: Invitation | None) -> InvitationError | None:
    if invitation is None:
        return _not_found()
    if invitation.accepted_at is not None:
        return _used()
    if invitation.expires_at <= timezone.now():
        return _expired()
    return None


def _account_for(email: str) -> Any:
    """An account that already has this address, as its e-mail or its username (invitations make accounts
    named by their address)."""
    return get_user_model().objects.filter(Q(email__iexact=email) | Q(username__iexact=email)).first()


def _refusal(invitation: Invitation | None, user: Any) -> InvitationError | None:
    """Why ``user`` (None: a new account) may not accept ``invitation`` now, if they may not. A signed-in user
    accepts only an invitation sent to their own address: a forwarded link does not let a colleague join in
    the invitee's place; a new account is not made for an address that already has one."""
    error = _state_error(invitation)
    if error is not None or invitation is None:
        return error
    if user is not None and (not user.email or user.email.casefold() != invitation.email.casefold()):
        return InvitationError(
            "invitation_for_another_address",
            gettext(
                "This invitation is for %(email)s, and you are signed in as %(username)s. Sign out and open the "
                "link again, or ask for an invitation to your own address."
            )
            % {"email": invitation.email, "username": user.get_username()},
            status=403,
            invitation=invitation,
        )
    if user is None and _account_for(invitation.email) is not None:
        return InvitationError(
            "account_exists",
            gettext("An account for %(email)s already exists: sign in first, and you will come back here to accept.")
            % {"email": invitation.email},
            status=200,
            invitation=invitation,
        )
    return None


def _record_refusal(invitation: Invitation | None, user: Any, error: InvitationError) -> None:
    if invitation is not None:
        record_event(
            Kind.INVITATION_REFUSED, tenant=invitation.tenant, user=user, invitation=invitation, reason=error.code
        )
    else:
        logger.warning("an invitation link that matches no invitation was used")


def check_acceptance(token: str, user: Any, *, record: bool = False) -> Invitation:
    """The pending invitation of ``token``, if ``user`` (None: a new account) may accept it; otherwise raises
    :class:`InvitationError`, writing ``invitation_refused`` first when ``record`` (an attempt, not a look)."""
    invitation = _find(token)
    error = _refusal(invitation, user)
    if error is not None:
        if record:
            _record_refusal(invitation, user, error)
        raise error
    assert invitation is not None
    return invitation


def do_accept_invitation(token: str, *, user: Any = None, password: str | None = None) -> tuple[Any, Membership]:
    """Accepts the invitation of ``token`` for the signed-in ``user``, or for a new account with ``password``
    (already checked against the password validators). Returns the user and their membership."""
    with transaction.atomic():
        invitation = _find(token, lock=True)
        error = _refusal(invitation, user)
        if error is None:
            assert invitation is not None
            accepted = _accept(invitation, user, password)
        else:
            _record_refusal(invitation, user, error)
    if error is not None:
        raise error
    return accepted


def _accept(invitation: Invitation, user: Any, password: str | None) -> tuple[Any, Membership]:
    if user is None:
        user = get_user_model().objects.create_user(
            username=invitation.email, email=invitation.email, password=password, is_staff=True
        )
    elif not user.is_staff:
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    before = Membership.objects.filter(user=user, tenant=invitation.tenant).values_list("role", flat=True).first()
    membership, _ = Membership.objects.update_or_create(
        user=user, tenant=invitation.tenant, defaults={"role": invitation.role}
    )
    # An invitation makes a membership by hand: if single sign-on had made this one, it no longer manages it.
    SsoMembership.objects.filter(membership=membership).delete()
    invitation.accepted_at = timezone.now()
    invitation.accepted_by = user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    record_event(
        Kind.INVITATION_ACCEPTED,
        tenant=invitation.tenant,
        user=user,
        actor=invitation.invited_by,
        invitation=invitation,
        role=invitation.role,
        before=before,
    )
    return user, membership
