"""The identity provider's group claim read as memdesk roles (pure: no database).

A group ``<OIDC_GROUP_PREFIX><tenant-slug>:<role>`` (``memdesk:acme:agent``) gives the role owner, admin or
agent in that tenant. Other groups are none of memdesk's business and are ignored, and so is a memdesk group with
an unknown role. Two groups for one tenant give the higher role (owner > admin > agent): a provider that lists a
person in ``memdesk:acme:agent`` and ``memdesk:acme:owner`` means the owner. Keycloak's full group path
(``/memdesk:acme:agent``) reads the same as the group's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tenants.models import Membership

#: Higher wins when a tenant is named twice.
ROLE_RANK = {Membership.Role.AGENT: 1, Membership.Role.ADMIN: 2, Membership.Role.OWNER: 3}


def group_names(claims: Mapping[str, Any], claim: str) -> list[str]:
    """The claim's group names: a list of strings, or one string (some providers send a lone group so)."""
    value = claims.get(claim)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [item for item in value if isinstance(item, str)]
    return []


def claimed_roles(claims: Mapping[str, Any], *, claim: str, prefix: str) -> dict[str, tuple[str, str]]:
    """``{tenant slug: (role, group)}`` for every memdesk group in ``claims[claim]``."""
    roles: dict[str, tuple[str, str]] = {}
    for group in group_names(claims, claim):
        name = group.strip().lstrip("/")
        if not name.startswith(prefix):
            continue
        slug, sep, role = name[len(prefix) :].partition(":")
        if not sep or not slug or role not in ROLE_RANK:
            continue
        held = roles.get(slug)
        if held is None or ROLE_RANK[role] > ROLE_RANK[held[0]]:
            roles[slug] = (role, group)
    return roles
