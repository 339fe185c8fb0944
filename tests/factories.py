"""How a test makes what it needs: a tenant, a chat session, a memory.

Two ways in, and a test picks the one it is about:

- **over the API** (:func:`open_session`): the request a customer's front end sends, through
  authentication, validation and the view; for tests of the API, the chat and anything a client sees;
- **through the service** (:func:`open_session_obj`, :func:`write_memory`): the ``do_*`` call the views
  themselves make, with no HTTP in between; for tests of the store, recall, health and the jobs.

The fixtures in ``tests/conftest.py`` (``acme``, ``globex``) and ``tests/memory/conftest.py``
(``acme_session``) are built from these.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.test import Client
from rest_framework.test import APIClient

from chat.sessions.lifecycle import do_open_session
from chat.sessions.messages import store_user_message
from chat.turn.finish import finish_turn
from chat.turn.prepare import prepare_turn
from conversations.models import ChatSession
from memory.models import MemoryUnit
from memory.store import write as store
from tenants.rls import tenant_scope
from tenants.services import do_create_tenant


@dataclass
class TenantCtx:
    """A tenant, its API key (shown once, as to an operator) and a client that sends it."""

    tenant: Any
    api_key: str
    client: Any


def make_tenant(slug: str, language: str = "zh") -> TenantCtx:
    provisioned = do_create_tenant(slug, slug.title(), language=language)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {provisioned.api_key}")
    return TenantCtx(tenant=provisioned.tenant, api_key=provisioned.api_key, client=client)


def staff_login(user: Any, accept_language: str | None = None) -> Client:
    """A browser signed in to the admin and staff pages as ``user`` (``accept_language``: what it asks for)."""
    client = Client(headers={"accept-language": accept_language}) if accept_language else Client()
    client.force_login(user)
    return client


def open_session(ctx: TenantCtx, end_user_id: str = "user-1", **extra: Any) -> dict[str, Any]:
    """Open a session over the API (``POST /api/v1/sessions``, which must answer 201); returns the body
    (``session_id``, ``token``, …)."""
    response = ctx.client.post("/api/v1/sessions", {"end_user_id": end_user_id, **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def open_session_obj(ctx: TenantCtx, end_user: str = "user-1") -> ChatSession:
    """Open a session through the service, in the tenant's scope; returns the committed ``ChatSession``."""
    with tenant_scope(ctx.tenant):
        return do_open_session(ctx.tenant, end_user, {}).session


def write_memory(
    ctx: TenantCtx, session: ChatSession, content: str, *, type: str = "fact_reference", **fields: Any
) -> MemoryUnit:
    """Write a memory through the service (``memory.store.write.do_write_memory``, as extraction does); ``fields``
    are its keyword arguments (``key``, ``expires_in``, ``now``, ``embedding``, ``context``, …). Returns the
    memory stored (the replaced or refreshed one when the key or content already existed)."""
    return store.do_write_memory(ctx.tenant, session, type=type, content=content, **fields).memory


#: The model's context size the in-process turn steps are prepared for.
CONTEXT = 32768


def turn_steps(ctx: TenantCtx, session: ChatSession, text: str, reply: str) -> Any:
    """A chat turn run step by step in this thread (store, prepare, finish), the model's reply given: for tests
    of what a turn stores and feeds back, without a model or an event loop. Returns the prepared turn."""
    message, _ = store_user_message(ctx.tenant, session, text, None)
    prepared = prepare_turn(ctx.tenant, session, message, CONTEXT)
    finish_turn(ctx.tenant, session, message, str(uuid.uuid4()), reply, prepared, {})
    return prepared
