"""ASGI entry point: HTTP through Django, WebSocket through Channels."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from chat.routing import websocket_urlpatterns  # noqa: E402
from chat.turn import start_warmup  # noqa: E402
from config import logs  # noqa: E402
from config.body_limit import BodyLimitMiddleware  # noqa: E402

# Session tokens travel in the WebSocket's query string; uvicorn logs that string.
logs.install()

# Models and dictionaries load on a background thread now, not on the worker's first chat turn.
start_warmup()

application = ProtocolTypeRouter(
    {
        # Django reads a whole body before its middleware runs: the byte limit has to come first.
        "http": BodyLimitMiddleware(django_asgi_app),
        "websocket": URLRouter(websocket_urlpatterns),
    }
)
