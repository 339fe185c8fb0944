"""Request throttles per API key (DRF), for the endpoints a leaked or runaway
key could hammer: session creation, the memory endpoints and recall.

Each throttle counts one scope's requests per API key in Django's default
cache: Redis when ``REDIS_URL`` is set, so every worker process shares one
count, and the process's own memory otherwise (then each worker process
counts on its own). Rates are ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``
(``THROTTLE_*`` in the environment). Past the rate DRF raises ``Throttled``,
which ``config.errors.api_exception_handler`` answers with 429
``rate_limited``.

Chat messages are limited separately (per session and per tenant, counted
from the stored messages: ``chat/sessions/messages.py``).
"""

from __future__ import annotations

import logging
from typing import Any

from redis.exceptions import RedisError
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

logger = logging.getLogger(__name__)


class ApiKeyRateThrottle(SimpleRateThrottle):
    """Counts the requests of one API key in ``scope``; subclasses set
    ``scope`` (a key of ``DEFAULT_THROTTLE_RATES``) and may set ``methods``
    (only those count; None: every method). A request without an API key is
    not counted: the permission check refused it before throttling."""

    methods: frozenset[str] | None = None

    def get_rate(self) -> str | None:
        # Read when the request comes, not from DRF's THROTTLE_RATES class attribute: that one is frozen at
        # import, and a changed setting (override_settings in tests) would never be seen.
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        key = getattr(request._request, "api_key", None)
        if key is None:
            return None
        return f"throttle:{self.scope}:{key.tenant_id}:{key.pk}"

    def allow_request(self, request: Any, view: Any) -> bool:
        if self.methods is not None and request.method not in self.methods:
            return True
        try:
            return super().allow_request(request, view)
        except RedisError:
            # A throttle guards against abuse; it must not turn a Redis outage into errors on every request.
            logger.warning("throttle %s: the cache is unreachable; request let through", self.scope, exc_info=True)
            return True


class SessionCreateThrottle(ApiKeyRateThrottle):
    """``POST /api/v1/sessions``."""

    scope = "sessions"
    methods = frozenset({"POST"})


class MemoryThrottle(ApiKeyRateThrottle):
    """``/api/v1/memories`` and ``/api/v1/memories/<id>[/…]``, every method."""

    scope = "memories"


class ImportThrottle(ApiKeyRateThrottle):
    """``POST /api/v1/end-users/<id>/conversations``: a tenant's import of past conversations has its own budget,
    so a migration script neither runs into live chat's limits nor uses them up."""

    scope = "imports"
    methods = frozenset({"POST"})


class RecallThrottle(ApiKeyRateThrottle):
    """``POST /api/v1/memories/recall`` (an embedding and a vector search each)."""

    scope = "recall"


class KnowledgeThrottle(ApiKeyRateThrottle):
    """``/api/v1/knowledge/…``, every method: articles, their versions, search (an embedding each) and imports."""

    scope = "knowledge"
