"""Several ASGI workers: prometheus_client's multiprocess mode merges them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

WORKER = """
import django, os
django.setup()
from chat import metrics as chat_metrics
from memory import metrics
metrics.AMNESIA_ALERTS.labels(tenant="acme").inc({n})
chat_metrics.WEBSOCKETS.inc({n})
metrics.FRESHNESS.labels(tenant="acme").set({fresh})
"""

SCRAPE = """
import django
django.setup()
from django.test import RequestFactory
from django_prometheus.exports import ExportToDjangoView
print(ExportToDjangoView(RequestFactory().get("/metrics")).content.decode())
"""


def _run(code: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_two_worker_processes_are_merged_in_one_scrape(tmp_path):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings"}
    # given two worker processes that each recorded something
    _run(WORKER.format(n=2, fresh=0.9), env)
    _run(WORKER.format(n=3, fresh=0.8), env)
    # when a third process (the one Prometheus happens to reach) serves /metrics
    text = _run(SCRAPE, env)
    # then counters add up across workers and the health gauge is the latest value
    assert 'memdesk_amnesia_alerts_total{tenant="acme"} 5.0' in text
    assert 'memdesk_memory_freshness_ratio{tenant="acme"} 0.8' in text
