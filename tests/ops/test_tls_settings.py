"""Served over TLS (MEMDESK_TLS, or SECURE_PROXY_SSL_HEADER behind a proxy): HSTS on HTTPS responses and
session and CSRF cookies marked Secure; over plain HTTP in development, neither."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRINT_SETTINGS = (
    "import json, django; from django.conf import settings; django.setup(); print(json.dumps({k: getattr(settings, k)"
    " for k in ('SECURE_PROXY_SSL_HEADER', 'SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_HSTS_SECONDS')}))"
)


def _settings_with(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"SECURE_PROXY_SSL_HEADER", "MEMDESK_TLS"}}
    return subprocess.run(  # noqa: S603 - our own interpreter and a fixed program
        [sys.executable, "-c", PRINT_SETTINGS],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "config.settings", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_tls_proxy_header_turns_on_secure_cookies_and_hsts():
    done = _settings_with(SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto:https")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_HSTS_SECONDS": 31536000,
    }


def test_plain_http_keeps_cookies_usable_without_tls():
    done = _settings_with()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {
        "SECURE_PROXY_SSL_HEADER": None,
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_HSTS_SECONDS": 0,
    }


def test_a_malformed_proxy_header_fails_at_start():
    done = _settings_with(SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto")
    assert done.returncode != 0
    assert "SECURE_PROXY_SSL_HEADER must be" in done.stderr


@pytest.mark.django_db
def test_an_https_request_through_the_proxy_gets_hsts_and_secure_cookies(client, settings):
    # given: the settings MEMDESK_TLS=1 with SECURE_PROXY_SSL_HEADER=X-Forwarded-Proto:https give
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    settings.SECURE_HSTS_SECONDS = 31536000
    # when: the admin login page is asked for over HTTPS (as the proxy says), then over plain HTTP
    https = client.get("/admin/login/", HTTP_X_FORWARDED_PROTO="https")
    plain = client.get("/admin/login/")
    # then: HSTS only over HTTPS; the CSRF cookie only travels over TLS
    assert https.headers["Strict-Transport-Security"] == "max-age=31536000"
    assert "Strict-Transport-Security" not in plain.headers
    assert https.cookies["csrftoken"]["secure"] is True
