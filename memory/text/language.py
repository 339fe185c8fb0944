"""Text plumbing shared by the memory layer and the chat runtime: CJK ranges, language detection, the one
jieba loader, and segmentation for the lexical leg of recall.

- :data:`CJK` / :data:`CJK_RE`: the Chinese characters memdesk recognises (unified ideographs, extension A,
  compatibility ideographs), the one range every module uses.
- :func:`detect_language`: ``"zh"`` or ``"en"`` for a piece of text.
- jieba, initialised once and lazily (importing it and loading its dictionary are slow, and the load must not
  race): :func:`cut`, :func:`pos_cut` and :func:`segment` all go through :func:`_jieba`.

PostgreSQL's full-text parser does not split Chinese into words, so memdesk
segments text with jieba before it reaches ``to_tsvector``: stored memories
with ``cut_for_search`` (which also emits the parts of long words, so
「订单号」 is indexed as 订单, 单号 and 订单号) and queries the same way.
English words pass through and the ``english`` configuration stems them.
"""

from __future__ import annotations

import logging
import re
import threading
import warnings
from collections.abc import Iterable
from types import ModuleType
from typing import Literal

TS_CONFIG = "english"

Language = Literal["zh", "en"]

#: Chinese characters: CJK unified ideographs, extension A and the compatibility ideographs.
CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK_RE = re.compile(f"[{CJK}]")
_LATIN_RE = re.compile(r"[A-Za-z]")
_WORD = re.compile(f"[\\w{CJK}]+", re.UNICODE)

#: Function words that carry no recall signal in a query (Chinese; the
#: ``english`` configuration drops English stop words itself).
ZH_STOPWORDS = frozenset(
    "我 我的 你 你的 您 您的 他 她 它 的 了 是 吗 呢 吧 啊 呀 么 什么 多少 哪 哪个 哪些 怎么 怎样 如何 "
    "一下 一个 这个 那个 这 那 请 请问 帮 帮我 给 和 与 及 在 有 没有 就 都 也 还 要 想 能 可以 会 把 被 让 "
    "对 吗？ 嗯 哦 好 好的 谢谢 之前 上次 刚才 现在".split()
)


def has_cjk(text: str) -> bool:
    return CJK_RE.search(text) is not None


def detect_language(text: str) -> Language:
    """``"zh"`` when Chinese characters make up at least a quarter of the letters, else ``"en"``.

    Text with no letters at all (``"13912345678"``) is ``"zh"``: memdesk is Chinese first. Chinese mixed with
    product names or codes (``"iPhone 15 Pro 多少钱"``) stays ``"zh"``.
    """
    cjk = len(CJK_RE.findall(text))
    latin = len(_LATIN_RE.findall(text))
    if cjk == 0 and latin == 0:
        return "zh"
    return "zh" if cjk * 3 >= latin else "en"


def language_of(text: str, language: str | None) -> Language:
    """``language`` when it names Chinese or English (``"zh"``, ``"zh-hans"``, ``"en-US"``), else detected."""
    code = (language or "").lower()
    if code.startswith("zh"):
        return "zh"
    if code.startswith("en"):
        return "en"
    return detect_language(text)


# --- jieba --------------------------------------------------------------------

_jieba_lock = threading.Lock()
_jieba_modules: tuple[ModuleType, ModuleType] | None = None


def _jieba() -> tuple[ModuleType, ModuleType]:
    """jieba and its POS tagger, loaded once per process (the dictionary load must not race)."""
    global _jieba_modules
    if _jieba_modules is None:
        with _jieba_lock:
            if _jieba_modules is None:
                with warnings.catch_warnings():
                    # jieba 0.42 imports pkg_resources, which warns on every modern setuptools.
                    warnings.simplefilter("ignore")
                    import jieba
                    import jieba.posseg as posseg
                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba_modules = (jieba, posseg)
    return _jieba_modules


def cut(text: str) -> list[str]:
    """jieba tokens of ``text`` (accurate mode, HMM on); their concatenation is ``text``."""
    jieba, _ = _jieba()
    return list(jieba.cut(text))


def pos_cut(text: str) -> list[tuple[str, str]]:
    """jieba ``(word, flag)`` pairs (ICTCLAS flags: ``nr`` person, ``ns`` place, ``nt`` organisation, …)."""
    _, posseg = _jieba()
    return [(pair.word, pair.flag) for pair in posseg.cut(text)]


# --- segmentation for full-text search ------------------------------------------


def segment(text: str, *, for_search: bool = True) -> list[str]:
    """Words of ``text``: jieba for Chinese runs, whitespace/punctuation for the rest."""
    if not text:
        return []
    if not has_cjk(text):
        return [w.lower() for w in _WORD.findall(text)]
    jieba, _ = _jieba()
    words = jieba.lcut_for_search(text) if for_search else jieba.lcut(text)
    return [w.lower() for w in words if _WORD.fullmatch(w)]


def document_text(parts: Iterable[str]) -> str:
    """Space-separated segmented text for ``to_tsvector``."""
    words: list[str] = []
    for part in parts:
        words.extend(segment(part))
    return " ".join(words)


def query_terms(query: str) -> list[str]:
    """Distinct meaningful query words, in order."""
    seen: dict[str, None] = {}
    for word in segment(query):
        if word in ZH_STOPWORDS or len(word) == 1 and not word.isalnum():
            continue
        seen.setdefault(word, None)
    return list(seen)
