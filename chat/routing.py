"""WebSocket routes."""

from __future__ import annotations

from channels.auth import AuthMiddlewareStack
from django.urls import path

from chat.consumers import ChatConsumer
from chat.handoff.consumer import StaffConsumer
from chat.ws_auth import TokenAuthMiddleware

websocket_urlpatterns = [
    path("ws/chat/", TokenAuthMiddleware(ChatConsumer.as_asgi())),
    # The staff console (chat.handoff.consumer): Django's session cookie, as the admin pages.
    path("ws/staff/", AuthMiddlewareStack(StaffConsumer.as_asgi())),
]
