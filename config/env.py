"""Strict parsers for settings read from the environment.

Every parser raises ``ImproperlyConfigured`` with the variable's name and the
offending value, so a bad deployment fails at start with a clear message
instead of misbehaving later.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def envbool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be one of 1/0/true/false/yes/no/on/off, got {raw!r}")


def envint(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be <= {maximum}, got {value}")
    return value


def envfloat(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    return value


def envstr(name: str, default: str) -> str:
    raw = os.environ.get(name)
    return default if raw is None or raw.strip() == "" else raw.strip()


def envlist(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def envurl(name: str, default: str | None, *, schemes: tuple[str, ...]) -> str | None:
    """A URL whose scheme is one of ``schemes``; unset or empty gives ``default``."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip()
    parsed = urlparse(value)
    if parsed.scheme not in schemes or not (parsed.netloc or parsed.path):
        raise ImproperlyConfigured(f"{name} must be a URL with scheme {' or '.join(schemes)}, got {value!r}")
    return value


_RATE_UNITS = {"s", "sec", "second", "m", "min", "minute", "h", "hour", "d", "day"}


def envrate(name: str, default: str | None) -> str | None:
    """A DRF throttle rate, ``<count>/<unit>`` (unit s, min, hour or day, e.g.
    ``600/min``); ``off`` (or ``none``) gives None: no throttling."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in {"off", "none"}:
        return None
    count, _, unit = value.partition("/")
    if not (count.isascii() and count.isdigit() and int(count) > 0 and unit in _RATE_UNITS):
        raise ImproperlyConfigured(f"{name} must be '<count>/<s|min|hour|day>' (e.g. 600/min) or 'off', got {raw!r}")
    return f"{int(count)}/{unit}"
