from __future__ import annotations

from typing import Any

import pytest

from chat.sessions import do_open_session
from tenants.rls import tenant_scope


def open_session_obj(ctx: Any, end_user: str = "user-1") -> Any:
    with tenant_scope(ctx.tenant):
        return do_open_session(ctx.tenant, end_user, {}).session


@pytest.fixture
def acme_session(acme: Any) -> Any:
    return open_session_obj(acme, "alice")


@pytest.fixture
def memapi(acme: Any, acme_session: Any) -> Any:
    """acme's API client speaking for alice's session."""
    acme.client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}", HTTP_X_SESSION_ID=str(acme_session.pk))
    return acme.client
