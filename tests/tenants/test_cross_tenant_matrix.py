"""Every session-scoped endpoint refuses another tenant's session with 404,
and nothing of the owner's changes."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from memory.store import write as store
from tests.factories import open_session, open_session_obj

pytestmark = pytest.mark.django_db(transaction=True)


def test_outsider_gets_404_on_every_session_endpoint(acme, globex, fake_ollama):
    # given an acme session with a memory and a message
    opened = open_session(acme, "alice")
    sid = opened["session_id"]
    acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "我叫张伟"}, format="json")
    session = open_session_obj(acme, "alice")
    memory = store.do_write_memory(acme.tenant, session, type="user_profile", key="nick", content="昵称 小张").memory
    outsider = globex.client
    outsider.credentials(HTTP_AUTHORIZATION=f"Bearer {globex.api_key}", HTTP_X_SESSION_ID=sid)
    calls = [
        ("get", f"/api/v1/sessions/{sid}", None),
        ("post", f"/api/v1/sessions/{sid}/close", None),
        ("get", f"/api/v1/sessions/{sid}/messages", None),
        ("post", f"/api/v1/sessions/{sid}/messages", {"text": "hi"}),
        ("get", f"/api/v1/sessions/{sid}/context", None),
        ("post", f"/api/v1/sessions/{sid}/batches", {"tool": "x", "items": [{}]}),
        ("get", f"/api/v1/sessions/{sid}/batches/{uuid.uuid4()}", None),
        ("get", "/api/v1/memories", None),
        ("post", "/api/v1/memories", {"type": "user_profile", "content": "intruder"}),
        ("post", "/api/v1/memories/recall", {"query": "张伟"}),
        ("get", f"/api/v1/memories/{memory.pk}", None),
        ("patch", f"/api/v1/memories/{memory.pk}", {"content": "hijacked"}),
        ("delete", f"/api/v1/memories/{memory.pk}", None),
        ("post", f"/api/v1/memories/{memory.pk}/expire", None),
        ("post", f"/api/v1/memories/{memory.pk}/feedback", {"event": "misled"}),
    ]
    for method, path, body in calls:
        response = getattr(outsider, method)(path, body, format="json") if body else getattr(outsider, method)(path)
        # then
        assert response.status_code == 404, (method, path, response.content)
        assert response.json()["error"]["code"] == "session_not_found", (method, path)
    # and the owner's data is untouched
    detail = acme.client.get(f"/api/v1/sessions/{sid}").json()
    assert detail["status"] == "open"
    assert detail["turns"] == 1
    acme.client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.api_key}", HTTP_X_SESSION_ID=str(session.pk))
    unchanged = acme.client.get(f"/api/v1/memories/{memory.pk}").json()
    assert unchanged["content"] == "昵称 小张"
    assert unchanged["lifespan"]["relevance_score"] == 1.0


def test_staff_live_sessions_page_shows_only_own_tenants(staff, acme, globex):
    a = open_session_obj(acme, "alice-of-acme")
    g = open_session_obj(globex, "gina-of-globex")
    store.do_write_memory(acme.tenant, a, type="user_profile", key="name", content="用户姓名 张伟")
    store.do_write_memory(globex.tenant, g, type="user_profile", key="name", content="Name: Gina")
    client = Client()
    client.force_login(staff["owner_a"])
    html = client.get("/staff/sessions/").content.decode()
    assert "alice-of-acme" in html
    assert "用户姓名 张伟" in html
    assert "gina-of-globex" not in html
    assert "Name: Gina" not in html
    client.force_login(staff["root"])
    assert "gina-of-globex" in client.get("/staff/sessions/").content.decode()
