"""Realtime events of a session and its handoff: who hears what, through the channel layer (Redis across workers).

Two kinds of group:

- ``chat.session.<session id>`` — every tab of one end user's chat (``chat.consumers.ChatConsumer`` joins it);
  a handoff sends it ``state`` frames, a staff member's reply as ``delta`` and ``done`` frames with
  ``"role": "staff"``, and ``typing``. They travel as the chat socket's own ``chat.frame`` messages, with an
  origin no tab has, so every tab sends them on.
- ``handoff.tenant.<tenant id>`` — the staff consoles of one tenant (``chat.handoff.consumer``): the live queue
  (``session`` events), new messages of sessions a person handles (``message``), and ``typing``. A console
  joins only the groups of its user's tenants: another tenant's staff never hears a word.

Services publish **after their transaction commits** (:func:`after_commit`): nobody hears of a state that was
rolled back, and a frame never overtakes the row it announces. A publish that fails is logged and dropped;
the state of record is the database, which every console and chat tab reloads when it (re)connects.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)

#: The ``origin`` of frames that no chat tab sent: every tab of the session sends them to its browser.
ORIGIN = "memdesk.handoff"


def chat_group(session_id: Any) -> str:
    return f"chat.session.{session_id}"


def staff_group(tenant_id: Any) -> str:
    return f"handoff.tenant.{tenant_id}"


async def to_chat(session_id: Any, frame: dict[str, Any]) -> None:
    """Send ``frame`` to every chat tab of the session."""
    await get_channel_layer().group_send(
        chat_group(session_id), {"type": "chat.frame", "frame": frame, "origin": ORIGIN}
    )


async def to_staff(tenant_id: Any, event: dict[str, Any]) -> None:
    """Send ``event`` to every staff console of the tenant."""
    await get_channel_layer().group_send(staff_group(tenant_id), {"type": "staff.event", "event": event})


async def publish(chat: list[tuple[Any, dict[str, Any]]], staff: list[tuple[Any, dict[str, Any]]]) -> None:
    """Send each ``(session_id, frame)`` of ``chat`` and each ``(tenant_id, event)`` of ``staff``, in order."""
    for session_id, frame in chat:
        await to_chat(session_id, frame)
    for tenant_id, event in staff:
        await to_staff(tenant_id, event)


def _publish_now(chat: list[tuple[Any, dict[str, Any]]], staff: list[tuple[Any, dict[str, Any]]]) -> None:
    try:
        async_to_sync(publish)(chat, staff)
    except Exception:  # the database holds the state; consoles and tabs reload it when they reconnect
        logger.exception("publishing a handoff event failed")


def after_commit(
    *, chat: Iterable[tuple[Any, dict[str, Any]]] = (), staff: Iterable[tuple[Any, dict[str, Any]]] = ()
) -> None:
    """Publish once the caller's transaction commits (at once outside one). Services run in a thread (a
    ``unit_of_work`` or a sync view), so the publish goes back to the event loop of the async caller, if any."""
    frames, events = list(chat), list(staff)
    transaction.on_commit(lambda: _publish_now(frames, events))
