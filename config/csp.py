"""Content-Security-Policy: django-csp's middleware, plus this host's WebSocket origin in ``connect-src``.

The policy itself is ``CONTENT_SECURITY_POLICY`` in settings: scripts and styles only from memdesk's own
origin or carrying the response's nonce, so an injected ``<script>`` does not run. The chat page opens its
WebSocket back to the host that served it (``ws://`` or ``wss://``), which a fixed setting cannot name when
memdesk answers on several hosts; older browsers do not count ``ws:`` as ``'self'``, so the origin the
page will connect to is added per request, from the host Django already validated against ``ALLOWED_HOSTS``.
"""

from __future__ import annotations

from csp.middleware import CSPMiddleware as BaseCSPMiddleware
from csp.middleware import PolicyParts
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponseBase

__all__ = ["CSPMiddleware"]


def websocket_origin(request: HttpRequest) -> str | None:
    """``ws(s)://<host>`` of the request, or ``None`` when its host is not an allowed one."""
    try:
        host = request.get_host()
    except DisallowedHost:
        return None
    return f"{'wss' if request.is_secure() else 'ws'}://{host}"


class CSPMiddleware(BaseCSPMiddleware):
    def get_policy_parts(
        self, request: HttpRequest, response: HttpResponseBase, report_only: bool = False
    ) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only)
        origin = websocket_origin(request)
        if origin is not None:
            update = dict(parts.update or {})
            update["connect-src"] = [*update.get("connect-src", ()), origin]
            parts.update = update
        return parts
