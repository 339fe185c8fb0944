"""Credentials never reach the server's log.

The chat WebSocket carries its session token in the query string (API.md:
``/ws/chat/?session_id=…&token=…``), and uvicorn logs every WebSocket it
accepts, and every request of its access log, with the full path and query.
The development server logs the same request lines: ``runserver`` (daphne's,
as daphne is installed) on ``django.channels.server``, Django's own on
``django.server``. A token in a log is a credential handed to whoever reads
logs: it opens the end user's chat and history until it expires.
:class:`RedactQueryCredentials` replaces such values with ``[redacted]`` in
these servers' records; :func:`install` puts it on their loggers
(``config/asgi.py`` calls it, and every server imports that module to find the
application).
"""

from __future__ import annotations

import logging
import re

__all__ = ["REDACTED", "RedactQueryCredentials", "install"]

REDACTED = "[redacted]"
#: Query parameters whose values are credentials (``code``: single sign-on's authorization code, on its callback).
_CREDENTIAL_RE = re.compile(r"(?<=[?&;])((?:token|api_key|key|access_token|password|code)=)[^&;\s\"']*", re.IGNORECASE)
#: Paths whose segment is a credential: a staff invitation's token (``/staff/invitations/<token>/``), which lets
#: whoever holds it join a tenant's staff.
_PATH_CREDENTIAL_RE = re.compile(r"(/staff/invitations/)[^/?#\s\"']+")
#: uvicorn's loggers that print request paths with their query strings.
UVICORN_LOGGERS = ("uvicorn.error", "uvicorn.access")
#: runserver's: daphne's (``manage.py runserver`` while daphne is installed) and Django's own.
RUNSERVER_LOGGERS = ("django.channels.server", "django.server")
#: Django's own, which names the path of every 4xx and 5xx answer (an invitation refused to the wrong account).
DJANGO_LOGGERS = ("django.request",)


def redact_query(text: str) -> str:
    """``text`` with the values of credential query parameters, and credential path segments, replaced."""
    text = _CREDENTIAL_RE.sub(lambda m: m.group(1) + REDACTED, text)
    return _PATH_CREDENTIAL_RE.sub(lambda m: m.group(1) + REDACTED, text)


class RedactQueryCredentials(logging.Filter):
    """Rewrites a record's message arguments (and its message) so query-string credentials are not logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_query(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: redact_query(v) if isinstance(v, str) else v for k, v in record.args.items()}
        if isinstance(record.msg, str):
            record.msg = redact_query(record.msg)
        return True


def install() -> None:
    """Adds the filter to uvicorn's, runserver's and Django's request loggers, once per process."""
    for name in UVICORN_LOGGERS + RUNSERVER_LOGGERS + DJANGO_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactQueryCredentials) for f in logger.filters):
            logger.addFilter(RedactQueryCredentials())
