"""WebSocket routes."""

from __future__ import annotations

from django.urls import path

from chat.consumers import ChatConsumer
from chat.ws_auth import TokenAuthMiddleware

websocket_urlpatterns = [
    path("ws/chat/", TokenAuthMiddleware(ChatConsumer.as_asgi())),
]
