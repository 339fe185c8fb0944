"""A server worker loads its models on a background thread as it starts, so the first customer of a fresh
worker does not wait for them (chat/turn/warmup.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from chat.turn import warmup

REPO = Path(__file__).resolve().parents[2]

_PROBE = """
import gc, threading, time
started = time.perf_counter()
import config.asgi
imported = time.perf_counter() - started
from memory.embeddings import models as embeddings
warm = [t for t in threading.enumerate() if t.name == "memdesk-warmup"]
for t in warm:
    t.join(120)
print(len(warm), gc.get_freeze_count() > 100_000, sorted(embeddings._models), round(imported, 1))
"""


def _probe(**env: str) -> list[str]:
    environ = {k: v for k, v in os.environ.items() if k != "MEMDESK_WARMUP"}
    environ.update(DJANGO_SETTINGS_MODULE="config.settings", **env)
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=REPO, env=environ, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1].split(" ", 1)


def test_importing_the_asgi_application_loads_the_embedding_models_in_the_background():
    threads, rest = _probe()
    assert threads == "1"
    # and what it loaded is frozen out of the garbage collector's full collections
    assert rest.startswith("True ")
    # the default model and the Chinese default are both loaded before any turn asked for them
    assert "'all-MiniLM-L6-v2'" in rest
    assert "'multilingual-use-384'" in rest


def test_warm_up_can_be_turned_off():
    threads, rest = _probe(MEMDESK_WARMUP="0")
    assert threads == "0"
    assert rest.startswith("False []")


@pytest.mark.parametrize("value", ["0", "false", "no", "off", "FALSE"])
def test_warm_up_is_off_for_every_false_spelling(monkeypatch, value):
    # given a process that has not warmed up, and the variable spelled as any other boolean of memdesk's
    monkeypatch.setattr(warmup, "_started", threading.Event())
    monkeypatch.setenv("MEMDESK_WARMUP", value)
    # when the server starts
    warmup.start()
    # then no warm-up thread was started
    assert not warmup._started.is_set()
    assert not [t for t in threading.enumerate() if t.name == "memdesk-warmup"]


def test_a_value_that_is_no_boolean_stops_the_start_naming_the_variable(monkeypatch):
    monkeypatch.setattr(warmup, "_started", threading.Event())
    monkeypatch.setenv("MEMDESK_WARMUP", "maybe")
    with pytest.raises(ImproperlyConfigured, match="MEMDESK_WARMUP"):
        warmup.start()
    assert not warmup._started.is_set()
