"""Chinese words come from rjieba alone: jieba (which imports pkg_resources) is never imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

_PROBE = """
import sys
import django
django.setup()
from chat.prompt.summary import summarize
from memory.extraction import extract_facts
from memory.text import compress
from memory.text.language import cut, pos_cut, segment
text = "我叫张伟，订单 BCD-470 寄到北京市朝阳区建国路 88 号了吗？"
assert cut(text) and pos_cut(text) and segment(text)
assert any(fact.key == "name" for fact in extract_facts(text, role="user"))
assert compress(text) and summarize([("user", text), ("assistant", "好的，正在为您查询。")], language="zh")
print(sorted(name for name in sys.modules if name.split(".")[0] in ("jieba", "rjieba")))
"""


def test_the_text_pipeline_runs_on_rjieba_without_importing_jieba() -> None:
    # given a fresh process with the product's settings
    environ = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    # when it segments, tags, extracts, compresses and summarises Chinese
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=REPO, env=environ, capture_output=True, text=True, timeout=120
    )
    # then rjieba did the work and jieba was never imported
    assert done.returncode == 0, done.stderr[-2000:]
    modules = done.stdout.strip().splitlines()[-1]
    assert "'rjieba'" in modules
    assert "'jieba" not in modules
