"""A chat turn's own time on /metrics: ``memdesk_turn_overhead_seconds`` (what memdesk adds to the model's
time, the quantity bench/load/chat_load.py holds to p95 ≤ 50 ms) and ``memdesk_turn_stage_seconds`` per unit of
work, so an operator sees in production what the benchmark measures."""

from __future__ import annotations

import time

import pytest
from prometheus_client import REGISTRY

from testkit.fake_ollama import Reply
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

STAGES = ("store", "prepare", "finish")


def _figures() -> dict[str, float]:
    """The turn histograms' counts and sums, as the process's registry holds them now."""
    figures = {
        "overhead_count": REGISTRY.get_sample_value("memdesk_turn_overhead_seconds_count") or 0.0,
        "overhead_sum": REGISTRY.get_sample_value("memdesk_turn_overhead_seconds_sum") or 0.0,
    }
    for stage in STAGES:
        figures[f"{stage}_count"] = (
            REGISTRY.get_sample_value("memdesk_turn_stage_seconds_count", {"stage": stage}) or 0.0
        )
    return figures


def _send(ctx, sid, text):
    return ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": text}, format="json")


def test_a_turns_overhead_is_recorded_without_the_models_time(acme, fake_ollama):
    # given a model that takes at least 0.6 s to answer (0.1 s before each of its six pieces)
    sid = open_session(acme, "zhangwei")["session_id"]
    pieces = ["您好", "，", "张伟", "，", "请讲", "。"]
    fake_ollama.script(Reply(deltas=pieces, first_token_delay_s=0.1, token_delay_s=0.1))
    before = _figures()

    # when a turn runs
    started = time.perf_counter()
    response = _send(acme, sid, "你好，我叫张伟")
    wall = time.perf_counter() - started

    # then it counts once in each histogram, and its overhead leaves the model's 0.6 s out
    assert response.status_code == 200, response.content
    after = _figures()
    assert {name: after[name] - before[name] for name in after if name.endswith("_count")} == {
        "overhead_count": 1.0, "store_count": 1.0, "prepare_count": 1.0, "finish_count": 1.0,
    }  # fmt: skip
    overhead = after["overhead_sum"] - before["overhead_sum"]
    assert wall >= 0.6
    assert 0 < overhead <= wall - 0.6


def test_a_turn_the_model_failed_is_not_counted_as_overhead(acme, fake_ollama):
    # given a model that answers with an error
    sid = open_session(acme, "lisi")["session_id"]
    fake_ollama.script(Reply(status=500))
    before = _figures()

    # when a turn runs
    response = _send(acme, sid, "你好")

    # then the message was stored and prepared, but no overhead is recorded for a turn without a reply
    assert response.status_code == 503
    after = _figures()
    assert after["overhead_count"] == before["overhead_count"]
    assert after["store_count"] - before["store_count"] == 1
    assert after["prepare_count"] - before["prepare_count"] == 1
    assert after["finish_count"] == before["finish_count"]
