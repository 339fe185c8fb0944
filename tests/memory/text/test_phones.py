"""Phone numbers written the national way of the regions a deployment serves are read, stored in E.164, and a
string of digits that only looks like one stays no phone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory.extraction.rules import extract_facts
from memory.text.phones import find_phones

ROOT = Path(__file__).resolve().parents[3]


def _phones(text: str, role: str = "user") -> list[str]:
    return [fact.value for fact in extract_facts(text, role=role) if fact.key == "phone"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("btw my phone's 07700 900417, email works too", "+447700900417"),  # a UK mobile
        ("Call me on 020 7946 0321 after six", "+442079460321"),  # London, not a Chinese landline
        ("you can reach me on (212) 555-0147 if the courier needs to call", "+12125550147"),
        ("my mobile is 0491 570 156", "+61491570156"),  # valid only in Australia
        ("text me at 415.555.0199 please", "+14155550199"),
    ],
)
def test_the_customers_national_number_is_kept_with_its_country_code(text: str, value: str) -> None:
    assert _phones(text) == [value]


@pytest.mark.parametrize(
    "text",
    [
        "my order 123-456-7890 has not arrived",  # possible, valid nowhere, no word of phoning
        "confirmations go to the number ending 5521",  # the last digits only
        "text STOP to 555-0100 to opt out",  # no area code
    ],
)
def test_digits_that_only_look_like_a_number_are_no_phone(text: str) -> None:
    assert _phones(text) == []


def test_a_chinese_landline_in_a_chinese_message_stays_chinese() -> None:
    assert [phone.value for phone in find_phones("门店电话 020-8888 6666，营业到九点")][0] == "02088886666"


def test_the_regions_read_follow_the_setting(settings) -> None:
    # a Berlin number is valid in none of the default regions
    assert _phones("bitte unter 030 901820 anrufen") == []

    # given a deployment that serves Germany
    settings.PHONE_REGIONS = ("DE", "US")

    # then it is read, with Germany's code
    assert _phones("bitte unter 030 901820 anrufen") == ["+4930901820"]


def test_an_unknown_region_stops_the_process_at_start() -> None:
    done = subprocess.run(  # noqa: S603 - our own interpreter and a fixed program
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "MEMDESK_PHONE_REGIONS": "US,XX"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "MEMDESK_PHONE_REGIONS" in done.stderr
    assert "XX" in done.stderr


@pytest.mark.parametrize(
    "text",
    [
        "快递单号 SF1234567890，预计明天到",  # digits run on from a courier's code
        "the reference is 1234567890",  # a British number is written with its leading 0
    ],
)
def test_a_code_or_a_number_without_its_trunk_zero_is_no_phone(text: str) -> None:
    assert find_phones(text) == []
