"""The staff console in the staff member's language: the page's own words, and those its script shows, handed to
it as a JSON data block that carries the page's CSP nonce."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client

from staff_auth.models import StaffPreference

pytestmark = pytest.mark.django_db(transaction=True)


def _console(user) -> tuple[str, dict, str]:
    client = Client(headers={"accept-language": "en-US,en;q=0.9"})
    client.force_login(user)
    response = client.get("/staff/console/")
    assert response.status_code == 200
    html = response.content.decode()
    block = re.search(
        r'<script type="application/json" id="mdk-console-text" nonce="([^"]+)">(.*?)</script>', html, re.S
    )
    assert block is not None
    assert f"'nonce-{block.group(1)}'" in response["Content-Security-Policy"]
    return html, json.loads(block.group(2)), response["Content-Language"]


def test_a_chinese_staff_member_gets_the_console_in_chinese(staff):
    # given an agent who chose Chinese (their browser asks for English)
    StaffPreference.objects.create(user=staff["agent_a"], language="zh-hans")
    # when
    html, words, language = _console(staff["agent_a"])
    # then the page and the script's words are Chinese
    assert language == "zh-hans"
    assert "人工客服台" in html
    assert "交还给 AI" in html  # the hand-back button
    assert "Hand back to the AI" not in html
    assert words["online"] == "在线"
    assert words["waiting"] == "排队第 {position} 位"
    assert words["state_waiting_for_human"] == "等待人工"


def test_an_english_staff_member_gets_the_same_keys_in_english(staff):
    # when
    html, words, language = _console(staff["agent_a"])
    # then
    assert language == "en"
    assert "Hand back to the AI" in html
    assert words["online"] == "Online"
    assert words["waiting"] == "#{position} waiting"
