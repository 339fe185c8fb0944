"""A single sign-on, once the identity provider's answer is verified: the staff user and their memberships.

``do_sso_login(issuer, claims)`` is the one entry (``staff_auth.backends`` calls it with the id_token's issuer
and the merged id_token and userinfo claims). In one transaction, with the user's row locked so that two
sign-ins of one person do not interleave, it

1. finds the user by the provider's ``(iss, sub)`` (``SsoIdentity``), or makes one — staff, never superuser,
   with no usable password — when the claims give a memdesk group;
2. sets each claimed tenant's role on the membership single sign-on manages there (``SsoMembership``), making
   it if there is none; a membership made by hand for that tenant is left as it is;
3. removes every membership single sign-on made whose group is no longer claimed: access follows the provider
   at every sign-in. Hand-made memberships are never removed;
4. writes a ``StaffAuthEvent`` for each change, and one for the sign-in or its refusal.

A person whose claims give no memdesk group is refused (``SsoRefused``) — after step 3 has removed what single
sign-on gave them, so a group taken away at the provider is gone here even though the sign-in fails. An account
that is a superuser, or that an operator deactivated, is refused without any change.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext

from staff_auth.audit import record_event
from staff_auth.groups import claimed_roles, group_names
from staff_auth.models import SsoIdentity, SsoMembership, StaffAuthEvent
from tenants.models import Membership, Tenant

Kind = StaffAuthEvent.Kind


class SsoRefused(Exception):
    """The sign-in is refused; ``code`` is stable snake_case, ``message`` is for the person signing in."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


NO_GROUP = "no_memdesk_group"


def _no_group() -> SsoRefused:
    return SsoRefused(
        NO_GROUP,
        gettext(
            "Your account has no memdesk group at the identity provider, so it gives no access here. "
            "Ask your administrator to add you to a group such as memdesk:<tenant>:agent."
        ),
    )


@dataclass(frozen=True)
class Grant:
    tenant: Tenant
    role: str
    group: str


def tenant_grants(claims: Mapping[str, Any]) -> list[Grant]:
    """The memdesk groups in ``claims`` that name an existing tenant, with their role."""
    roles = claimed_roles(claims, claim=settings.OIDC_GROUPS_CLAIM, prefix=settings.OIDC_GROUP_PREFIX)
    tenants = Tenant.objects.filter(slug__in=roles)
    return [Grant(tenant, *roles[tenant.slug]) for tenant in tenants]


def do_sso_login(*, issuer: str, claims: Mapping[str, Any]) -> Any:
    """The user for a verified sign-in, their memberships brought in line with ``claims``; raises
    :class:`SsoRefused` (with the changes made up to the refusal committed). See the module docstring."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise SsoRefused("missing_subject", gettext("The identity provider did not say who you are (no 'sub' claim)."))
    grants = tenant_grants(claims)
    try:
        with transaction.atomic():
            user, refusal = _sign_in(issuer, subject, claims, grants)
    except IntegrityError:
        # The same person's first sign-in, twice at once: the other made the identity (or took the username);
        # once more finds it and takes the locked path.
        with transaction.atomic():
            user, refusal = _sign_in(issuer, subject, claims, grants)
    if refusal is not None:
        raise refusal
    return user


def _sign_in(issuer: str, subject: str, claims: Mapping[str, Any], grants: list[Grant]) -> tuple[Any, Any]:
    User = get_user_model()  # noqa: N806
    groups = group_names(claims, settings.OIDC_GROUPS_CLAIM)
    identity = SsoIdentity.objects.filter(issuer=issuer, subject=subject).first()
    if identity is None:
        if not grants:
            record_event(Kind.SSO_REFUSED, reason=NO_GROUP, subject=subject, groups=groups)
            return None, _no_group()
        user = _new_user(issuer, subject, claims)
        identity = SsoIdentity.objects.create(user=user, issuer=issuer, subject=subject)
    else:
        # The lock orders concurrent sign-ins of one person: each sees the memberships the other left.
        user = User.objects.select_for_update().get(pk=identity.user_id)
    if user.is_superuser or not user.is_active:
        reason = "superuser_account" if user.is_superuser else "inactive_account"
        record_event(Kind.SSO_REFUSED, user=user, reason=reason, subject=subject)
        message = (
            gettext("This account is a superuser: sign in with its password.")
            if user.is_superuser
            else gettext("This account is deactivated in memdesk.")
        )
        return None, SsoRefused(reason, message)
    _sync_memberships(user, grants)
    if not grants:
        record_event(Kind.SSO_REFUSED, user=user, reason=NO_GROUP, subject=subject, groups=groups)
        return None, _no_group()
    _update_user(user, claims)
    identity.last_login_at = timezone.now()
    identity.save(update_fields=["last_login_at"])
    record_event(Kind.SSO_LOGIN, user=user, tenants={g.tenant.slug: g.role for g in grants})
    return user, None


def _sync_memberships(user: Any, grants: list[Grant]) -> None:
    memberships = {m.tenant_id: m for m in Membership.objects.filter(user=user).select_related("sso", "tenant")}
    claimed = {grant.tenant.pk for grant in grants}
    for grant in grants:
        membership = memberships.get(grant.tenant.pk)
        if membership is None:
            membership = Membership.objects.create(user=user, tenant=grant.tenant, role=grant.role)
            SsoMembership.objects.create(membership=membership, group=grant.group)
            record_event(Kind.SSO_MEMBERSHIP_ADDED, tenant=grant.tenant, user=user, role=grant.role, group=grant.group)
        elif not _managed(membership):
            continue  # made by hand: single sign-on never changes it
        elif membership.role != grant.role or membership.sso.group != grant.group:
            before = membership.role
            membership.role = grant.role
            membership.save(update_fields=["role"])
            SsoMembership.objects.filter(pk=membership.pk).update(group=grant.group)
            record_event(
                Kind.SSO_MEMBERSHIP_CHANGED,
                tenant=grant.tenant,
                user=user,
                role=grant.role,
                before=before,
                group=grant.group,
            )
    for tenant_id, membership in memberships.items():
        if tenant_id not in claimed and _managed(membership):
            record_event(
                Kind.SSO_MEMBERSHIP_REMOVED,
                tenant=membership.tenant,
                user=user,
                role=membership.role,
                group=membership.sso.group,
            )
            membership.delete()


def _managed(membership: Membership) -> bool:
    try:
        membership.sso  # noqa: B018 - the reverse one-to-one raises when there is no mark
    except SsoMembership.DoesNotExist:
        return False
    return True


def _new_user(issuer: str, subject: str, claims: Mapping[str, Any]) -> Any:
    User = get_user_model()  # noqa: N806
    user = User(username=_free_username(issuer, subject, claims), is_staff=True, is_superuser=False)
    user.set_unusable_password()  # single sign-on only: the password form cannot log this account in
    _copy_profile(user, claims)
    user.save()
    return user


def _free_username(issuer: str, subject: str, claims: Mapping[str, Any]) -> str:
    """The provider's ``preferred_username`` (or e-mail, or ``sub``) when no account has it; otherwise that
    name with a suffix from the identity, so it never lands on someone else's account."""
    User = get_user_model()  # noqa: N806
    wanted = next(
        (value for value in (claims.get("preferred_username"), claims.get("email"), subject) if isinstance(value, str)),
        subject,
    )[:150]
    if not User.objects.filter(username=wanted).exists():
        return wanted
    suffix = hashlib.sha256(f"{issuer}\n{subject}".encode()).hexdigest()[:10]
    return f"{wanted[:139]}-{suffix}"


def _copy_profile(user: Any, claims: Mapping[str, Any]) -> None:
    for field, claim in (("email", "email"), ("first_name", "given_name"), ("last_name", "family_name")):
        value = claims.get(claim)
        if isinstance(value, str):
            setattr(user, field, value[: user._meta.get_field(field).max_length])


def _update_user(user: Any, claims: Mapping[str, Any]) -> None:
    _copy_profile(user, claims)
    user.is_staff = True
    user.save(update_fields=["email", "first_name", "last_name", "is_staff"])
