"""Redis connections for the channel layer that never swallow a cancellation.

redis-py bounds each write by ``socket_timeout`` with ``asyncio.wait_for``. On
Python 3.11, ``wait_for`` returns the inner result instead of raising when the
task is cancelled in the same loop iteration as the write completes
(CPython gh-86296, fixed in 3.12). channels_redis cancels a consumer's blocking
receive when its WebSocket closes; a cancellation that lands on the write of a
``BZPOPMIN`` was swallowed, the receive looped on, and the consumer waited for
it forever: a task and its state leaked per unlucky disconnect, and a worker
with one never finished a graceful shutdown (``bench/load/chat_load.py`` saw
``memdesk did not stop within 30 s`` after most runs).

The classes here bound the write with ``asyncio.timeout`` instead, which passes
a cancellation on; there is one per URL scheme, so ``rediss://`` keeps TLS and
``unix://`` its socket (:func:`channel_layer_host` picks it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio.connection import Connection, SSLConnection, UnixDomainSocketConnection, parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["CancelSafeConnection", "CancelSafeSSLConnection", "CancelSafeUnixConnection", "channel_layer_host"]


class _CancelSafeWrites:
    """``send_packed_command`` as redis-py's, with ``asyncio.timeout`` for ``wait_for``."""

    socket_timeout: float | None

    async def send_packed_command(self, command: str | bytes | Iterable[bytes], check_health: bool = True) -> None:
        if not self.socket_timeout:
            await super().send_packed_command(command, check_health)  # type: ignore[misc]  # no timer, no wait_for
            return
        if not self.is_connected:  # type: ignore[attr-defined]
            await self.connect_check_health(check_health=False)  # type: ignore[attr-defined]
        if check_health:
            await self.check_health()  # type: ignore[attr-defined]
        if isinstance(command, str):
            command = command.encode()
        if isinstance(command, bytes):
            command = [command]
        try:
            async with asyncio.timeout(self.socket_timeout):
                await self._send_packed_command(command)  # type: ignore[attr-defined]
        except TimeoutError:
            await self.disconnect(nowait=True)  # type: ignore[attr-defined]
            raise RedisTimeoutError("Timeout writing to socket") from None
        except OSError as exc:
            await self.disconnect(nowait=True)  # type: ignore[attr-defined]
            raise RedisConnectionError(f"Error while writing to socket: {exc}") from exc
        except BaseException:
            # A write cut short leaves the connection in an unknown state (as redis-py does).
            await self.disconnect(nowait=True)  # type: ignore[attr-defined]
            raise


class CancelSafeConnection(_CancelSafeWrites, Connection):
    """``redis://``"""


class CancelSafeSSLConnection(_CancelSafeWrites, SSLConnection):
    """``rediss://``"""


class CancelSafeUnixConnection(_CancelSafeWrites, UnixDomainSocketConnection):
    """``unix://``"""


_BY_SCHEME: dict[str, Any] = {
    "redis": CancelSafeConnection,
    "rediss": CancelSafeSSLConnection,
    "unix": CancelSafeUnixConnection,
}


def channel_layer_host(url: str, *, socket_timeout: float) -> dict[str, Any]:
    """A channels_redis ``hosts`` entry for ``url``: the URL's own settings
    (host, port or socket path, database, password, TLS) with the cancel-safe
    connection class for its scheme. The URL is parsed here rather than given as
    ``address``: redis-py lets the URL's scheme replace a ``connection_class``
    passed beside it. ``ValueError`` for a scheme other than redis, rediss, unix."""
    scheme = urlsplit(url).scheme
    if scheme not in _BY_SCHEME:
        raise ValueError(f"Redis URL must start with redis://, rediss:// or unix://, not {scheme or url!r}")
    return {**parse_url(url), "socket_timeout": socket_timeout, "connection_class": _BY_SCHEME[scheme]}
