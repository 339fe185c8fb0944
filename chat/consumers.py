"""The chat WebSocket: frames and close codes exactly as API.md."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

from channels.consumer import get_handler_name
from channels.generic.websocket import AsyncWebsocketConsumer
from django.core.exceptions import ValidationError

from chat import metrics
from chat.handoff.frames import HandoffFrames
from chat.handoff.state import state_frame
from chat.prompt.build import ContextOverflow
from chat.sessions.messages import InvalidMessage, RateLimited, check_message, list_messages, serialize_message
from chat.turn.run import TurnFailed, TurnInProgress, TurnResult, run_turn
from config.db.sql import unit_of_work
from config.errors import ApiError
from config.text_input import InvalidJson, loads_bounded

logger = logging.getLogger(__name__)

#: The session's other tabs get the reply's deltas in batches at most this
#: far apart (this tab gets every delta at once): one group message per batch
#: instead of one per token.
RELAY_DELTAS_EVERY_S = 0.1


async def group_size(layer: Any, group: str) -> int | None:
    """How many channels (tabs, in every worker) ``group`` holds, or None
    when the channel layer cannot tell (then every frame is relayed). Reads
    the two layers memdesk configures: in-memory (one process) and Redis
    (the group's sorted set: one ``ZCARD``; members of a crashed worker stay
    until the group expires, which only costs relaying to nobody)."""
    from channels.layers import InMemoryChannelLayer

    if isinstance(layer, InMemoryChannelLayer):
        return len(layer.groups.get(group, {}))
    try:
        from channels_redis.core import RedisChannelLayer
    except ImportError:  # pragma: no cover - channels-redis is a dependency
        return None
    if isinstance(layer, RedisChannelLayer):
        connection = layer.connection(layer.consistent_hash(group))
        return int(await connection.zcard(layer._group_key(group)))
    return None


class ChatConsumer(HandoffFrames, AsyncWebsocketConsumer):
    """One browser tab in one session. A turn runs in its own task so pings
    are answered while the model streams; a disconnect cancels the turn,
    which stops generation and keeps the partial reply."""

    turn: asyncio.Task | None = None
    #: From a message's arrival until its turn's last frame (``done`` or an
    #: error) goes out: a client that waited for that frame may send the next
    #: message at once, even while the frame is still being relayed to the
    #: session's other tabs.
    replying: bool = False

    async def connect(self) -> None:
        # Frames reach the session's other tabs in the order this tab sends
        # them, across the end of one turn and the start of the next.
        self.relay = asyncio.Lock()
        self.pending: list[dict[str, Any]] = []  # deltas not yet relayed to the other tabs
        self.relay_timer: asyncio.Task | None = None
        self.other_tabs = True  # whether this turn's frames go to the group too
        self.finishing: set[asyncio.Task] = set()  # turns past their done frame, doing upkeep
        reject = self.scope.get("memdesk_reject")
        if reject is not None:
            await self.accept()
            await self.send_json({"type": "error", "code": "rejected", "message": reject.reason, "retryable": False})
            await self.close(code=reject.code)
            return
        identity = self.scope["memdesk"]
        self.tenant = identity.tenant
        self.session = identity.session
        self.handoff_state = self.session.state  # who answers (chat.handoff.frames); state frames update it
        # Every tab of one session joins its group, so a reply started in
        # one tab streams into all of them (across workers with Redis). It
        # joins before its socket opens: once a tab is connected, a turn
        # started in another tab counts it (see ``_run``).
        self.group = f"chat.session.{self.session.pk}"
        await self.channel_layer.group_add(self.group, self.channel_name)
        metrics.WEBSOCKETS.inc()
        await self.accept()

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Channels' dispatch without its ``aclose_old_connections()`` before
        every handler: that call hops to Channels' single sync thread (about
        twenty hops a turn: each frame in, each group message) to close
        database connections this consumer never opens there — its database
        work runs in ``config.db.sql.unit_of_work``, which closes its own."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def disconnect(self, code: int) -> None:
        if self.relay_timer is not None:
            self.relay_timer.cancel()
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)
            metrics.WEBSOCKETS.dec()
        for task in list(self.finishing):  # their replies are stored and sent: let their upkeep end
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
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
            frame = loads_bounded(text_data if text_data is not None else (bytes_data or b""))
        except InvalidJson as exc:  # too deep to parse safely: refused like any bad frame, the socket stays open
            await self.error("bad_frame", exc.message)
            return
        except ValueError:  # UnicodeDecodeError included
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
        if await self.handoff_frame(frame):  # handoff, typing, rating (chat.handoff.frames)
            return
        if frame["type"] != "message":
            await self.error("bad_frame", f"unknown frame type {frame['type']!r}")
            return
        if self.replying:
            await self.error("turn_in_progress", "wait for the current reply before sending", retryable=True)
            return
        try:
            check_message(frame.get("text"), frame.get("client_msg_id"))
        except InvalidMessage as exc:
            await self.error("bad_frame", exc.message)
            return
        self.replying = True
        self.turn = asyncio.create_task(self._run(frame.get("text"), frame.get("client_msg_id")))

    async def history(self, frame: dict[str, Any]) -> None:
        """Extension of API.md: ``{"type": "history", "before"?, "limit"?}``
        → ``{"type": "history", "messages": [...], "has_more", "state"}``, so a page
        that reconnects reloads what it missed with its session token."""
        limit = frame.get("limit", 50)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 200:
            await self.error("bad_frame", "limit must be an integer between 1 and 200")
            return
        try:
            page, has_more = await unit_of_work(list_messages)(
                self.tenant, self.session, before=frame.get("before"), limit=limit
            )
        except (ApiError, ValueError, ValidationError):
            await self.error("bad_frame", "before must be the id of a message of this session")
            return
        # "state": who answers now (chat.handoff.frames), so a page that (re)connects shows it
        await self.send_json(
            {"type": "history", "messages": [serialize_message(m) for m in page], "has_more": has_more,
             "state": self.handoff_state}
        )  # fmt: skip

    async def chat_frame(self, event: dict[str, Any]) -> None:
        """A frame of a turn started by another tab of this session."""
        if event.get("origin") != self.channel_name:
            self.saw_frame(event["frame"])
            await self.send_json(event["frame"])

    async def broadcast(self, frame: dict[str, Any], *, last: bool = False) -> None:
        """Send to this socket directly (so ack, deltas, done and errors keep
        their order) and to the session's other tabs through the group, where
        deltas travel in batches (``RELAY_DELTAS_EVERY_S``), always before
        the next frame of another type. ``last``: the turn's final frame; the
        next message is accepted from the moment it is written to this
        socket."""
        async with self.relay:
            if last:
                self.replying = False
            await self.send_json(frame)
            if not self.other_tabs:
                return
            if frame["type"] == "delta":
                self.pending.append(frame)
                if self.relay_timer is None or self.relay_timer.done():
                    self.relay_timer = asyncio.create_task(self._relay_soon())
                return
            await self._relay_pending()
            await self._relay(frame)

    async def _relay(self, frame: dict[str, Any]) -> None:
        await self.channel_layer.group_send(
            self.group, {"type": "chat.frame", "frame": frame, "origin": self.channel_name}
        )

    async def _relay_pending(self) -> None:
        """Relay the waiting deltas, one frame per reply. Call with ``relay`` held."""
        pending, self.pending = self.pending, []
        by_reply: dict[str, list[str]] = {}
        for frame in pending:
            by_reply.setdefault(frame["reply_id"], []).append(frame["text"])
        for reply_id, pieces in by_reply.items():
            await self._relay({"type": "delta", "reply_id": reply_id, "text": "".join(pieces)})

    async def _relay_soon(self) -> None:
        await asyncio.sleep(RELAY_DELTAS_EVERY_S)
        async with self.relay:
            await self._relay_pending()

    async def final_error(self, code: str, message: str, **extra: Any) -> None:
        """An error that ends the turn (this socket only, as before)."""
        self.replying = False
        await self.error(code, message, **extra)

    async def _run(self, text: str, client_msg_id: str | None) -> None:
        # A tab alone in its session (the usual case) relays nothing: one
        # look at the group per turn instead of a group message per frame.
        # A tab that connects during the turn sees it in its history. The
        # look runs while the message is stored; the turn's first frame waits
        # for it.
        members = asyncio.ensure_future(group_size(self.channel_layer, self.group))

        async def on_ack(message_id: str) -> None:
            count = await members
            async with self.relay:
                self.other_tabs = count is None or count > 1
            await self.broadcast({"type": "ack", "client_msg_id": client_msg_id, "message_id": message_id})

        async def on_delta(reply_id: str, piece: str) -> None:
            await self.broadcast({"type": "delta", "reply_id": reply_id, "text": piece})

        async def on_done(result: TurnResult) -> None:
            done = {
                "type": "done",
                "reply_id": result.reply_id,
                "text": result.reply,
                "recalled": result.recalled,
                "needs_confirmation": result.needs_confirmation,
                "usage": result.usage,
                "citations": result.citations,
                **({"offer_handoff": True} if result.offer_handoff else {}),
            }
            # From here on the turn only does upkeep (the tenant's health check): a disconnect lets it end.
            self.finishing.add(asyncio.current_task())
            await self.broadcast(done, last=True)

        try:
            try:
                result = await run_turn(
                    self.tenant, self.session, text, client_msg_id, on_ack=on_ack, on_delta=on_delta, on_done=on_done
                )
            except RateLimited as exc:
                await self.final_error("rate_limited", exc.message, retryable=True)
                await self.close(code=4429)
                return
            except TurnFailed as exc:
                await self.final_error(
                    exc.code, exc.message, retryable=exc.retryable, message_id=exc.message_id or None
                )
                return
            except TurnInProgress as exc:  # another connection's turn is answering this client_msg_id
                await self.final_error(
                    exc.code, exc.message, retryable=True, message_id=exc.message_id, retry_after=exc.retry_after
                )
                return
            except ContextOverflow as exc:
                await self.final_error(exc.code, exc.message)
                return
            except InvalidMessage as exc:
                await self.final_error("bad_frame", exc.message)
                return
            except Exception:
                logger.exception("turn failed in session %s", self.session.pk)
                await self.final_error(
                    "internal_error", "Something went wrong on our side; please retry.", retryable=True
                )
                return
            if result.deferred:  # a person has the conversation: stored and shown to staff, not answered here
                frame = state_frame(result.state, result.position, leave_message=result.leave_message)
                self.saw_frame(frame)
                await self.broadcast(frame, last=True)
        finally:
            self.finishing.discard(asyncio.current_task())
            if not members.done():  # the turn ended before its ack (refused, or the socket went away)
                members.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # only the ack uses the count
                await members
            # Cancelled (the socket went away) or a frame failed to send; a
            # turn already replaced by the next one leaves the flag to it.
            if self.turn is asyncio.current_task():
                self.replying = False
