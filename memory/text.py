"""Text segmentation for the lexical leg of recall.

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
from collections.abc import Iterable
from typing import Any

TS_CONFIG = "english"

_init_lock = threading.Lock()
_jieba: Any = None

_WORD = re.compile(r"[\w\u4e00-\u9fff]+", re.UNICODE)

#: Function words that carry no recall signal in a query (Chinese; the
#: ``english`` configuration drops English stop words itself).
ZH_STOPWORDS = frozenset(
    "我 我的 你 你的 您 您的 他 她 它 的 了 是 吗 呢 吧 啊 呀 么 什么 多少 哪 哪个 哪些 怎么 怎样 如何 "
    "一下 一个 这个 那个 这 那 请 请问 帮 帮我 给 和 与 及 在 有 没有 就 都 也 还 要 想 能 可以 会 把 被 让 "
    "对 吗？ 嗯 哦 好 好的 谢谢 之前 上次 刚才 现在".split()
)


def _get_jieba() -> Any:
    global _jieba
    if _jieba is None:
        with _init_lock:
            if _jieba is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)
                jieba.initialize()
                _jieba = jieba
    return _jieba


def has_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def segment(text: str, *, for_search: bool = True) -> list[str]:
    """Words of ``text``: jieba for Chinese runs, whitespace/punctuation for the rest."""
    if not text:
        return []
    if not has_cjk(text):
        return [w.lower() for w in _WORD.findall(text)]
    jieba = _get_jieba()
    cut = jieba.lcut_for_search(text) if for_search else jieba.lcut(text)
    return [w.lower() for w in cut if _WORD.fullmatch(w)]


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
