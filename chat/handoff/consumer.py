"""The staff console's WebSocket, ``ws/staff/``: the live queue and taking conversations over.

Who: a logged-in staff user (Django's session cookie, ``channels.auth``) with a membership of the tenant —
every role (owner, admin, agent) answers customers — or a superuser, for every tenant. ``?tenant=<slug>``
narrows the console to one tenant. The cookie is the credential, so a page on another site must not open
this socket with it: a browser's ``Origin`` must be memdesk's own (cross-site WebSocket hijacking).

Close codes: 4401 not a logged-in staff user, 4403 another site's page or no tenant to serve.

Server → console (docs/api-extensions.md has the shapes):

- on connect ``{"type": "queue", "sessions": [...]}``: the tenants' sessions waiting for a person (with their
  position) or with one; then, live, no polling: ``{"type": "session", "session"}`` when one starts waiting,
  is claimed, released; ``{"type": "message", "session_id", "message"}`` for each message of a session a person
  has (the end user's, a staff member's); ``{"type": "typing", "session_id", "role": "user"}``.

Console → server, each answered or refused with ``{"type": "error", "code", "message"}``:

- ``{"type": "ping"}`` → ``pong``; also tells memdesk the console is open (``Membership.last_seen_at``: the
  console pings every 20 s, and nobody online for a minute offers end users to leave a message);
- ``{"type": "open", "session_id"}`` → ``{"type": "note", "note"}`` (``chat.handoff.note``);
- ``{"type": "claim", "session_id"}`` → ``{"type": "claimed", "session_id", "note"}``; a conversation someone
  else took first → ``already_claimed``;
- ``{"type": "reply", "session_id", "text"}`` → ``{"type": "sent", "session_id", "message_id"}``; the end user's
  tabs get it as ``delta`` and ``done`` with ``"role": "staff"``;
- ``{"type": "typing", "session_id"}`` → the end user's tabs get ``{"type": "typing", "role": "staff"}``;
- ``{"type": "release", "session_id"}`` → ``{"type": "released", "session_id"}``: the AI answers again.

Another tenant's session is ``session_not_found``, like one that does not exist.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any
from urllib.parse import parse_qs, urlparse

from channels.generic.websocket import AsyncWebsocketConsumer

from chat.handoff import state as handoff
from chat.handoff.note import handoff_note
from chat.sessions import events
from config.db.sql import unit_of_work
from config.errors import ApiError
from config.text_input import InvalidJson, loads_bounded
from conversations.models import ChatSession

logger = logging.getLogger(__name__)

#: ``last_seen_at`` is written at most this often per console.
SEEN_EVERY_S = 15.0
TYPING_EVERY_S = 1.0


def same_origin(scope: dict[str, Any]) -> bool:
    """No ``Origin`` (not a browser) or memdesk's own host: the only pages that may use the staff cookie here."""
    headers = {k.decode("latin1").lower(): v.decode("latin1") for k, v in scope.get("headers", [])}
    origin = headers.get("origin")
    return not origin or urlparse(origin).netloc == headers.get("host", "")


class StaffConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        self.tenants: list[Any] = []
        self.joined: list[str] = []
        self.seen_at = 0.0
        self.typing_at: dict[str, float] = {}
        user = self.scope.get("user")
        if not same_origin(self.scope):
            await self._refuse(4403, "this page may not open the staff console")
            return
        if user is None or not user.is_authenticated:
            await self._refuse(4401, "log in as staff first")
            return
        slug = (parse_qs(self.scope.get("query_string", b"").decode("latin1")).get("tenant") or [None])[0]
        self.user = user
        self.tenants = await unit_of_work(handoff.staff_tenants)(user, slug)
        if not self.tenants:
            await self._refuse(4403 if user.is_staff else 4401, "no tenant whose conversations you may take over")
            return
        for tenant in self.tenants:
            group = events.staff_group(tenant.pk)
            await self.channel_layer.group_add(group, self.channel_name)
            self.joined.append(group)
        await self.accept()
        await self._seen(force=True)
        await self.send_json({"type": "queue", "sessions": await unit_of_work(handoff.live_queue)(self.tenants)})

    async def _refuse(self, code: int, reason: str) -> None:
        # Accepted first: a close before accept reaches the browser as a bare HTTP 403, without the code.
        await self.accept()
        await self.send_json({"type": "error", "code": "rejected", "message": reason})
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        for group in self.joined:
            await self.channel_layer.group_discard(group, self.channel_name)

    async def send_json(self, frame: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(frame, ensure_ascii=False, default=str))

    async def error(self, code: str, message: str, **extra: Any) -> None:
        await self.send_json({"type": "error", "code": code, "message": message, **extra})

    async def staff_event(self, event: dict[str, Any]) -> None:
        """An event of one of this console's tenants (``chat.sessions.events.to_staff``)."""
        await self.send_json(event["event"])

    async def _seen(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.seen_at >= SEEN_EVERY_S:
            self.seen_at = now
            await unit_of_work(handoff.do_mark_online)(self.user, self.tenants)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not self.joined:
            return
        try:
            frame = loads_bounded(text_data if text_data is not None else (bytes_data or b""))
        except (InvalidJson, ValueError):
            await self.error("bad_frame", "frames must be JSON objects")
            return
        if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
            await self.error("bad_frame", 'frames must be JSON objects with a "type"')
            return
        handler = getattr(self, f"on_{frame['type']}", None)
        if handler is None:
            await self.error("bad_frame", f"unknown frame type {frame['type']!r}")
            return
        try:
            await handler(frame)
        except ApiError as exc:
            await self.error(exc.code, exc.message, session_id=frame.get("session_id"))

    async def _session(self, frame: dict[str, Any]) -> ChatSession:
        return await unit_of_work(handoff.staff_session)(self.tenants, frame.get("session_id"))

    async def on_ping(self, frame: dict[str, Any]) -> None:
        await self._seen()
        await self.send_json({"type": "pong"})

    async def on_queue(self, frame: dict[str, Any]) -> None:
        await self.send_json({"type": "queue", "sessions": await unit_of_work(handoff.live_queue)(self.tenants)})

    async def on_open(self, frame: dict[str, Any]) -> None:
        session = await self._session(frame)
        note = await unit_of_work(handoff_note)(session.tenant, session, reader=self.user)
        await self.send_json({"type": "note", "note": note})

    async def on_claim(self, frame: dict[str, Any]) -> None:
        session = await self._session(frame)
        claimed = await unit_of_work(handoff.do_claim)(session.tenant, session, self.user)
        note = await unit_of_work(handoff_note)(session.tenant, claimed, reader=self.user)
        await self.send_json({"type": "claimed", "session_id": str(session.pk), "note": note})

    async def on_reply(self, frame: dict[str, Any]) -> None:
        session = await self._session(frame)
        message = await unit_of_work(handoff.do_staff_reply)(session.tenant, session, self.user, frame.get("text"))
        await self.send_json({"type": "sent", "session_id": str(session.pk), "message_id": str(message.pk)})

    async def on_typing(self, frame: dict[str, Any]) -> None:
        key = str(frame.get("session_id"))
        now = time.monotonic()
        if now - self.typing_at.get(key, 0.0) < TYPING_EVERY_S:
            return
        self.typing_at[key] = now
        session = await self._session(frame)
        await events.to_chat(session.pk, {"type": "typing", "role": "staff"})

    async def on_release(self, frame: dict[str, Any]) -> None:
        session = await self._session(frame)
        await unit_of_work(handoff.do_release)(session.tenant, session, user=self.user)
        await self.send_json({"type": "released", "session_id": str(session.pk)})
