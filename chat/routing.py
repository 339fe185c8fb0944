"""WebSocket routes (the chat consumer is added by the chat runtime)."""

from __future__ import annotations

websocket_urlpatterns: list = []
