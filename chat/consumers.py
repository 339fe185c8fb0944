"""The chat WebSocket: frames and close codes exactly as API.md."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.exceptions import ValidationError

from chat import services
from chat.db import unit_of_work
from chat.prompt import ContextOverflow
from config.errors import ApiError
from memory import metrics

logger = logging.getLogger(__name__)


class ChatConsumer(AsyncWebsocketConsumer):
    """One browser tab in one session. A turn runs in its own task so pings
    are answered while the model streams; a disconnect cancels the turn,
    which stops generation and keeps the partial reply."""

    turn: asyncio.Task | None = None

    async def connect(self) -> None:
        await self.accept()
        reject = self.scope.get("memdesk_reject")
        if reject is not None:
            await self.send_json({"type": "error", "code": "rejected", "message": reject.reason, "retryable": False})
            await self.close(code=reject.code)
            return
        identity = self.scope["memdesk"]
        self.tenant = identity.tenant
        self.session = identity.session
        # Every tab of one session joins its group, so a reply started in
        # one tab streams into all of them (across workers with Redis).
        self.group = f"chat.session.{self.session.pk}"
        await self.channel_layer.group_add(self.group, self.channel_name)
        metrics.WEBSOCKETS.inc()

    async def disconnect(self, code: int) -> None:
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)
            metrics.WEBSOCKETS.dec()
        if self.turn is not None and not self.turn.done():
            self.turn.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # the socket is gone either way
                await self.turn

    async def send_json(self, frame: dict[str, Any]) -> None:
        await self.send(text_data=json.dumps(frame, ensure_ascii=False, default=str))

    async def error(self, code: str, message: str, *, retryable: bool = False, **extra: Any) -> None:
        await self.send_json({"type": "error", "code": code, "message": message, "retryable": retryable, **extra})

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.scope.get("memdesk_reject") is not None:
            return
        try:
            frame = json.loads(text_data if text_data is not None else (bytes_data or b"").decode())
        except (ValueError, UnicodeDecodeError):
            await self.error("bad_frame", "frames must be JSON objects")
            return
        if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
            await self.error("bad_frame", 'frames must be JSON objects with a "type"')
            return
        if frame["type"] == "ping":
            await self.send_json({"type": "pong"})
            return
        if frame["type"] == "history":
            await self.history(frame)
            return
        if frame["type"] != "message":
            await self.error("bad_frame", f"unknown frame type {frame['type']!r}")
            return
        if self.turn is not None and not self.turn.done():
            await self.error("turn_in_progress", "wait for the current reply before sending", retryable=True)
            return
        try:
            services.check_message(frame.get("text"), frame.get("client_msg_id"))
        except services.InvalidMessage as exc:
            await self.error("bad_frame", exc.message)
            return
        self.turn = asyncio.create_task(self._run(frame.get("text"), frame.get("client_msg_id")))

    async def history(self, frame: dict[str, Any]) -> None:
        """Extension of API.md: ``{"type": "history", "before"?, "limit"?}``
        → ``{"type": "history", "messages": [...], "has_more"}``, so a page
        that reconnects reloads what it missed with its session token."""
        limit = frame.get("limit", 50)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 200:
            await self.error("bad_frame", "limit must be an integer between 1 and 200")
            return
        try:
            page, has_more = await unit_of_work(services.list_messages)(
                self.tenant, self.session, before=frame.get("before"), limit=limit
            )
        except (ApiError, ValueError, ValidationError):
            await self.error("bad_frame", "before must be the id of a message of this session")
            return
        await self.send_json(
            {"type": "history", "messages": [services.serialize_message(m) for m in page], "has_more": has_more}
        )

    async def chat_frame(self, event: dict[str, Any]) -> None:
        """A frame of a turn started by another tab of this session."""
        if event.get("origin") != self.channel_name:
            await self.send_json(event["frame"])

    async def broadcast(self, frame: dict[str, Any]) -> None:
        """Send to this socket directly (so ack, deltas, done and errors keep
        their order) and to the session's other tabs through the group."""
        await self.send_json(frame)
        await self.channel_layer.group_send(
            self.group, {"type": "chat.frame", "frame": frame, "origin": self.channel_name}
        )

    async def _run(self, text: str, client_msg_id: str | None) -> None:
        async def on_ack(message_id: str) -> None:
            await self.broadcast({"type": "ack", "client_msg_id": client_msg_id, "message_id": message_id})

        async def on_delta(reply_id: str, piece: str) -> None:
            await self.broadcast({"type": "delta", "reply_id": reply_id, "text": piece})

        try:
            result = await services.run_turn(
                self.tenant, self.session, text, client_msg_id, on_ack=on_ack, on_delta=on_delta
            )
        except services.RateLimited as exc:
            await self.error("rate_limited", exc.message, retryable=True)
            await self.close(code=4429)
            return
        except services.TurnFailed as exc:
            await self.error(exc.code, exc.message, retryable=exc.retryable, message_id=exc.message_id)
            return
        except ContextOverflow as exc:
            await self.error(exc.code, exc.message)
            return
        except services.InvalidMessage as exc:
            await self.error("bad_frame", exc.message)
            return
        except Exception:
            logger.exception("turn failed in session %s", self.session.pk)
            await self.error("internal_error", "Something went wrong on our side; please retry.", retryable=True)
            return
        await self.broadcast(
            {
                "type": "done",
                "reply_id": result.reply_id,
                "text": result.reply,
                "recalled": result.recalled,
                "needs_confirmation": result.needs_confirmation,
                "usage": result.usage,
            }
        )
