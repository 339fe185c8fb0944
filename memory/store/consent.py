"""Whether memdesk may remember an end user: the tenant's ``end_user_memory`` setting and the end user's own
switch (``EndUser.memory_enabled``), read in one place: :func:`memory_enabled_for`.

The tenant setting (``Tenant.settings["end_user_memory"]``):

- ``"on"`` (the default, also when the setting is absent): memory works for every end user;
- ``"off"``: nothing new is remembered about any end user of the tenant, and recall returns nothing;
- ``"end_user_choice"``: on, and each end user may turn it off for themselves (``PUT /api/v1/me/memories``).

Any other value reads as ``"off"``. Elsewhere a bad tenant setting falls back to its default, but this one is a
restriction a tenant asked for: a misspelt ``"of"`` must not quietly remember everything (fail closed).

When memory is off for an end user, the write entry points (``memory.extraction.run.extract_and_store``,
``memory.conversation.units.index_messages``, a tool's answer in ``chat.tools.context``) store nothing new,
``memory.recall.pipeline.recall`` returns nothing and the prompt's anchor shows nothing (``chat.turn.prepare``). What
was
remembered before stays stored, listed to the end user and forgettable, and is recalled again if memory is
turned back on. Forgetting always works. The tenant's own writes (``POST /api/v1/memories``) and batch
progress are the tenant's records, not the end user's words, and are not guarded here.
"""

from __future__ import annotations

from typing import Literal

from config.errors import ApiError
from conversations.access import require_session_id
from conversations.models import ChatSession
from tenants.models import EndUser, Tenant
from tenants.rls import tenant_scope

Mode = Literal["on", "off", "end_user_choice"]

ON: Mode = "on"
OFF: Mode = "off"
END_USER_CHOICE: Mode = "end_user_choice"
SETTING = "end_user_memory"


def memory_mode(tenant: Tenant) -> Mode:
    """The tenant's ``end_user_memory``: ``"on"`` when unset, ``"off"`` for a value that is none of the three."""
    raw = tenant.settings.get(SETTING) if isinstance(tenant.settings, dict) else None
    if raw is None:
        return ON
    return raw if raw in (ON, OFF, END_USER_CHOICE) else OFF


def can_turn_off(tenant: Tenant) -> bool:
    """Whether the tenant lets each end user turn memory off for themselves."""
    return memory_mode(tenant) == END_USER_CHOICE


def memory_enabled_for(tenant: Tenant, end_user: EndUser) -> bool:
    """The one predicate: may memdesk remember ``end_user`` (and recall for them) now?"""
    mode = memory_mode(tenant)
    if mode == END_USER_CHOICE:
        return bool(end_user.memory_enabled)
    return mode == ON


@require_session_id
def memory_enabled_for_session(tenant: Tenant, session: ChatSession) -> bool:
    """:func:`memory_enabled_for` the session's end user, for the chat turn's hot path: the end user's switch is
    read (fresh: a long-lived socket's session object may predate a change) only when the tenant lets them
    choose, so a tenant with memory simply on or off costs no query."""
    mode = memory_mode(tenant)
    if mode != END_USER_CHOICE:
        return mode == ON
    with tenant_scope(tenant):
        end_user = EndUser.objects.for_tenant(tenant).only("id", "memory_enabled").get(pk=session.end_user_id)
    return memory_enabled_for(tenant, end_user)


class MemorySwitchNotAllowed(ApiError):
    """The tenant does not let its end users turn memory off."""

    status = 403
    code = "memory_switch_not_allowed"


@require_session_id
def do_set_memory_enabled(tenant: Tenant, session: ChatSession, enabled: bool) -> EndUser:
    """The end user's own switch: store ``EndUser.memory_enabled`` for the session's end user. Only where the
    tenant's ``end_user_memory`` is ``"end_user_choice"``; otherwise :class:`MemorySwitchNotAllowed` and nothing
    changes. Turning memory off forgets nothing: what is remembered stays listed for the end user to forget."""
    if not can_turn_off(tenant):
        raise MemorySwitchNotAllowed("This service does not let you turn memory off.")
    with tenant_scope(tenant):
        users = EndUser.objects.for_tenant(tenant)
        users.filter(pk=session.end_user_id).update(memory_enabled=enabled)
        return users.get(pk=session.end_user_id)
