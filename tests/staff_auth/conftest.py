"""A real OpenID Connect provider (testkit/oidc_provider.py) with memdesk's settings pointing at it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from testkit.oidc_provider import OidcProvider


@pytest.fixture
def provider(settings: Any) -> Iterator[OidcProvider]:
    """A started provider, single sign-on on (the settings config/settings.py derives from OIDC_* variables)."""
    with OidcProvider() as running:
        for name, value in running.django_settings().items():
            setattr(settings, name, value)
        settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, "staff_auth.backends.StaffOIDCBackend"]
        yield running
