"""ORM work from async code (STYLE habit 12).

``unit_of_work(fn)`` is ``database_sync_to_async`` with ``thread_sensitive=False``:
each call runs in the event loop's thread pool with its own connection
(closed after the call, as ``close_old_connections`` does), so the database
steps of many concurrent chat turns run side by side instead of queueing on
Channels' single shared sync thread — measured in ``bench/chat_load.py``.
Every unit opens its own transaction and RLS scope from its explicit
``tenant`` argument, so nothing depends on which thread runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from channels.db import database_sync_to_async


def unit_of_work(fn: Callable[..., Any]) -> Callable[..., Any]:
    return database_sync_to_async(fn, thread_sensitive=False)
