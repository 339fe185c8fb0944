"""Recall's knobs are checked like input: ``MEMDESK_RECALL`` may only name knobs that exist, each with a value of
its type, and a process whose settings get one wrong stops at start, naming it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from memory.recall.tuning import DEFAULT_TUNING, RecallTuning, tuning

ROOT = Path(__file__).resolve().parents[3]


def test_a_deployment_changes_only_the_knobs_it_names(settings):
    settings.MEMDESK_RECALL = {"rrf_k": 20, "w_lexical": 2}
    knobs = tuning()
    assert knobs.rrf_k == 20
    assert knobs.w_lexical == 2.0
    assert isinstance(knobs.w_lexical, float)  # an integer is a number too
    assert knobs.w_vector == DEFAULT_TUNING.w_vector
    # and a test's settings change is in force at once, and undone with it
    settings.MEMDESK_RECALL = {}
    assert tuning() == DEFAULT_TUNING


def test_the_knobs_cannot_be_changed_in_place():
    with pytest.raises(AttributeError):
        DEFAULT_TUNING.rrf_k = 60  # type: ignore[misc]


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"w_vectr": 1.0}, "'w_vectr'"),  # a misspelling
        ({"rrf_k": "10"}, "MEMDESK_RECALL['rrf_k'] must be an integer"),  # a string for a number
        ({"rrf_k": 10.5}, "MEMDESK_RECALL['rrf_k'] must be an integer"),
        ({"min_similarity": True}, "MEMDESK_RECALL['min_similarity'] must be a number"),  # a bool is no number
        ({"intent_embedding": "no"}, "MEMDESK_RECALL['intent_embedding'] must be true or false"),
        ({"stale_scope": "all"}, "MEMDESK_RECALL['stale_scope'] must be 'topic' or 'any'"),
    ],
)
def test_an_unknown_or_mistyped_knob_is_refused_naming_it(overrides, named):
    with pytest.raises(ImproperlyConfigured) as refused:
        RecallTuning.from_overrides(overrides)
    assert named in str(refused.value)


def test_a_misspelt_knob_lists_the_knobs_there_are():
    with pytest.raises(ImproperlyConfigured) as refused:
        RecallTuning.from_overrides({"candidate": 50})
    assert "'candidate'" in str(refused.value)
    assert "candidates" in str(refused.value)


def test_a_process_with_a_mistyped_knob_stops_at_start_naming_it(tmp_path):
    # given a deployment's settings module that misspells a knob
    (tmp_path / "bad_recall_settings.py").write_text(
        "from config.settings import *  # noqa: F403\nMEMDESK_RECALL = {'w_vectr': 1.0}\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "bad_recall_settings",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
    }
    # when the process starts
    started = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    # then it stops, and says which knob
    assert started.returncode != 0
    assert "ImproperlyConfigured" in started.stderr
    assert "'w_vectr'" in started.stderr
