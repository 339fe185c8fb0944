"""What the handoff tests share: sending over REST, the two sockets (the end user's chat, a staff console),
the tenant's handoff settings."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings

from config.asgi import application
from conversations.models import ChatSession, Message
from tenants.rls import tenant_scope
from tests.factories import staff_login

HOST = [(b"host", b"testserver")]


def send(ctx: Any, sid: str, text: str, client_msg_id: str | None = None) -> Any:
    body = {"text": text, **({"client_msg_id": client_msg_id} if client_msg_id else {})}
    return ctx.client.post(f"/api/v1/sessions/{sid}/messages", body, format="json")


def stored(ctx: Any, sid: str) -> list[Message]:
    with tenant_scope(ctx.tenant):
        return list(Message.objects.for_tenant(ctx.tenant).filter(session_id=sid).order_by("seq"))


def session_row(ctx: Any, sid: str) -> ChatSession:
    with tenant_scope(ctx.tenant):
        return ChatSession.objects.for_tenant(ctx.tenant).get(pk=sid)


def configure(ctx: Any, **handoff: Any) -> None:
    """Set the tenant's ``settings["handoff"]`` keys (and ``business_hours=`` as its own setting)."""
    hours = handoff.pop("business_hours", None)
    tenant = ctx.tenant
    tenant.settings = {**tenant.settings, "handoff": {**tenant.settings.get("handoff", {}), **handoff}}
    if hours is not None:
        tenant.settings["business_hours"] = hours
    tenant.save(update_fields=["settings"])


async def chat_socket(opened: dict[str, Any]) -> WebsocketCommunicator:
    path = f"/ws/chat/?session_id={opened['session_id']}&token={opened['token']}"
    communicator = WebsocketCommunicator(application, path, headers=HOST)
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    return communicator


def _cookie(user: Any) -> bytes:
    client = staff_login(user)
    name = settings.SESSION_COOKIE_NAME
    return f"{name}={client.cookies[name].value}".encode()


async def staff_socket(user: Any, *, query: str = "", origin: bytes = b"http://testserver") -> WebsocketCommunicator:
    """A staff console's socket, logged in as ``user``, its first frame (``queue``) not yet read."""
    cookie = await sync_to_async(_cookie)(user)
    headers = [*HOST, (b"cookie", cookie), (b"origin", origin)]
    communicator = WebsocketCommunicator(application, f"/ws/staff/{query}", headers=headers)
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    return communicator


async def until(communicator: WebsocketCommunicator, kind: str) -> tuple[dict, list[dict]]:
    """Frames until the first of type ``kind`` (each within 20 s): that frame and every frame before it."""
    seen = []
    while True:
        frame = await communicator.receive_json_from(timeout=20)
        if frame["type"] == kind:
            return frame, seen
        seen.append(frame)
