"""A tenant's handoff settings (``Tenant.settings["handoff"]``) and the model's built-in ``handoff_to_human`` tool.

Every trigger of a handoff to a person is a setting; a missing key takes its default, a value of the wrong
type falls back to the default too (a typo in the admin must not fail every chat turn). docs/handoff.md is the
reference. Only the end user's own request is on by default: the automatic triggers stop the AI answering, so a
tenant turns them on once someone is there to answer. The defaults:

=======================  ===========  ==============================================================
key                      default      meaning
=======================  ===========  ==============================================================
``user_request``         ``true``     the end user asks (「转人工」, "talk to a person", …) or presses the button
``phrases``              ``[]``       more phrases that ask for a person, on top of memdesk's own
``keywords``             ``[]``       the tenant's keyword rule: a message containing one is handed off
``model_tool``           ``false``    offer the model the built-in ``handoff_to_human`` tool (it costs
                                      prompt tokens on every turn, so a tenant turns it on)
``confirmation_streak``  ``0``        this many replies in a row that needed the user's confirmation
                                      hand the next message off (0: off)
``amnesia``              ``false``    a message after an amnesia alert whose empty-recall streak goes on
``negative_mood_turns``  ``0``        this many negative messages in a row (``memory.text.mood``) (0: off)
``offline_wait_s``       ``120``      waiting this long with nobody online offers to leave a message
``webhook_url``          ``""``       where a message left for the team is POSTed, signed (V2)
=======================  ===========  ==============================================================

Business hours are ``Tenant.settings["business_hours"]`` (``chat.handoff.offline``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tenants.models import Tenant

#: The built-in tool's name: a tenant tool of the same name wins (it is the tenant's own action).
HANDOFF_TOOL = "handoff_to_human"

#: What the model is told about the built-in tool: a structured call with a reason, never a magic string.
HANDOFF_TOOL_DEFINITION: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": HANDOFF_TOOL,
        "description": (
            "Hand the conversation to a human customer-service agent. Call it when the customer asks for a "
            "person, or when you cannot help and a person must take over. Give a short reason."
        ),
        "parameters": {
            "type": "object",
            "properties": {"reason": {"type": "string", "description": "Why a person should take over"}},
            "required": ["reason"],
        },
    },
}


@dataclass(frozen=True)
class HandoffSettings:
    user_request: bool = True
    phrases: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    model_tool: bool = False
    confirmation_streak: int = 0
    amnesia: bool = False
    negative_mood_turns: int = 0
    offline_wait_s: int = 120
    webhook_url: str = ""


_DEFAULTS = HandoffSettings()


def _bool(conf: dict[str, Any], key: str) -> bool:
    value = conf.get(key)
    return value if isinstance(value, bool) else getattr(_DEFAULTS, key)


def _count(conf: dict[str, Any], key: str, top: int) -> int:
    value = conf.get(key)
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= top
    return value if ok else getattr(_DEFAULTS, key)


def _words(conf: dict[str, Any], key: str) -> tuple[str, ...]:
    value = conf.get(key)
    if not isinstance(value, list):
        return ()
    return tuple(w.strip().casefold() for w in value if isinstance(w, str) and w.strip())[:100]


def handoff_settings(tenant: Tenant) -> HandoffSettings:
    """The tenant's handoff settings, each missing or malformed key at its default."""
    conf = tenant.settings.get("handoff") if isinstance(tenant.settings, dict) else None
    conf = conf if isinstance(conf, dict) else {}
    url = conf.get("webhook_url")
    return HandoffSettings(
        user_request=_bool(conf, "user_request"),
        phrases=_words(conf, "phrases"),
        keywords=_words(conf, "keywords"),
        model_tool=_bool(conf, "model_tool"),
        confirmation_streak=_count(conf, "confirmation_streak", 50),
        amnesia=_bool(conf, "amnesia"),
        negative_mood_turns=_count(conf, "negative_mood_turns", 50),
        offline_wait_s=_count(conf, "offline_wait_s", 86400),
        webhook_url=url if isinstance(url, str) else "",
    )


def builtin_tools(tenant: Tenant, tenant_tools: dict[str, Any]) -> list[dict[str, Any]]:
    """The built-in tools a turn offers the model beside the tenant's own: ``handoff_to_human`` when the tenant
    turned ``model_tool`` on and has no tool of that name."""
    if HANDOFF_TOOL in tenant_tools or not handoff_settings(tenant).model_tool:
        return []
    return [HANDOFF_TOOL_DEFINITION]
