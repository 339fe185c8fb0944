"""The end user's side of a handoff on the chat socket (mixed into ``chat.consumers.ChatConsumer``).

Client → server, extensions of API.md (docs/api-extensions.md):

- ``{"type": "handoff", "reason"?}`` — the widget's "talk to a person" button (trigger ``user_button``);
  every tab of the session gets ``{"type": "state", "state", "position"?, "leave_message"?}``;
- ``{"type": "typing"}`` — the end user is typing; staff consoles hear it while a person has the conversation
  (at most once a second);
- ``{"type": "close"}`` — the end user ends the conversation (``chat.sessions.lifecycle.do_close_session``); every tab
gets
  ``{"type": "state", "state": "closed"}`` and the widget offers a rating;
- ``{"type": "rating", "score": 1..5, "comment"?}`` — the conversation's rating →
  ``{"type": "rated", "score", "handled_by"}``; a second replaces the first.

Server → client, through the session's group (``chat.sessions.events``): ``state`` frames, a staff member's
reply as ``delta`` / ``done`` with ``"role": "staff"``, and ``{"type": "typing", "role": "staff"}``.
"""

from __future__ import annotations

import time
from typing import Any

from chat.handoff import state as handoff
from chat.sessions import events
from chat.sessions.lifecycle import do_close_session
from config.db.sql import unit_of_work
from config.errors import ApiError
from conversations.models import ChatSession
from tenants.models import Tenant
from tenants.rls import tenant_scope

#: The end user's typing reaches staff at most this often.
TYPING_EVERY_S = 1.0


def _close(tenant: Tenant, session: ChatSession) -> ChatSession:
    # The REST view runs in its request's RLS scope; the socket's unit of work opens the tenant's own.
    with tenant_scope(tenant):
        return do_close_session(tenant, session)


class HandoffFrames:
    """Needs the consumer's ``tenant``, ``session``, ``send_json`` and ``error``. ``handoff_state`` follows the
    ``state`` frames the socket sends, so typing is relayed only while a person has the conversation."""

    handoff_state: str = handoff.State.AI
    _typing_at: float = 0.0

    async def handoff_frame(self, frame: dict[str, Any]) -> bool:
        """Handle ``frame`` if it is one of the handoff's; whether it was."""
        kind = frame["type"]
        if kind == "handoff":
            await self._ask_for_person(frame)
        elif kind == "typing":
            await self._typing()
        elif kind == "rating":
            await self._rate(frame)
        elif kind == "close":
            await unit_of_work(_close)(self.tenant, self.session)
        else:
            return False
        return True

    def saw_frame(self, frame: dict[str, Any]) -> None:
        """A frame this socket sends on: a ``state`` frame updates ``handoff_state``."""
        if frame.get("type") == "state" and isinstance(frame.get("state"), str):
            self.handoff_state = frame["state"]

    async def _ask_for_person(self, frame: dict[str, Any]) -> None:
        try:
            reason = handoff.check_reason(frame.get("reason")) or "the end user pressed the button"
            done = await unit_of_work(handoff.do_request_handoff)(
                self.tenant, self.session, trigger="user_button", reason=reason
            )
        except ApiError as exc:
            await self.error(exc.code, exc.message)
            return
        if not done.changed:  # a change reaches every tab through the group; no change, only the asker hears
            self.saw_frame(done.frame())
            await self.send_json(done.frame())

    async def _typing(self) -> None:
        now = time.monotonic()
        if self.handoff_state == handoff.State.AI or now - self._typing_at < TYPING_EVERY_S:
            return
        self._typing_at = now
        await events.to_staff(self.tenant.pk, {"type": "typing", "session_id": str(self.session.pk), "role": "user"})

    async def _rate(self, frame: dict[str, Any]) -> None:
        try:
            score, comment = handoff.check_rating(frame.get("score"), frame.get("comment"))
            rating = await unit_of_work(handoff.do_rate)(self.tenant, self.session, score, comment)
        except ApiError as exc:
            await self.error(exc.code, exc.message)
            return
        await self.send_json({"type": "rated", "score": rating.score, "handled_by": rating.handled_by})
