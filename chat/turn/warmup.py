"""Load at start what the first chat turn of a worker would otherwise load.

A fresh worker loads, on its first turn, the embedding models (the ONNX
graph and multilingual USE) and the topic-switch examples they embed, rjieba's dictionary, the Qwen BPE and the
summariser's word lists: that customer would wait for all of it before the
reply. ``start()`` does it on a background thread as the
server imports the ASGI application, so the worker answers health checks
and requests meanwhile (a turn that arrives first simply loads what it
needs itself; every loader is thread-safe and loads once). Then it freezes
what is loaded out of the garbage collector's sight (``gc.freeze()``): a
full collection no longer stops the worker to walk objects that live as
long as it does.

The background worker (``manage.py run_worker``) calls
:func:`warm_up_and_freeze` before it takes its first job: it embeds every
turn's conversation memory, and without it the first turns after a start
wait for its model loads (seconds of CPU) with a backlog behind them.

``MEMDESK_WARMUP=0`` turns it off in both (tests; one-off management commands never
import the ASGI application anyway). Nothing here touches the database or
the network.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from datetime import UTC, datetime

from chat.prompt.summary import summarize
from chat.prompt.tokens import count_tokens
from config.env import envbool
from memory.embeddings import DEFAULT_MODEL, LANGUAGE_DEFAULTS, embed_one
from memory.extraction import extract_facts
from memory.topics import warm_up_domains

logger = logging.getLogger(__name__)

_started = threading.Event()

#: Text that exercises every lazy loader of a turn: Chinese and English, a name, an order number, a phone.
_SAMPLE = {
    "zh": "你好，我叫张伟，订单号 ABC123，手机 13912345678，帮我查一下物流。",
    "en": "Hi, I'm Anna; order ABC123.",
}


def warm_up() -> float:
    """Load the models and dictionaries a chat turn uses; returns the seconds it took."""
    started = time.perf_counter()
    for model in dict.fromkeys([DEFAULT_MODEL, *LANGUAGE_DEFAULTS.values()]):
        embed_one(_SAMPLE["zh"], model=model, kind="query")
        warm_up_domains(model)  # the topic-switch examples, embedded once (memory.topics.domains)
    now = datetime.now(UTC)
    for language, text in _SAMPLE.items():
        extract_facts(text, role="user", language=language, now=now)
        summarize([("user", text), ("assistant", text)], language=language)
        count_tokens(text)
    return time.perf_counter() - started


def enabled() -> bool:
    """``MEMDESK_WARMUP`` (default on)."""
    return envbool("MEMDESK_WARMUP", True)


def warm_up_and_freeze() -> float | None:
    """:func:`warm_up`, then what it loaded frozen out of the garbage collector's sight; the seconds it took, or
    None when a model could not load (logged: the first turn that needs it fails loudly instead)."""
    try:
        seconds = warm_up()
    except Exception:  # a model that cannot load fails its first turn loudly; the server still starts
        logger.exception("warm-up failed")
        return None
    # What is loaded now stays for the life of the worker, and it is most of the worker's objects (the
    # models, the summariser's word lists, Django's app registry). Python's full garbage collection walks all of them
    # — with every other thread of the worker stopped, again and again as turns allocate — and can
    # free none. Freezing moves them out of the collector's sight; later objects are collected as usual.
    gc.freeze()
    logger.info("warm-up done in %.1f s; %d objects frozen", seconds, gc.get_freeze_count())
    return seconds


def _run() -> None:
    warm_up_and_freeze()


def start() -> None:
    """Warm up on a daemon thread, once per process, unless ``MEMDESK_WARMUP=0``."""
    if not enabled() or _started.is_set():
        return
    _started.set()
    threading.Thread(target=_run, name="memdesk-warmup", daemon=True).start()
