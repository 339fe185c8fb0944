"""A query embedded by two threads at once (a chat turn's recall and its knowledge search) is computed once."""

from __future__ import annotations

import threading
import time

import numpy as np

from memory.embeddings import models


def test_two_threads_asking_for_the_same_query_compute_it_once(monkeypatch):
    calls: list[str] = []

    def slow_embed(texts, *, model, kind):
        calls.append(texts[0])
        time.sleep(0.2)  # the second thread asks while the first computes
        return np.ones((len(texts), 4), dtype=np.float32)

    monkeypatch.setattr(models, "embed", slow_embed)
    results: list[np.ndarray] = []
    threads = [
        threading.Thread(target=lambda: results.append(models.embed_one("同时问的问题", model="m", kind="query")))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == ["同时问的问题"]
    assert len(results) == 2
    assert results[0] is results[1]


def test_a_failed_computation_lets_the_next_caller_compute(monkeypatch):
    attempts: list[int] = []

    def flaky_embed(texts, *, model, kind):
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("model not loaded")
        return np.ones((len(texts), 4), dtype=np.float32)

    monkeypatch.setattr(models, "embed", flaky_embed)
    try:
        models.embed_one("失败后再问", model="m2", kind="query")
    except RuntimeError:
        pass
    assert models.embed_one("失败后再问", model="m2", kind="query").shape == (4,)
    assert len(attempts) == 2
