"""``manage.py run_worker``: the background worker (batch operations, memory health).

It is procrastinate's worker on the ``batches`` queue and memory's ``memory``
queue (the periodic memory-health job, ``memory.tasks``: its periodic deferrer
queues it every minute), plus the recovery
procrastinate leaves to its users: a job whose worker died (killed, OOM,
machine lost) stays ``doing`` forever. Every worker sends a heartbeat; this
command puts back in the queue the jobs of workers silent for longer than
``--stalled-after`` seconds, at start and then every ``--heartbeat`` seconds.
A batch job resumes after its last finished item (``chat.tools.batches``).

It writes the conversation memory of chat turns: each turn announces its
messages (``memory.conversation.writer``: LISTEN/NOTIFY, no job row), and the worker
writes the turns announced within ``--memory-wait-ms`` of each other in one
batch. What nobody heard (no worker was running, its connection was lost)
is written by the sweep (``manage.py index_messages``): once the worker
listens, every unwritten message; then every ``--index-every`` seconds,
those older than a minute. With ``MEMDESK_MEMORY_WRITER=off`` it does neither
(conversation memory is off; ``inline``: the web processes write it, the
worker sweeps what they left).

It loads the embedding models and rjieba's dictionary before it takes a job
(``chat.turn.warmup``; ``MEMDESK_WARMUP=0`` leaves them to the first job).

SIGTERM / SIGINT stop the worker gracefully: the item in flight finishes, the
batch job goes back to the queue and the next worker resumes it.

The worker runs at a lower CPU priority than the web processes (``--nice``,
default ``MEMDESK_WORKER_NICE``, 10): its jobs — conversation memory above all,
embedded unit by unit after every turn — wait a moment without anyone noticing,
a reply does not. On a host where the worker shares the CPU with the web
processes the replies get it first; alone on its CPU the worker loses nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from chat.imports.service import IMPORT_QUEUE
from chat.tasks import RUNNING_JOBS
from chat.tools.batches import BATCH_QUEUE, RUN_BATCH
from chat.turn import warmup
from memory.conversation import DEFAULT_WAIT_S, SETTLE, index_all_pending, listen
from memory.tasks import HEALTH_QUEUE

logger = logging.getLogger("chat.worker")

#: How long the worker's start waits for the memory writer to listen before it takes jobs anyway (seconds).
LISTEN_WAIT_S = 30.0


async def recover_stalled_jobs(app: Any, *, stalled_after: float) -> int:
    """Queue again the batch jobs of workers silent for ``stalled_after``
    seconds, never one this process is running (its heartbeat may only be
    late); returns how many."""
    stalled = await app.job_manager.get_stalled_jobs(task_name=RUN_BATCH, seconds_since_heartbeat=stalled_after)
    jobs = [job for job in stalled if job.id not in RUNNING_JOBS]
    for job in jobs:
        await app.job_manager.retry_job(job)
        logger.warning("job %s (%s) of a dead worker is queued again", job.id, job.call_string)
    return len(jobs)


def sweep_unwritten_memory(settle: timedelta = SETTLE, *, one_pass: bool = False) -> int:
    """Write the conversation memory of messages older than ``settle`` that nobody wrote (``manage.py
    index_messages``; ``one_pass``: at most 500 a tenant, the rest left to the minute's sweep); returns how
    many."""
    count = sum(index_all_pending(settle=settle, one_pass=one_pass).values())
    if count:
        logger.info("indexed %d chat message(s) into conversation memory", count)
    return count


async def index_unwritten_memory(settle: timedelta = SETTLE) -> int:
    """:func:`sweep_unwritten_memory` on a thread of its own, leaving no connection behind."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    def sweep() -> int:
        try:
            return sweep_unwritten_memory(settle)
        finally:
            connections.close_all()

    return await sync_to_async(sweep, thread_sensitive=False)()


class Command(BaseCommand):
    help = "Run the background worker for batch operations (procrastinate), recovering jobs of dead workers."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--once", action="store_true", help="Run the jobs waiting now (after recovering stalled ones), then exit."
        )
        parser.add_argument("--concurrency", type=int, default=4, help="Batches run at the same time (default 4).")
        parser.add_argument("--heartbeat", type=float, default=10.0, help="Seconds between heartbeats (default 10).")
        parser.add_argument(
            "--stalled-after",
            type=float,
            default=30.0,
            help="A worker silent this many seconds is dead and its jobs run again (default 30).",
        )
        parser.add_argument(
            "--index-every",
            type=float,
            default=60.0,
            help="Seconds between sweeps for chat messages whose conversation memory is unwritten (default 60).",
        )
        parser.add_argument(
            "--memory-wait-ms",
            type=float,
            default=DEFAULT_WAIT_S * 1000,
            help="After a turn announces its messages, how long to wait for more turns to write in the same batch "
            f"(default {DEFAULT_WAIT_S * 1000:g}).",
        )
        parser.add_argument(
            "--nice",
            type=int,
            default=None,
            help="Lower the worker's CPU priority by this much, 0 to 19 (default settings.WORKER_NICE: "
            "MEMDESK_WORKER_NICE, else 10).",
        )
        parser.add_argument(
            "--poll",
            type=float,
            default=5.0,
            help="Seconds between polls for new jobs; LISTEN/NOTIFY wakes the worker sooner (default 5).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from procrastinate.contrib.django import app

        if options["stalled_after"] <= options["heartbeat"]:
            self.stderr.write("--stalled-after must be longer than --heartbeat")
            raise SystemExit(2)
        if not 0 <= options["memory_wait_ms"] <= 60_000:
            self.stderr.write("--memory-wait-ms must be between 0 and 60000")
            raise SystemExit(2)
        nice = settings.WORKER_NICE if options["nice"] is None else options["nice"]
        if not 0 <= nice <= 19:
            self.stderr.write("--nice must be between 0 and 19")
            raise SystemExit(2)
        self.niceness = os.nice(nice)  # the resulting niceness (os.nice(0) only reads it)
        # The models and dictionaries every conversation-memory job uses, loaded before the first job: loaded
        # by that job instead, they would hold up every turn's memory queued behind it.
        if warmup.enabled():
            seconds = warmup.warm_up_and_freeze()
            if seconds is not None:
                self.stdout.write(f"run_worker: models loaded in {seconds:.1f} s", ending="\n")
        # The Django connector cannot LISTEN or run a worker: use a psycopg
        # pool on the same database (procrastinate's own recipe).
        with app.replace_connector(app.connector.get_worker_connector()):
            asyncio.run(self._run(app, options))

    async def _run(self, app: Any, options: Any) -> None:
        async with app.open_async():
            recovered = await recover_stalled_jobs(app, stalled_after=options["stalled_after"])
            listening = asyncio.get_running_loop().create_future()
            memory_writer = None
            if settings.MEMORY_WRITER == "off":
                indexed = 0
            elif options["once"]:
                # Nobody listens for announcements: every message not yet written is, now.
                indexed = await index_unwritten_memory(settle=timedelta(0))
            else:
                memory_writer = asyncio.create_task(self._write_memory(listening, options))
                try:  # written by the sweep once the writer listens; it keeps trying to, the jobs need not wait
                    indexed = await asyncio.wait_for(asyncio.shield(listening), LISTEN_WAIT_S)
                except TimeoutError:
                    indexed = 0
            self.stdout.write(
                f"run_worker: queues {BATCH_QUEUE}, {HEALTH_QUEUE}, {IMPORT_QUEUE}, "
                f"{recovered} stalled job(s) recovered, "
                f"{indexed} message(s) indexed into memory, CPU niceness {self.niceness}",
                ending="\n",
            )
            self.stdout.flush()
            worker = app.run_worker_async(
                queues=[BATCH_QUEUE, HEALTH_QUEUE, IMPORT_QUEUE],
                wait=not options["once"],
                concurrency=options["concurrency"],
                update_heartbeat_interval=options["heartbeat"],
                stalled_worker_timeout=options["stalled_after"],
                fetch_job_polling_interval=options["poll"],
                # On SIGTERM stop between items (the job is retried, not lost);
                # with --once the worker stops when the queue is empty and must
                # let the running batches finish.
                shutdown_graceful_timeout=None if options["once"] else 0,
                # The Batch row and its memory keep the outcome; finished job rows are noise.
                delete_jobs="successful",
            )
            if options["once"]:
                await worker
                return
            watcher = asyncio.create_task(self._watch(app, options))
            try:
                await worker
            finally:
                watcher.cancel()
                if memory_writer is not None:
                    memory_writer.cancel()

    async def _write_memory(self, listening: asyncio.Future[int], options: Any) -> None:
        """The conversation-memory writer (``memory.conversation.writer.listen``) on a psycopg connection of its own;
        each
        time it listens, the sweep writes every message not yet written (the first count goes to
        ``listening``)."""
        import psycopg
        from procrastinate.contrib.django.utils import connector_params

        params = connector_params()

        def sweep() -> None:
            # One pass: a history left unwritten (an upgrade's) is the minute's sweep's, not the writer's,
            # which must get to the turns announced meanwhile.
            count = sweep_unwritten_memory(timedelta(0), one_pass=True)
            if not listening.done():
                listening.get_loop().call_soon_threadsafe(lambda: listening.done() or listening.set_result(count))

        await listen(
            lambda: psycopg.AsyncConnection.connect(**params, autocommit=True),
            wait_s=options["memory_wait_ms"] / 1000,
            sweep=sweep,
        )

    async def _watch(self, app: Any, options: Any) -> None:
        loop = asyncio.get_running_loop()
        next_index = loop.time() + options["index_every"]
        while True:
            await asyncio.sleep(options["heartbeat"])
            try:
                await recover_stalled_jobs(app, stalled_after=options["stalled_after"])
            except Exception:  # the worker's own loop reports database trouble
                logger.exception("recovering stalled jobs failed; trying again later")
            if loop.time() >= next_index and settings.MEMORY_WRITER != "off":
                next_index = loop.time() + options["index_every"]
                try:
                    await index_unwritten_memory()
                except Exception:
                    logger.exception("indexing unwritten conversation memory failed; trying again later")
