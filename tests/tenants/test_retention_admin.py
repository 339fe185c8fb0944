"""The tenant's retention settings in the admin (issue #19): typed fields, bounds checked, saved into
``Tenant.settings`` with its other keys kept."""

from __future__ import annotations

import json

import pytest

from tenants.models import Tenant
from tests.factories import staff_login


def _form(tenant, settings, **fields):
    """The tenant's change form as the owner posts it."""
    return {
        "slug": tenant.slug, "name": tenant.name, "agent_role": "", "allowed_origins": "[]",
        "language": tenant.language, "settings": json.dumps(settings), "send_legacy_signature": "on",
        **{key: "" if value is None else str(value) for key, value in fields.items()},
    }  # fmt: skip


@pytest.fixture
def configured(acme):
    """acme with settings of its own (rate limits) and a history retention already set."""
    acme.tenant.settings = {"rate_limits": {"per_session": 20}, "history_retention_days": 60}
    acme.tenant.save(update_fields=["settings"])
    return acme.tenant


def test_the_form_shows_the_retention_settings_in_their_own_fields(staff, configured):
    # given acme's settings with a history retention of 60 days
    # when its owner opens the tenant's page
    html = staff_login(staff["owner_a"]).get(f"/admin/tenants/tenant/{configured.pk}/change/").content.decode()
    # then the field shows 60, and the JSON shows only the other keys
    assert 'name="history_retention_days" value="60"' in html
    assert 'name="message_retention_days"' in html
    assert "rate_limits" in html
    assert "&quot;history_retention_days&quot;" not in html


@pytest.mark.parametrize(
    ("days", "message"),
    [
        (0, "Ensure this value is greater than or equal to 1."),
        (5000, "Ensure this value is less than or equal to 3650."),
    ],
)
def test_the_form_refuses_days_out_of_bounds(staff, configured, days, message):
    # given the owner of acme
    client = staff_login(staff["owner_a"])
    # when they save a message retention out of bounds
    url = f"/admin/tenants/tenant/{configured.pk}/change/"
    response = client.post(url, _form(configured, {"rate_limits": {"per_session": 20}}, message_retention_days=days))
    # then the form comes back with the message and nothing is saved
    assert response.status_code == 200
    assert message in response.content.decode()
    assert Tenant.objects.get(pk=configured.pk).settings == configured.settings


def test_saving_the_retention_keeps_the_other_settings(staff, configured):
    # given the owner of acme
    client = staff_login(staff["owner_a"])
    # when they set messages to 30 days and memories to 365, and empty the history field
    url = f"/admin/tenants/tenant/{configured.pk}/change/"
    form = _form(
        configured, {"rate_limits": {"per_session": 20}}, message_retention_days=30, memory_retention_days=365,
        history_retention_days=None,
    )  # fmt: skip
    response = client.post(url, form)
    # then the settings hold both, the rate limits are untouched, and the history retention is back to its default
    assert response.status_code == 302
    assert Tenant.objects.get(pk=configured.pk).settings == {
        "rate_limits": {"per_session": 20},
        "message_retention_days": 30,
        "memory_retention_days": 365,
    }


def test_a_retention_key_in_the_json_is_refused(staff, configured):
    # given the owner of acme
    client = staff_login(staff["owner_a"])
    # when they write a retention into the JSON instead of its field
    url = f"/admin/tenants/tenant/{configured.pk}/change/"
    response = client.post(url, _form(configured, {"message_retention_days": 5}))
    # then the form says where it belongs and nothing is saved
    assert response.status_code == 200
    assert "Set message_retention_days in its own field, not in the JSON." in response.content.decode()
    assert Tenant.objects.get(pk=configured.pk).settings == configured.settings


def test_an_agent_sees_the_page_but_cannot_change_the_retention(staff, configured):
    # given acme's agent, who may look but not change
    client = staff_login(staff["agent_a"])
    url = f"/admin/tenants/tenant/{configured.pk}/change/"
    # when they open the page, and then post a retention
    page = client.get(url)
    response = client.post(url, _form(configured, {}, message_retention_days=1))
    # then the page shows, the post is refused, and the settings are untouched
    assert page.status_code == 200
    assert response.status_code == 403
    assert Tenant.objects.get(pk=configured.pk).settings == configured.settings
