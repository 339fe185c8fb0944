"""Settings come only from the environment and bad values fail at start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config import env

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("DATABASE_URL", "mysql://u@h/db", "DATABASE_URL must be a URL with scheme postgres"),
        ("REDIS_URL", "localhost:6379", "REDIS_URL must be a URL with scheme redis"),
        ("OLLAMA_HOST", "ftp://x", "OLLAMA_HOST must be a URL with scheme http"),
        ("DJANGO_DEBUG", "maybe", "DJANGO_DEBUG must be one of"),
        ("SESSION_TOKEN_TTL_S", "ten", "SESSION_TOKEN_TTL_S must be an integer"),
        ("SESSION_TOKEN_TTL_S", "5", "SESSION_TOKEN_TTL_S must be >= 60"),
        ("SECRET_KEY", "short", "SECRET_KEY must be at least 32 characters"),
        ("THROTTLE_RECALL", "lots", "THROTTLE_RECALL must be '<count>/<s|min|hour|day>'"),
        ("THROTTLE_SESSIONS", "10/fortnight", "THROTTLE_SESSIONS must be '<count>/<s|min|hour|day>'"),
    ],
)
def test_bad_setting_fails_at_start_with_a_clear_message(name, value, message, tmp_path):
    environ = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    environ.update({name: value, "MEMDESK_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings"})
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert message in result.stderr


def test_production_requires_a_secret_key(tmp_path):
    environ = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    environ.update(
        {
            "DATABASE_URL": "postgres://u@127.0.0.1/db",
            "DJANGO_DEBUG": "0",
            "MEMDESK_DATA_DIR": str(tmp_path),
            "DJANGO_SETTINGS_MODULE": "config.settings",
        }
    )
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, env=environ, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set in production" in result.stderr


def test_development_secret_key_is_generated_once(tmp_path):
    environ = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DATABASE_URL"}}
    environ.update({"MEMDESK_DATA_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings"})
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    first = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True)
    second = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    assert (tmp_path / "secret_key").read_text().strip() == first.stdout.strip()
    assert oct((tmp_path / "secret_key").stat().st_mode & 0o777) == "0o600"


def test_parsers_accept_good_values(monkeypatch):
    monkeypatch.setenv("X_BOOL", "yes")
    monkeypatch.setenv("X_INT", " 42 ")
    monkeypatch.setenv("X_LIST", "a, b,,c")
    assert env.envbool("X_BOOL", False) is True
    assert env.envint("X_INT", 0, minimum=1) == 42
    assert env.envlist("X_LIST", []) == ["a", "b", "c"]
    assert env.envbool("X_UNSET", True) is True


def test_parsers_reject_bad_values(monkeypatch):
    monkeypatch.setenv("X_INT", "4.5")
    with pytest.raises(ImproperlyConfigured, match="X_INT must be an integer"):
        env.envint("X_INT", 0)


def test_platform_is_not_a_python_package():
    import platform

    assert not (ROOT / "platform" / "__init__.py").exists()
    assert hasattr(platform, "python_version")


def test_an_external_database_gets_memdesks_backend_with_health_checks(tmp_path):
    # given DATABASE_URL (dj-database-url turns health checks off unless asked)
    environ = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL"}}
    environ.update(
        {
            "DATABASE_URL": "postgres://u@127.0.0.1:5999/db",
            "SECRET_KEY": "k" * 40,
            "MEMDESK_DATA_DIR": str(tmp_path),
            "DJANGO_SETTINGS_MODULE": "config.settings",
        }
    )
    code = (
        "import django; django.setup(); from django.conf import settings; d = settings.DATABASES['default'];"
        "print(d['ENGINE'], d['CONN_HEALTH_CHECKS'], d.get('EMBEDDED'), d['HOST'], d['PORT'])"
    )

    # when the settings load
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True)

    # then the server is the URL's, never the embedded one, and a pooled connection PostgreSQL ended is checked
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["config.db", "True", "None", "127.0.0.1", "5999"]
