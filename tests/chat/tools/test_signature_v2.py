"""Replay-proof signed tool calls (API.md "Tools"): the tenant's back end gets
``X-Memdesk-Timestamp`` and ``X-Memdesk-Signature-V2`` beside the body-only
``X-Memdesk-Signature``, and the check docs/tools.md tells tenants to run
refuses a replayed or altered request."""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.test import Client

from chat.tools import registry as tools_mod
from chat.tools.call import call_tool_sync
from tenants import signing
from testkit.fake_ollama import Reply
from tests.chat.tools.backend import Recorded
from tests.chat.tools.conftest import register
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)

DOCS = Path(__file__).resolve().parents[3] / "docs" / "tools.md"
FIVE_MINUTES = 300

Check = Callable[..., bool]


@pytest.fixture(scope="module")
def documented_check() -> Check:
    """``verify_signature_v2`` exactly as docs/tools.md prints it for tenants to copy."""
    text = DOCS.read_text()
    snippet = next(
        block for block in re.findall(r"```python\n(.*?)```", text, re.DOTALL) if "def verify_signature_v2" in block
    )
    namespace: dict = {}
    exec(compile(snippet, str(DOCS), "exec"), namespace)  # noqa: S102 - our own documentation, under test
    return namespace["verify_signature_v2"]


def _call_once(ctx, backend) -> Recorded:
    """One call of ``query_order`` through the batch path's client (the chat turn shares the request building)."""
    register(ctx, backend.url)
    tool = tools_mod.get_tool(ctx.tenant, "query_order")
    outcome = call_tool_sync(
        ctx.tenant, tool, {"order_id": "A123"}, session_id="s-1", end_user_id="zhangwei", call_id="batch:t:0"
    )
    assert outcome.ok, outcome.result
    [call] = backend.requests
    return call


def test_a_chat_turns_tool_call_carries_both_signatures_and_v2_verifies(acme, backend, fake_ollama, documented_check):
    # given
    register(acme, backend.url)
    sid = open_session(acme, "zhangwei")["session_id"]
    fake_ollama.script(
        Reply(tool_calls=[{"function": {"name": "query_order", "arguments": {"order_id": "A123"}}}]), "已发货"
    )
    # when
    before = time.time()
    response = acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "查订单 A123"}, format="json")
    # then
    assert response.status_code == 200, response.content
    [call] = backend.requests
    secret = acme.tenant.signing_secret
    timestamp = call.headers["X-Memdesk-Timestamp"]
    assert int(before) <= int(timestamp) <= time.time()
    assert call.headers["X-Memdesk-Signature-V2"] == (
        f"t={timestamp},sha256=" + hmac.new(secret.encode(), f"{timestamp}.".encode() + call.raw, "sha256").hexdigest()
    )
    assert documented_check(secret, call.headers["X-Memdesk-Signature-V2"], call.raw, time.time())
    legacy = "sha256=" + hmac.new(secret.encode(), call.raw, hashlib.sha256).hexdigest()
    assert call.headers["X-Memdesk-Signature"] == legacy


def test_a_captured_call_replayed_after_five_minutes_is_rejected(acme, backend, documented_check):
    # given a request as the tenant received it
    call = _call_once(acme, backend)
    header, sent_at = call.headers["X-Memdesk-Signature-V2"], int(call.headers["X-Memdesk-Timestamp"])
    secret = acme.tenant.signing_secret
    # then it verifies within the tolerance, and a replay of it later does not
    assert documented_check(secret, header, call.raw, sent_at + FIVE_MINUTES - 1)
    assert not documented_check(secret, header, call.raw, sent_at + FIVE_MINUTES + 1)
    # nor does the replay with a fresh timestamp put in by hand: t is inside the MAC
    refreshed = re.sub(r"^t=\d+", f"t={sent_at + 3600}", header)
    assert not documented_check(secret, refreshed, call.raw, sent_at + 3600)


def test_an_altered_body_or_another_secret_is_rejected(acme, globex, backend, documented_check):
    # given
    call = _call_once(acme, backend)
    header, now = call.headers["X-Memdesk-Signature-V2"], time.time()
    altered = call.raw.replace(b'"A123"', b'"A124"')
    assert altered != call.raw
    # then
    assert documented_check(acme.tenant.signing_secret, header, call.raw, now)
    assert not documented_check(acme.tenant.signing_secret, header, altered, now)
    assert not documented_check(globex.tenant.signing_secret, header, call.raw, now)


def test_the_tenant_setting_turns_the_body_only_header_off(acme, backend, documented_check):
    # given a tenant whose back end checks V2 only
    acme.tenant.send_legacy_signature = False
    acme.tenant.save(update_fields=["send_legacy_signature"])
    # when
    call = _call_once(acme, backend)
    # then
    assert "X-Memdesk-Signature" not in call.headers
    assert documented_check(acme.tenant.signing_secret, call.headers["X-Memdesk-Signature-V2"], call.raw, time.time())


@pytest.mark.parametrize(
    "header",
    [None, "", "sha256=abc", "t=,sha256=abc", "t=abc,sha256=abc", "t=١٢٣,sha256=abc", "t=" + "9" * 400, "t=1,sha256=é"],
)
def test_malformed_headers_are_refused_by_both_checks_without_raising(documented_check, header):
    assert documented_check("whsec_x", header, b"{}", time.time()) is False
    assert signing.verify_signature_v2("whsec_x", header, b"{}", time.time()) is False


def test_the_documented_check_and_memdesks_helper_agree(documented_check):
    # given memdesk's own signing at a fixed time
    body, secret, sent_at = b'{"tool":"x"}', "whsec_test", 1_700_000_000
    headers = signing.signed_headers(secret, body, now=sent_at)
    # then for fresh, stale, future, altered and foreign cases both answer alike
    cases = [
        (secret, body, sent_at),
        (secret, body, sent_at + FIVE_MINUTES),
        (secret, body, sent_at + FIVE_MINUTES + 1),
        (secret, body, sent_at - FIVE_MINUTES - 1),
        (secret, body + b" ", sent_at),
        ("whsec_other", body, sent_at),
    ]
    for case_secret, case_body, now in cases:
        header = headers["X-Memdesk-Signature-V2"]
        assert documented_check(case_secret, header, case_body, now) == signing.verify_signature_v2(
            case_secret, header, case_body, now
        )
    assert [documented_check(s, headers["X-Memdesk-Signature-V2"], b, n) for s, b, n in cases] == [
        True, True, False, False, False, False,
    ]  # fmt: skip
    assert headers["X-Memdesk-Timestamp"] == str(sent_at)


def test_owners_switch_the_legacy_header_in_the_admin(staff, acme):
    # given acme's owner in the admin
    client = Client()
    client.force_login(staff["owner_a"])
    url = f"/admin/tenants/tenant/{acme.tenant.pk}/change/"
    form = client.get(url)
    assert form.status_code == 200
    assert 'name="send_legacy_signature"' in form.content.decode()
    # when the box is cleared and saved
    data = {
        "slug": acme.tenant.slug,
        "name": acme.tenant.name,
        "agent_role": "",
        "allowed_origins": "[]",
        "language": acme.tenant.language,
        "settings": "{}",
    }
    response = client.post(url, data)
    # then
    assert response.status_code == 302, response.content.decode()[:2000]
    acme.tenant.refresh_from_db()
    assert acme.tenant.send_legacy_signature is False
