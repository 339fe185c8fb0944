"""Single sign-on's settings: off unless configured (no pages, no button); a partial configuration stops the
process at start with ImproperlyConfigured naming what is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]

FULL = {
    "OIDC_RP_CLIENT_ID": "memdesk",
    "OIDC_RP_CLIENT_SECRET": "s3cret",
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://sso.example.com/auth",
    "OIDC_OP_TOKEN_ENDPOINT": "https://sso.example.com/token",
    "OIDC_OP_USER_ENDPOINT": "https://sso.example.com/userinfo",
    "OIDC_OP_JWKS_ENDPOINT": "https://sso.example.com/certs",
}

_PRINT = (
    "import django; django.setup(); from django.conf import settings as s; "
    "print(s.OIDC_ENABLED, 'staff_auth.backends.StaffOIDCBackend' in s.AUTHENTICATION_BACKENDS)"
)


def _start(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("OIDC_") and k not in {"DATABASE_URL"}}
    environ.update(variables, MEMDESK_DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings")
    return subprocess.run(
        [sys.executable, "-c", _PRINT], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120
    )


def test_a_partial_configuration_fails_at_start_naming_the_missing_variables(tmp_path):
    # given a client id and an authorization endpoint, but not the rest
    partial = {name: FULL[name] for name in ("OIDC_RP_CLIENT_ID", "OIDC_OP_AUTHORIZATION_ENDPOINT")}

    # when the process starts
    result = _start(tmp_path, **partial)

    # then it stops, and says which variables are missing
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert (
        "single sign-on is half configured: set OIDC_RP_CLIENT_SECRET, OIDC_OP_TOKEN_ENDPOINT, "
        "OIDC_OP_USER_ENDPOINT, OIDC_OP_JWKS_ENDPOINT"
    ) in result.stderr


def test_endpoints_without_a_client_id_are_partial_too(tmp_path):
    result = _start(tmp_path, **{k: v for k, v in FULL.items() if k != "OIDC_RP_CLIENT_ID"})
    assert result.returncode != 0
    assert "set OIDC_RP_CLIENT_ID (or unset every OIDC_ variable)" in result.stderr


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("OIDC_RP_SIGN_ALGO", "HS256", "OIDC_RP_SIGN_ALGO must be RS256/384/512 or ES256/384/512"),
        ("OIDC_OP_TOKEN_ENDPOINT", "sso.example.com/token", "OIDC_OP_TOKEN_ENDPOINT must be a URL with scheme https"),
        ("OIDC_RP_SCOPES", "email profile", "OIDC_RP_SCOPES must include openid"),
    ],
)
def test_a_bad_value_fails_at_start(tmp_path, name, value, message):
    result = _start(tmp_path, **{**FULL, name: value})
    assert result.returncode != 0
    assert message in result.stderr


def test_a_full_configuration_turns_single_sign_on_on_and_none_leaves_it_off(tmp_path):
    assert _start(tmp_path, **FULL).stdout.split() == ["True", "True"]
    assert _start(tmp_path).stdout.split() == ["False", "False"]


@pytest.mark.django_db
def test_while_off_there_is_no_sign_in_page_and_no_button(settings):
    # given the settings of a process started without OIDC_ variables
    assert settings.OIDC_ENABLED is False
    client = Client()

    # then the pages do not exist and the admin login shows no button
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/", {"code": "x", "state": "y"}).status_code == 404
    login = client.get("/admin/login/?next=/admin/").content.decode()
    assert 'name="password"' in login
    assert "Sign in with single sign-on" not in login


@pytest.mark.django_db
def test_when_configured_the_admin_login_offers_single_sign_on_beside_the_password(provider):
    login = Client().get("/admin/login/?next=/admin/tenants/").content.decode()
    assert 'name="password"' in login
    assert "Sign in with single sign-on" in login
    assert 'href="/oidc/authenticate/?next=%2Fadmin%2Ftenants%2F"' in login
