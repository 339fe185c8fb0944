"""Text plumbing shared by the memory layer and the chat runtime: CJK ranges, language detection, the one
word segmenter, and segmentation for the lexical leg of recall.

- :data:`CJK` / :data:`CJK_RE`: the Chinese characters memdesk recognises (unified ideographs, extension A,
  compatibility ideographs), the one range every module uses.
- :func:`detect_language`: ``"zh"`` or ``"en"`` for a piece of text.
- rjieba (jieba-rs, jieba's dictionary and HMM in Rust), imported once and lazily (the import builds the
  dictionary: a quarter of a second and ~33 MiB that a process which never segments Chinese does not pay):
  :func:`cut`, :func:`pos_cut`, :func:`segment` and the dictionary look-ups go through :func:`_rjieba`.

PostgreSQL's full-text parser does not split Chinese into words, so memdesk
segments text with rjieba before it reaches ``to_tsvector``: stored memories
in search mode (which also emits the parts of long words, so
「订单号」 is indexed as 订单, 单号 and 订单号) and queries the same way.
English words pass through and the ``english`` configuration stems them.
rjieba keeps a run of letters and digits joined by punctuation whole
(「BCD-470」, 「8.5Gbps」); :func:`segment` splits such a run into the words
text without Chinese is split into (bcd, 470), so a code is indexed and
looked up the same way with or without Chinese around it, and adds a
code's joined form (bcd470) so it is found written either way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache
from types import ModuleType
from typing import Literal

TS_CONFIG = "english"

Language = Literal["zh", "en"]

#: Chinese characters: CJK unified ideographs, extension A and the compatibility ideographs.
CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK_RE = re.compile(f"[{CJK}]")
_LATIN_RE = re.compile(r"[A-Za-z]")
_WORD = re.compile(f"[\\w{CJK}]+", re.UNICODE)
#: Words joined by hyphens ("BCD-470", "e-mail") in text without Chinese, as rjieba keeps them in text with it.
_HYPHENATED = re.compile(r"\w+(?:-\w+)*")
#: A code: letters and digits joined by hyphens, with a letter and a digit ("BCD-470", "WH-1000XM5").
_CODE = re.compile(r"(?=[-A-Za-z0-9]*[A-Za-z])(?=[-A-Za-z0-9]*[0-9])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+")

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


# --- rjieba --------------------------------------------------------------------


def _rjieba() -> ModuleType:
    """rjieba, imported on first use; Python's import lock makes the one dictionary build race-free."""
    import rjieba

    return rjieba


def cut(text: str) -> list[str]:
    """Words of ``text`` (accurate mode, HMM on for words not in the dictionary); their concatenation is
    ``text``. A code such as 「BCD-470」 is one word."""
    return _rjieba().cut(text, hmm=True)


def pos_cut(text: str) -> list[tuple[str, str]]:
    """``(word, flag)`` pairs, ICTCLAS flags (``nr`` person, ``ns`` place, ``nt`` organisation, …); the words
    are :func:`cut`'s and their concatenation is ``text``. A word not in the dictionary gets the flag its
    HMM guessed, so a name may carry the next character with it (「赵磊用」): readers of ``nr`` check the
    word, not only the flag."""
    return _rjieba().tag(text, hmm=True)


def char_frequency(char: str) -> int:
    """How often the dictionary counts the one character ``char`` as a word (1 or 2 when it never does)."""
    return int(_rjieba().suggest_freq(char))


def is_word(word: str) -> bool:
    """Whether ``word`` is in the dictionary: a word :func:`pos_cut` returns and this does not know is the HMM's
    guess, flag included."""
    return bool(_rjieba().has_word(word))


# --- segmentation for full-text search ------------------------------------------


def segment(text: str, *, for_search: bool = True) -> list[str]:
    """Lower-cased words of ``text``: rjieba's for text with Chinese, whitespace and punctuation split the rest.

    A run rjieba keeps whole that is not one word (「BCD-470」, 「3.5」) gives the words it gives without Chinese
    around it, and a code (:data:`_CODE`) its joined form as well — bcd, 470 and bcd470 — so "BCD-470", "BCD470"
    and "470" all find it. The search-mode parts rjieba emits inside such a run (「BCD」) are dropped: its own
    words carry them.
    """
    if not text:
        return []
    if not has_cjk(text):
        return [word for run in _HYPHENATED.findall(text) for word in _index_words(run)]
    tokens = _rjieba().tokenize(text, mode="search" if for_search else "default", hmm=True)
    runs = [(start, end) for word, start, end in tokens if not _WORD.fullmatch(word) and _WORD.search(word)]
    words: list[str] = []
    for word, start, end in tokens:
        if any(s <= start and end <= e and e - s > end - start for s, e in runs):
            continue  # a search-mode part inside a run
        words.extend(_index_words(word))
    return words


def _index_words(run: str) -> list[str]:
    words = [w.lower() for w in _WORD.findall(run)]
    if len(words) > 1 and _CODE.fullmatch(run):
        words.append("".join(words))
    return words


def document_text(parts: Iterable[str]) -> str:
    """Space-separated segmented text for ``to_tsvector``."""
    words: list[str] = []
    for part in parts:
        words.extend(segment(part))
    return " ".join(words)


@cache
def stop_words(language: Language) -> frozenset[str]:
    """sumy's stop words of ``language`` ("zh" or "en"), lower-cased: the function words of a text."""
    from sumy.utils import get_stop_words

    return frozenset(w.lower() for w in get_stop_words("chinese" if language == "zh" else "english"))


def query_terms(query: str) -> list[str]:
    """Distinct meaningful query words, in order."""
    seen: dict[str, None] = {}
    for word in segment(query):
        if word in ZH_STOPWORDS or len(word) == 1 and not word.isalnum():
            continue
        seen.setdefault(word, None)
    return list(seen)
