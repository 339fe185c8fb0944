"""The background writer of conversation memory: turns announced with NOTIFY, written in batches.

A chat turn (and a staff member's message) announces its messages on :data:`CHANNEL` in the transaction that
stores them (:func:`announce`: one ``pg_notify``, delivered when that transaction commits, never before and
never for a transaction that rolled back). ``manage.py run_worker`` LISTENs (:func:`listen`): it gathers the
turns announced within ``wait_s`` of the first one (at most ``max_turns``), and writes them
(:func:`write_announced`): per tenant, one read of the messages with the text before them, then the units of
each session in a transaction of their own (``memory.conversation.units.index_turns``).

Why not a job per turn: a procrastinate job is a row inserted by the web process after every reply, its
events and status updates, a fetch and a delete by the worker — more database work than the turn's own
units; a notification is a few bytes in PostgreSQL's queue. What a job gave, the messages' own mark gives:
a message is indexed exactly when its ``memory_indexed_at`` is set, in the transaction that writes its
units. A notification nobody heard (no worker running, its connection lost, the worker killed with a batch
in hand) leaves the messages unmarked, and the worker's sweep (``memory.conversation.units.index_pending``, at
start and every minute) writes them: nothing is lost, it is only later.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection, connections

from memory.conversation.units import SETTLE, index_pending, index_turns
from tenants.models import Tenant

logger = logging.getLogger(__name__)

#: The channel turns announce their messages on.
CHANNEL = "memdesk_memory"
#: How long the writer waits after a first announcement for more to write in the same batch (seconds), and
#: how many turns a batch holds at most.
DEFAULT_WAIT_S = 0.5
DEFAULT_MAX_TURNS = 200
#: Seconds between attempts to LISTEN again after the writer's connection was lost.
RECONNECT_S = 2.0


@dataclass(frozen=True)
class Announced:
    """One announcement: the messages of a session of a tenant to write."""

    tenant_id: str
    session_id: str
    message_ids: tuple[str, ...]

    @property
    def payload(self) -> str:
        return " ".join((self.tenant_id, self.session_id, *self.message_ids))


def announce(tenant: Tenant, session_id: Any, message_ids: Sequence[Any]) -> None:
    """Announce ``message_ids`` of the session to the writer, in the caller's transaction (delivered when it
    commits; in autocommit, at once). Call where the messages are stored."""
    payload = Announced(str(tenant.pk), str(session_id), tuple(str(m) for m in message_ids)).payload
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, payload])


def parse(payload: str) -> Announced | None:
    """The announcement in ``payload``, or None (logged) when it is not one: the channel is a name anyone
    with a connection may notify on, so what arrives is checked before it reaches a query."""
    parts = payload.split()
    try:
        ids = [str(uuid.UUID(p)) for p in parts]
    except ValueError:
        ids = []
    if len(ids) < 3:
        logger.warning("ignored a notification on %s that names no messages: %.200r", CHANNEL, payload)
        return None
    tenant_id, session_id, *messages = ids
    return Announced(tenant_id, session_id, tuple(messages))


def write_announced(batch: Sequence[Announced]) -> int:
    """Write the conversation units of the announced messages: per tenant one read of the messages, per
    session one transaction (``index_turns``). A tenant deleted since is skipped; one tenant's failure is
    logged and leaves its messages to the sweep. Returns how many messages were indexed."""
    by_tenant: dict[str, dict[str, list[str]]] = {}
    for item in batch:
        sessions = by_tenant.setdefault(item.tenant_id, {})
        sessions.setdefault(item.session_id, []).extend(item.message_ids)
    tenants = {str(t.pk): t for t in Tenant.objects.filter(pk__in=list(by_tenant))}
    done = 0
    for tenant_id, sessions in by_tenant.items():
        tenant = tenants.get(tenant_id)
        if tenant is None:
            continue
        try:
            done += index_turns(tenant, list(sessions.items()))
        except Exception:  # the sweep writes what is left
            logger.exception("writing the conversation memory of tenant %s failed; the sweep retries", tenant_id)
    return done


async def listen(
    connect: Callable[[], Any],
    *,
    wait_s: float = DEFAULT_WAIT_S,
    max_turns: int = DEFAULT_MAX_TURNS,
    sweep: Callable[[], Any] | None = None,
) -> None:
    """LISTEN on :data:`CHANNEL` and write what turns announce, in batches, until cancelled. ``connect``
    opens a psycopg ``AsyncConnection`` in autocommit (an awaitable). The writes run on a thread of their own,
    which keeps its database connection from one batch to the next. ``sweep`` (run on that thread each time
    the LISTEN is in place, before the first batch) writes what was announced while nobody listened: at start,
    and after a lost connection, opened again after ``RECONNECT_S``."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-writer")
    loop = asyncio.get_running_loop()
    try:
        while True:
            try:
                async with await connect() as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    if sweep is not None:
                        await loop.run_in_executor(executor, sweep)
                    while True:
                        batch = await _gather(conn, wait_s=wait_s, max_turns=max_turns)
                        if batch:
                            started = time.perf_counter()
                            written = await loop.run_in_executor(executor, _write_in_thread, batch)
                            logger.debug(
                                "wrote %d message(s) of %d turn(s) in %.1f ms",
                                written, len(batch), (time.perf_counter() - started) * 1000,
                            )  # fmt: skip
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("the memory writer lost its connection; listening again in %g s", RECONNECT_S)
                await asyncio.sleep(RECONNECT_S)
    finally:
        executor.submit(connections.close_all)
        executor.shutdown(wait=False)


async def _gather(conn: Any, *, wait_s: float, max_turns: int) -> list[Announced]:
    """The next batch: the first announcement (waited for), then those arriving within ``wait_s`` of it."""
    batch: list[Announced] = []
    async for note in conn.notifies(stop_after=1):
        if (item := parse(note.payload)) is not None:
            batch.append(item)
    if max_turns > 1:
        async for note in conn.notifies(timeout=wait_s, stop_after=max_turns - 1):
            if (item := parse(note.payload)) is not None:
                batch.append(item)
    return batch


def _write_in_thread(batch: list[Announced]) -> int:
    try:
        return write_announced(batch)
    except Exception:
        # e.g. the database went away between batches: a fresh connection for the next one
        logger.exception("writing %d announced turn(s) failed; the sweep writes them", len(batch))
        connections.close_all()
        return 0


def index_all_pending(
    *, tenant_slug: str | None = None, settle: timedelta = SETTLE, limit: int = 500, one_pass: bool = False
) -> dict[str, int]:
    """Run :func:`memory.conversation.units.index_pending` for every tenant (or one), until each has nothing left
    older than ``settle`` (``one_pass``: at most ``limit`` messages a tenant, the rest left for the next
    run); returns the messages indexed per tenant slug. The background worker runs it at start and every
    minute."""
    tenants = Tenant.objects.order_by("slug")
    if tenant_slug:
        tenants = tenants.filter(slug=tenant_slug)
    counts: dict[str, int] = {}
    for tenant in tenants:
        total = 0
        while True:
            done = index_pending(tenant, settle=settle, limit=limit)
            total += done
            if done < limit or one_pass:
                break
        counts[tenant.slug] = total
    return counts
