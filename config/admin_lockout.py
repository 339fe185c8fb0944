"""The answer to a locked-out admin login (django-axes' ``AXES_LOCKOUT_CALLABLE``).

django-axes refuses with 429 and no ``Retry-After``; every 429 of memdesk says when to come back
(API.md): here the whole cool-off, as an attempt during a lockout starts it again.
"""

from __future__ import annotations

from typing import Any

from axes.helpers import get_cool_off, get_lockout_message
from django.http import HttpRequest, HttpResponse

from config.errors import retry_after_headers


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials: dict[str, Any] | None = None
) -> HttpResponse:
    cool_off = get_cool_off(request)
    seconds = cool_off.total_seconds() if cool_off else None
    return HttpResponse(
        get_lockout_message(),
        status=429,
        content_type="text/plain; charset=utf-8",
        headers=retry_after_headers(429, seconds),
    )
