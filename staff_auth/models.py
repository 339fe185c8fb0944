"""Who a staff member is to the identity provider, which memberships the provider manages, invitations, and the
audit trail of both.

Like ``Membership``, these rows are the staff directory, not a tenant's customer data: no row-level security
(an invitation is looked up by its token before its tenant is known, and a sign-in before the user's tenants are).
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from tenants.models import Membership, Tenant


class SsoIdentity(models.Model):
    """A user as the identity provider knows them: its issuer and ``sub`` claim.

    Single sign-on finds its users here and nowhere else: never by e-mail or username, so a provider that lets
    someone claim an address can never take over a password account that happens to carry it."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity")
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_login_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="uniq_sso_identity")]

    def __str__(self) -> str:
        return f"{self.subject} @ {self.issuer}"


class SsoMembership(models.Model):
    """Marks a ``Membership`` as given by the identity provider's group claim.

    Only marked memberships are changed or removed at a sign-in; a membership made by hand (the admin, an
    invitation) has no mark and is never touched by single sign-on. Deleting the membership deletes the mark."""

    membership = models.OneToOneField(Membership, on_delete=models.CASCADE, primary_key=True, related_name="sso")
    group = models.CharField(max_length=300, help_text=_("The group claim that gave it, e.g. memdesk:acme:agent."))
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    def __str__(self) -> str:
        return self.group


def hash_invitation_token(token: str) -> str:
    """The stored form of an invitation token. The token is 256 random bits, so a plain SHA-256 cannot be
    reversed by guessing; not keyed with SECRET_KEY, so rotating that key does not void pending invitations."""
    return hashlib.sha256(token.encode()).hexdigest()


class Invitation(models.Model):
    """An invitation to join ``tenant`` with ``role``, sent by e-mail. The link carries a random token of which
    only the hash is kept (``hash_invitation_token``); it works once, until ``expires_at``. Made only by
    ``staff_auth.invitations.do_invite``; deleting a pending invitation revokes its link."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="invitations")
    #: At most 150 characters: the account an invitation makes is named by it (``User.username``).
    email = models.EmailField(max_length=150)
    role = models.CharField(max_length=10, choices=Membership.Role.choices, default=Membership.Role.AGENT)
    token_hash = models.CharField(max_length=64, unique=True, editable=False)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    expires_at = models.DateTimeField(editable=False)
    accepted_at = models.DateTimeField(null=True, blank=True, editable=False)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.email} → {self.tenant} ({self.role})"


class StaffAuthEvent(models.Model):
    """One step of staff identity, written in the transaction of the change it records: an invitation sent,
    accepted or refused; a single sign-on, refused, or the membership it added, changed or removed."""

    class Kind(models.TextChoices):
        # The labels Django derived when the field was made ("Sso Login"); the English catalogue tidies them.
        INVITATION_SENT = "invitation_sent", _("Invitation Sent")
        INVITATION_ACCEPTED = "invitation_accepted", _("Invitation Accepted")
        INVITATION_REFUSED = "invitation_refused", _("Invitation Refused")
        SSO_LOGIN = "sso_login", _("Sso Login")
        SSO_REFUSED = "sso_refused", _("Sso Refused")
        SSO_MEMBERSHIP_ADDED = "sso_membership_added", _("Sso Membership Added")
        SSO_MEMBERSHIP_CHANGED = "sso_membership_changed", _("Sso Membership Changed")
        SSO_MEMBERSHIP_REMOVED = "sso_membership_removed", _("Sso Membership Removed")

    kind = models.CharField(max_length=30, choices=Kind.choices)
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    #: the staff member concerned (the invitee, the one signing in)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: who did it (the inviter); none for a sign-in, which the provider vouched for
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    invitation = models.ForeignKey(Invitation, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "created_at"], name="staff_auth_event_tenant_at")]

    def __str__(self) -> str:
        return f"{self.kind} at {self.created_at:%Y-%m-%d %H:%M:%S}"


class StaffPreference(models.Model):
    """A staff member's own settings: the language of the admin and the staff pages, one of ``LANGUAGES``
    (checked by ``staff_auth.language``, not by a ``choices`` list, so adding a language needs no migration).
    Empty: the browser's language decides."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="staff_preference")
    language = models.CharField(max_length=15, blank=True, default="")
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.user_id}: {self.language or '-'}"
