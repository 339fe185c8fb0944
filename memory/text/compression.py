"""Semantic compression of memory content (S3): keep the facts, drop the noise, never slice (long: one pipeline).

A memory's content is at most 150 characters and a snapshot at most 200, but the limit is reached by removing
what carries no fact — fillers, politeness, then whole low-value clauses, then low-value words — never by
``text[:n]``. Names, places, numbers, codes, amounts, dates, negation and conditions are kept; :func:`entities`
lists exactly the names, numbers and codes the compressor promises to keep when they fit.

Secrets are redacted (:mod:`memory.text.redaction`) before anything else, so nothing here ever returns one.

Word segmentation, POS tags and language detection come from :mod:`memory.text.language`. Everything is pure and
deterministic; no database.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from memory.text.language import CJK as _CJK
from memory.text.language import CJK_RE as _CJK_RE
from memory.text.language import Language, char_frequency, is_word, pos_cut
from memory.text.language import language_of as _language
from memory.text.language import stop_words as _stop_words
from memory.text.redaction import PLACEHOLDER_RE, redact, redact_obj

__all__ = [
    "SURNAMES",
    "clean",
    "compress",
    "compress_tool_result",
    "entities",
    "is_chinese_name",
    "is_filler",
    "name_in",
]

ELLIPSIS = "…"

# --------------------------------------------------------------------------------------------------------------
# Entities: what compression promises to keep
# --------------------------------------------------------------------------------------------------------------

_A = r"(?<![A-Za-z0-9_])"  # ASCII word start: \b is useless next to CJK, which \w also matches
_Z = r"(?![A-Za-z0-9_])"
_MONTHS = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sept?(?:ember)?"
    r"|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)
_WEEKDAY_ZH = r"[一二三四五六日天]"
_ENTITY_RES: tuple[re.Pattern[str], ...] = (
    re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"),  # e-mail
    re.compile(r"[¥￥$€£]\s?\d[\d,]*(?:\.\d+)?(?:\s?[万千kK])?"),  # amount, symbol first
    re.compile(r"(?:USD|CNY|RMB|EUR|GBP|US\$)\s?\d[\d,]*(?:\.\d+)?"),
    re.compile(
        r"\d[\d,]*(?:\.\d+)?\s?(?:元|块钱?|美元|美金|欧元|英镑|人民币|万元?|"
        r"(?:dollars?|bucks|yuan|euros?|pounds?|USD|CNY|RMB|EUR|GBP)" + _Z + ")"
    ),
    re.compile(r"\d{4}\s?[-/.年]\s?\d{1,2}\s?[-/.月]\s?\d{1,2}\s?[日号]?(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?"),
    re.compile(r"\d{1,2}\s?月\s?\d{1,2}\s?[日号]|\d{1,2}\s?月份?|\d{4}\s?年"),
    re.compile(r"(?:上午|下午|晚上|早上|中午|凌晨|傍晚)?\d{1,2}\s?[点时](?:\d{1,2}\s?分|半|钟)?"),
    re.compile(r"\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp]\.?[Mm]\.?)?"),
    re.compile(_A + _MONTHS + r"\.?\s\d{1,2}(?:st|nd|rd|th)?(?:,?\s\d{4})?" + _Z),
    re.compile(_A + r"\d{1,2}(?:st|nd|rd|th)?\s(?:of\s)?" + _MONTHS + r"(?:,?\s\d{4})?" + _Z),
    re.compile(
        r"大后天|后天|明天|今天|昨天|前天|今晚|明早|明晚|"
        rf"(?:下|上|本|这)(?:周|个?星期|个?礼拜){_WEEKDAY_ZH}?|(?:下|上)个?月|本月|这个月|今年|去年|明年|"
        rf"(?:周|星期|礼拜){_WEEKDAY_ZH}"
    ),
    re.compile(
        _A + r"(?:today|tomorrow|yesterday|tonight|(?:next|last|this)\s(?:week|month|year|weekend|"
        r"Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)|"
        r"\d+\s(?:days?|weeks?|months?|years?|hours?|minutes?)\s(?:ago|later)|"
        r"in\s\d+\s(?:days?|weeks?|months?|years?|hours?|minutes?))" + _Z,
        re.IGNORECASE,
    ),
    re.compile(r"\+?\d(?:[ -]?\d){7,}"),  # phone numbers and other long digit groups
    re.compile(r"\d+(?:\.\d+)?\s?%"),
    # Quantities with their unit: 「7 天内」 without 天 is a different fact.
    re.compile(
        r"\d+(?:\.\d+)?\s?(?:个)?(?:工作日|小时|分钟|天|周|星期|月|年|岁|次|节|件|台|吨|期|张|瓶|G|GB|Gbps|TB|MB)"
    ),
    re.compile(
        _A + r"\d+(?:\.\d+)?\s(?:(?:business\s)?days?|hours?|minutes?|weeks?|months?|years?|items?|times?|GB|MB)" + _Z,
        re.IGNORECASE,
    ),
    re.compile(r"\d+(?:[.,]\d+)+"),
    re.compile(_A + r"#?(?=[A-Za-z0-9_/-]*\d)[A-Za-z0-9]+(?:[-_/][A-Za-z0-9]+)*" + _Z),  # codes and numbers
)
_URL_RE = re.compile(r"https?://\S+|www\.\S+")
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9'’&-]*[A-Za-z0-9]|[A-Za-z]")
_SENTENCE_START_SKIP = " \t\"'“‘(（「『*-"
# Capitalised for emphasis or address, not names: "Thanks, Bye!", "SO frustrating".
_INTERJECTIONS = frozenset(
    "bye goodbye thanks thank thx ttyl hey hi hello wow yeah yep yup yes ok okay congrats congratulations sorry "
    "please lol lmao omg btw tbh imo haha cool great awesome nice sure oh ah hmm um dear".split()
)
_PROPER_FLAGS = ("nr", "nrfg", "nrt", "ns", "nt", "nz")
# The ~200 most common Chinese surnames. The tagger tags plenty of ordinary words ``nr`` (张券, 太少); a person's
# name is only believed when it starts with a surname.
SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆"
    "汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤常温康施文牛樊葛邢安齐易乔伍庞"
    "颜倪庄聂章鲁岳翟殷詹申欧耿关兰焦俞左柳甘祝包宁尚符舒阮柯纪梅童凌毕单季裴霍涂成苗谷盛曲翁冉骆蓝路游辛靳管柴蒙鲍华喻祁"
    "蒲房滕屈饶解牟艾尤阳时穆农司卓古吉缪简车项连芦麦褚娄窦戚岑景党宫费卜冷晏席卫米柏宗瞿桂全佟应臧闵苟邬边卞姬师和仇栾隋"
    "商刁沙荣巫寇桑郎甄丛仲虞敖巩明佘池查麻苑迟邝"
) | frozenset({"欧阳", "司马", "诸葛", "上官", "东方", "皇甫", "尉迟", "慕容", "令狐", "公孙", "夏侯", "长孙", "宇文"})
_NOT_IN_NAMES = frozenset("您你我他她它们的了吗呢吧啊呀是在有")


def _at_sentence_start(text: str, index: int) -> bool:
    position = index - 1
    while position >= 0 and text[position] in _SENTENCE_START_SKIP:
        position -= 1
    return position < 0 or text[position] in ".!?。！？\n…"


def _proper_spans(text: str) -> list[tuple[int, int]]:
    """Capitalised words that are not sentence-initial, camel-case names (iPhone) and acronyms, joined into runs."""
    runs: list[tuple[int, int, bool]] = []  # (start, end, has a word that is a name on its own)
    for match in _WORD_RE.finditer(text):
        word = match.group(0)
        lowered = word.lower()
        if word == "I" or word.startswith(("I'", "I’")) or len(word) < 2 or lowered in _INTERJECTIONS:
            continue
        inner_upper = any(char.isupper() for char in word[1:])
        if not (inner_upper or (word[0].isupper() and not _at_sentence_start(text, match.start()))):
            continue
        # A capitalised stop word ("SO frustrating", "New") is a name only as part of a longer one ("New York").
        strong = not (lowered in _stop_words("en") and lowered not in ("us", "may"))
        if runs and text[runs[-1][1] : match.start()] == " ":
            runs[-1] = (runs[-1][0], match.end(), runs[-1][2] or strong)
        else:
            runs.append((match.start(), match.end(), strong))
    return [(start, end) for start, end, strong in runs if strong]


def _chinese_name_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    offset = 0
    for word, flag in pos_cut(text):
        if flag in _PROPER_FLAGS and len(word) >= 2 and _CJK_RE.search(word):
            if flag != "nr" or is_chinese_name(word):
                spans.append((offset, offset + len(word)))
        offset += len(word)
    return spans


def is_chinese_name(word: str) -> bool:
    """Plausible Chinese personal name: 2–4 characters, a known surname first, no pronoun or particle inside."""
    if not 2 <= len(word) <= 4 or not all(_CJK_RE.match(char) for char in word):
        return False
    if len(set(word)) == 1 or any(char in _NOT_IN_NAMES for char in word):
        return False
    return word[0] in SURNAMES or word[:2] in SURNAMES


#: Flags of a character that may start the next clause rather than end a name: prepositions, adverbs,
#: conjunctions, pronouns, particles (``zg``: 您, 啊) and verbs.
_CLAUSE_START_FLAGS = frozenset({"p", "d", "c", "r", "y", "zg", "u", "uj", "ul", "uz", "ud", "ug", "uv"})


def name_in(word: str, *, followed: bool) -> str:
    """The personal name in ``word``, a word the tagger returned where a name is expected. ``followed``: more
    Chinese follows ``word`` in its clause.

    The tagger's HMM runs a name it does not know into the character after it (「张伟用这个号」 gives
    「张伟用」, 「林晓雯想问」 「林晓雯想」). A name is a surname (:data:`SURNAMES`) and one or two characters,
    so a word that starts with a surname, is not in the dictionary and is longer than that is cut to it. In a
    word of exactly that length the last character may start the next clause or end the name: a function word or
    a verb ends real names too (陈永刚, 李运发, 徐文亮), so it is dropped only when the given name is no dictionary
    word (王建国 is one) and the character is more common on its own than the given name's first (用 against 伟
    in 「张伟用」; 亮 is rarer than 文 in 「徐文亮」). Any other word is returned as it is.
    """
    surname = 2 if word[:2] in SURNAMES else 1 if word[:1] in SURNAMES else 0
    if not surname or len(word) <= surname + 1 or is_word(word):
        return word
    if len(word) > surname + 2:
        return word[: surname + 2]
    if not followed or is_word(word[surname:]):
        return word
    (_, flag), *_ = pos_cut(word[-1])
    starts_clause = flag in _CLAUSE_START_FLAGS or flag.startswith("v")
    if starts_clause and char_frequency(word[-1]) > char_frequency(word[surname]):
        return word[:-1]
    return word


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _entity_spans(text: str) -> list[tuple[int, int]]:
    """Merged character spans of the entities of an already redacted, normalised text."""
    blocked = [m.span() for m in _URL_RE.finditer(text)] + [m.span() for m in PLACEHOLDER_RE.finditer(text)]
    spans = [m.span() for pattern in _ENTITY_RES for m in pattern.finditer(text)]
    spans += _proper_spans(text)
    if _CJK_RE.search(text):
        spans += _chinese_name_spans(text)
    spans = [(s, e) for s, e in spans if e > s and not any(s < be and bs < e for bs, be in blocked)]
    result = []
    for start, end in _merge(spans):
        # Trim the whitespace a pattern may have swallowed at either edge.
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            result.append((start, end))
    return result


def _normalise(text: str) -> str:
    """Collapse whitespace; a line break becomes a sentence end so the lines do not run into each other."""
    text = text.replace("\u3000", " ").replace("\r", "\n")

    def line_break(match: re.Match[str]) -> str:
        before = text[match.start() - 1] if match.start() else ""
        if not before or before in "。！？!?.;；，,：:":
            return " " if before in ".!?;,:" else ""
        return "。" if _CJK_RE.match(before) else ". "

    text = re.sub(r"[ \t]*\n[\s]*", line_break, text.strip())
    return re.sub(r"[ \t\f\v]+", " ", text).strip()


def entities(text: str) -> list[str]:
    """The names, places, numbers, codes, amounts, dates, e-mails and phone numbers in ``text``, in order, unique.

    Contract: every string returned survives :func:`compress` whenever the entities together fit in its limit.
    Secrets are not entities: the text is redacted first, so an API key is never listed (and never kept).
    Sentence-initial capitalised English words are not treated as names (``"Thanks"`` is not a person).
    """
    normalised = _normalise(redact(text))
    seen: dict[str, None] = {}
    for start, end in _entity_spans(normalised):
        seen.setdefault(normalised[start:end], None)
    return list(seen)


# --------------------------------------------------------------------------------------------------------------
# Cleaning: fillers, politeness, cause/effect rewrite
# --------------------------------------------------------------------------------------------------------------

_NEGATION_ZH = re.compile(r"[不没未别无勿非莫]")
_NEGATION_EN = re.compile(
    r"(?<![A-Za-z])(?:not|no|never|nothing|none|nobody|neither|nor|without|cannot|[A-Za-z]+n['’]t)(?![A-Za-z])",
    re.IGNORECASE,
)
_CONDITION_ZH = re.compile(r"如果|若是?|假如|要是|除非|只要|一旦|否则|的话")
_CONDITION_EN = re.compile(r"(?<![A-Za-z])(?:if|unless|otherwise|provided|in case|as long as)(?![A-Za-z])", re.I)
_CONDITION_START = re.compile(
    r"^(?:如果|若是?|假如|要是|除非|只要|一旦|(?:if|unless|provided|in case|as long as|when|once)(?![A-Za-z]))",
    re.IGNORECASE,
)

_FILLER_START_ZH = re.compile(
    r"^(?:(?:嗯+|呃+|额+|啊+|哦+|噢+|诶|哎+|唉|喂|(?:那个|就是|然后|亲)(?=[，,、\s]|$)|这个嘛|就是说|然后呢|那么|"
    r"其实|说实话|老实说|怎么说呢|我觉得|我感觉|我认为|你好|您好|请问|麻烦(?:您|你们|你)?|亲爱的)[，,、\s]*)+"
)
_FILLER_ANY_ZH = re.compile(r"嗯+|呃+|其实|说实话|老实说|怎么说呢|你知道吗|一下|哈哈+|呵呵+|嘿嘿+")
_PARTICLE_END_ZH = re.compile(f"(?<=[{_CJK}])(?<![酒网])[呢吧呀啦嘛呗哈哦噢啊]+$")
_FILLER_START_EN = re.compile(
    r"^(?:(?:well|so|oh|ok|okay|yeah|yes|hey|hi|hello|um+|uh+|erm|hmm+|ah|wow|look|listen|anyway|"
    r"alright|right|sure)(?![A-Za-z'])[\s,!.]*)+",
    re.IGNORECASE,
)
_FILLER_ANY_EN = re.compile(
    r"(?<![A-Za-z'])(?:um+|uh+|erm|hmm+|actually|basically|literally|honestly|kindly|please|really|very|totally|"
    r"truly|you know|I mean|I think(?: that)?|I guess|I believe|I feel like|kind of|sort of)(?![A-Za-z'])[,]?\s*",
    re.IGNORECASE,
)
_POLITE_ZH = re.compile(
    r"(?:请?稍后(?:再)?(?:重试|再试|尝试|再来)|请?稍等(?:片刻)?|请?稍候|请耐心等待|"
    r"(?:感谢|谢谢)(?:您|你)?(?:的)?(?:耐心|理解|支持|配合)?(?:等待)?|多谢|"
    r"(?:给您|给你)?带来(?:的)?不便(?:[，,]?敬请谅解)?|敬请谅解|请谅解|非常抱歉|很抱歉|抱歉|不好意思|对不起|"
    r"祝您?(?:生活)?愉快|(?:请问)?(?:您)?还有(?:什么|其他)(?:问题)?(?:需要|可以)?(?:我)?(?:帮|为)(?:您|你)(?:的|做的)?(?:吗)?|"
    r"有什么(?:可以)?帮(?:您|你)的?(?:吗)?|好的|好|嗯|收到|明白|了解|麻烦了|辛苦了|再见|拜拜|您好|你好|喂|"
    r"不客气|不用谢|没关系|应该的)"
    r"[呢吧呀啦嘛哦啊的了]*"
)
_POLITE_EN = re.compile(
    r"(?:please )?(?:try again later|wait a moment|hold on)|"
    r"thank(?:s| you)(?: (?:so|very) much| a lot)?(?: for (?:your|the) (?:patience|understanding|help|support))?|"
    r"(?:we )?(?:apologi[sz]e|sorry) for (?:the|any) inconvenience|sorry|"
    r"have a (?:nice|great|good) (?:day|one|evening|weekend)|"
    r"(?:is there )?anything else (?:I|we) can (?:help|do)(?: you)?(?: with)?|"
    r"let (?:me|us) know if you need anything else|you(?:'re| are) welcome|no problem|"
    r"(?:it's )?(?:good|nice|great) to (?:see|meet|hear from) you|how are you(?: doing)?|how have you been|"
    r"ok|okay|sure|got it|bye|goodbye|great|cool|awesome|wow|congrats|congratulations",
    re.IGNORECASE,
)
_CAUSE_ZH = re.compile(r"^(?:因为|由于)\s*")
_EFFECT_ZH = re.compile(r"^(?:所以|因此|导致|造成|从而|于是|结果)\s*")
_CAUSE_EN = re.compile(r"^(?:because(?: of)?|due to|owing to)\s+", re.IGNORECASE)
_EFFECT_EN = re.compile(r"^(?:so|therefore|thus|as a result|then)(?![A-Za-z])[\s,]*", re.IGNORECASE)
_ERROR_CODE_ZH = re.compile(
    r"\s*(?:故障|错误|异常|报错|出错)\s*[（(]\s*(?:错误码|错误代码|状态码|代码|code)\s*[:：]?\s*([A-Za-z0-9_-]+)\s*[)）]",
    re.IGNORECASE,
)
_ERROR_CODE_EN = re.compile(
    r"\s*(?:failure|error|outage|fault|failed)\s*\(\s*(?:error code|status code|error|code|status)\s*:?\s*"
    r"([A-Za-z0-9_-]+)\s*\)",
    re.IGNORECASE,
)

_WEAK_DELIMS = "，,；;：:"
_STRONG_DELIMS = "。！？!?."
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "no", "approx"})


@dataclass
class _Clause:
    body: str
    delim: str


def _split_clauses(text: str) -> list[_Clause]:
    """Split at clause punctuation outside brackets; each clause keeps the punctuation that ended it."""
    clauses: list[_Clause] = []
    depth = 0
    start = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char in "（(「『[【":
            depth += 1
        elif char in "）)」』]】":
            depth = max(0, depth - 1)
        elif depth == 0 and _is_delimiter(text, index):
            end = index + 1
            while end < len(text) and text[end] in _STRONG_DELIMS + "…" and text[end] != " ":
                end += 1  # keep "?!" or "..." together
            clauses.append(_Clause(text[start:index].strip(), text[index:end]))
            start = index = end
            continue
        index += 1
    if text[start:].strip():
        clauses.append(_Clause(text[start:].strip(), ""))
    return clauses


def _is_delimiter(text: str, index: int) -> bool:
    char = text[index]
    after = text[index + 1] if index + 1 < len(text) else ""
    if char in "，；。！？…\n":
        return True
    if char in ",;":
        return after in ("", " ")
    if char in "!?":
        return True
    if char == ".":
        if after not in ("", " ") and not _CJK_RE.match(after):
            return False  # 25.50, example.com, e.g.
        word = re.search(r"([A-Za-z.]+)$", text[:index])
        return not (word and word.group(1).lower() in _ABBREVIATIONS)
    return False


def _is_cjk_delim(delim: str) -> bool:
    return bool(delim) and not delim[0].isascii()


def _join(clauses: list[_Clause]) -> str:
    parts: list[str] = []
    for index, clause in enumerate(clauses):
        delim = clause.delim
        if index == len(clauses) - 1:
            delim = delim.rstrip(_WEAK_DELIMS)
        parts.append(clause.body + delim)
        if index < len(clauses) - 1 and not _is_cjk_delim(delim):
            parts.append(" ")
    return _tidy("".join(parts))


def _tidy(text: str) -> str:
    text = re.sub(r"\s+([,.;:!?，。；：！？、）)])", r"\1", text)
    text = re.sub(r"([（(])\s+", r"\1", text)
    text = re.sub(r"([，,；;、])(?:\s*[，,；;、])+", r"\1", text)
    text = re.sub(r" {2,}", " ", text)
    return text.strip().lstrip("，,；;、：:。.")


# Only words that never begin an entity are capitalised after a filler is dropped: "last weekend" is a date and
# must survive compression letter for letter.
_CAPITALISABLE = re.compile(r"(?:my|we|our|the|a|an|it|it's|there|they|he|she|you|your|his|her|their|i)(?![A-Za-z'])")


def _strip_fillers(body: str) -> str:
    original = body
    body = _FILLER_START_ZH.sub("", body)
    body = _FILLER_START_EN.sub("", body)
    body = _FILLER_ANY_ZH.sub("", body)
    body = _FILLER_ANY_EN.sub("", body)
    body = _FILLER_START_ZH.sub("", body.strip())
    body = _tidy(_PARTICLE_END_ZH.sub("", body.strip()))
    if _CAPITALISABLE.match(body) and original[:1].isupper():
        body = body[0].upper() + body[1:]  # "Actually, my order…" → "My order…"
    return body


def _is_politeness(body: str) -> bool:
    bare = body.strip(" !.,，。！～~")
    return bool(bare) and bool(_POLITE_ZH.fullmatch(bare) or _POLITE_EN.fullmatch(bare))


def _rewrite_cause(clauses: list[_Clause]) -> list[_Clause]:
    """「因为X，导致Y」 → 「Y，原因：X」 (and "because X, Y" → "Y, cause: X"): the effect is the fact, so it leads."""
    result: list[_Clause] = []
    index = 0
    while index < len(clauses):
        clause = clauses[index]
        nxt = clauses[index + 1] if index + 1 < len(clauses) else None
        if nxt is not None and clause.delim in _WEAK_DELIMS:
            for cause_re, effect_re, template in (
                (_CAUSE_ZH, _EFFECT_ZH, "{effect}，原因：{cause}"),
                (_CAUSE_EN, _EFFECT_EN, "{effect}, cause: {cause}"),
            ):
                if cause_re.match(clause.body):
                    cause = cause_re.sub("", clause.body)
                    effect = effect_re.sub("", nxt.body)
                    if cause and effect:
                        result.append(_Clause(template.format(effect=effect, cause=cause), nxt.delim))
                        index += 2
                        break
            else:
                result.append(clause)
                index += 1
            continue
        result.append(clause)
        index += 1
    return result


def _clean_clauses(text: str) -> list[_Clause]:
    clauses: list[_Clause] = []
    for clause in _split_clauses(_normalise(redact(text))):
        body = _ERROR_CODE_ZH.sub(r" \1 错误", clause.body)
        body = _ERROR_CODE_EN.sub(r" \1 error", body)
        body = _strip_fillers(body)
        if not body or _is_politeness(body) or any(kept.body == body for kept in clauses):  # repeats add nothing
            # A dropped sentence end must not leave the previous sentence dangling on a comma.
            if clauses and clause.delim and clause.delim[0] in _STRONG_DELIMS and clauses[-1].delim in _WEAK_DELIMS:
                clauses[-1].delim = clause.delim
            continue
        clauses.append(_Clause(body, clause.delim))
    clauses = _rewrite_cause(clauses)
    if clauses and _CAPITALISABLE.match(clauses[0].body) and re.match(r"\W*[A-Z]", text):
        clauses[0].body = clauses[0].body[0].upper() + clauses[0].body[1:]  # "Hi, my name…" → "My name…"
    return clauses


def clean(text: str, *, language: str | None = None) -> str:
    """Redact secrets, normalise whitespace, drop fillers and politeness, put effects before causes.

    Facts are never removed by cleaning. If nothing but filler is left (「好的，谢谢」), the redacted,
    normalised text is returned as it is, so a caller never gets an empty string for non-empty input.
    ``language`` is accepted for symmetry with :func:`compress`; the rules of both languages apply to mixed text.
    """
    _language(text, language)
    clauses = _clean_clauses(text)
    return _join(clauses) if clauses else _normalise(redact(text))


def is_filler(text: str) -> bool:
    """True when ``text`` carries nothing but fillers and politeness (「好的，谢谢」, "Thanks, bye!")."""
    return not _clean_clauses(text)


# --------------------------------------------------------------------------------------------------------------
# Compression
# --------------------------------------------------------------------------------------------------------------

_EN_TOKEN_RE = re.compile(r"\s+|[A-Za-z0-9]+(?:['’.\-@:/][A-Za-z0-9]+)*|[^\sA-Za-z0-9]")
_ZERO_VALUE_ZH = frozenset({"u", "uj", "ul", "uz", "ud", "ug", "uv", "y", "e", "o"})
_LOW_VALUE_ZH = frozenset({"d", "c", "p", "zg", "q", "k", "h", "dg"})
_MID_VALUE_ZH = frozenset({"a", "ad", "an", "b", "z", "f", "r", "s", "t", "mq"})
_ARTICLES = frozenset({"a", "an", "the"})


@dataclass
class _Token:
    text: str
    value: int  # lower is dropped first; -1: whitespace or punctuation, never chosen
    protected: bool
    dropped: bool = False


@dataclass
class _Unit:
    """One or more clauses that are kept or dropped together (a condition stays with its consequence)."""

    clauses: list[_Clause]
    position: int
    score: float = 0.0
    has_entity: bool = False


def _protected_spans(body: str, keep: list[str]) -> list[tuple[int, int]]:
    spans = [m.span() for m in _NEGATION_ZH.finditer(body)]
    spans += [m.span() for m in _NEGATION_EN.finditer(body)]
    spans += [m.span() for m in _CONDITION_ZH.finditer(body)]
    spans += [m.span() for m in _CONDITION_EN.finditer(body)]
    spans += [m.span() for m in re.finditer(r"原因：|cause:", body)]
    for entity in keep:
        spans += [m.span() for m in re.finditer(re.escape(entity), body)]
    return _merge(spans)


def _atomic_spans(body: str, keep: list[str]) -> list[tuple[int, int]]:
    """Spans that must never be split into tokens: entities, URLs and placeholders."""
    spans = [m.span() for m in _URL_RE.finditer(body)] + [m.span() for m in PLACEHOLDER_RE.finditer(body)]
    for entity in keep:
        spans += [m.span() for m in re.finditer(re.escape(entity), body)]
    return _merge(spans)


def _tokenize(body: str, language: Language, keep: list[str]) -> list[_Token]:
    if language == "zh":
        raw = pos_cut(body)
    else:
        raw = [(m.group(0), "") for m in _EN_TOKEN_RE.finditer(body)]
    protected = _protected_spans(body, keep)
    atomic = _atomic_spans(body, keep)
    stop_words = _stop_words(language)
    tokens: list[_Token] = []
    offset = 0
    current_atom: tuple[int, int] | None = None
    for word, flag in raw:
        start, end = offset, offset + len(word)
        offset = end
        atom = next(((s, e) for s, e in atomic if start < e and s < end), None)
        if atom is not None and atom == current_atom and tokens:
            tokens[-1].text += word
            tokens[-1].protected = tokens[-1].protected or any(start < e and s < end for s, e in protected)
            continue
        current_atom = atom
        is_protected = any(start < e and s < end for s, e in protected)
        tokens.append(_Token(word, _token_value(word, flag, language, stop_words, atom is not None), is_protected))
    return tokens


def _token_value(word: str, flag: str, language: Language, stop_words: frozenset[str], atomic: bool) -> int:
    if atomic:
        return 2  # a URL or a placeholder that is not an entity: droppable, but as a whole
    if not word.strip() or not re.search(r"\w", word):
        return -1
    lowered = word.lower()
    if language == "zh" and _CJK_RE.search(word):
        if flag in _ZERO_VALUE_ZH:
            return 0
        value = 1 if flag in _LOW_VALUE_ZH else 2 if flag in _MID_VALUE_ZH else 3
        return min(value, 1) if word in stop_words else value
    if lowered in _ARTICLES:
        return 0
    if lowered in stop_words:
        return 1
    if lowered.endswith("ly"):
        return 2
    return 3


def _render(tokens: list[_Token]) -> str:
    return _tidy("".join(token.text for token in tokens if not token.dropped))


def _render_units(units: list[_Unit], tokens: dict[int, list[list[_Token]]]) -> str:
    clauses: list[_Clause] = []
    for unit in units:
        for index, clause in enumerate(unit.clauses):
            body = _render(tokens[unit.position][index]) if unit.position in tokens else clause.body
            if body:
                clauses.append(_Clause(body, clause.delim))
    return _join(clauses) if clauses else ""


def _score(unit: _Unit, keep: list[str]) -> None:
    text = " ".join(clause.body for clause in unit.clauses)
    found = sum(1 for entity in keep if entity in text)
    unit.has_entity = found > 0
    unit.score = (
        3.0 * found
        + 2.0 * bool(_NEGATION_ZH.search(text) or _NEGATION_EN.search(text))
        + 2.0 * bool(_CONDITION_ZH.search(text) or _CONDITION_EN.search(text))
        + 1.0 * any(clause.delim[:1] in ("?", "？") for clause in unit.clauses)
        + 0.5 * (unit.position == 0)
    )


def _units(clauses: list[_Clause]) -> list[_Unit]:
    units: list[_Unit] = []
    pending: list[_Clause] = []
    for clause in clauses:
        pending.append(clause)
        if _CONDITION_START.match(clause.body) and clause.delim in _WEAK_DELIMS:
            continue
        units.append(_Unit(pending, len(units)))
        pending = []
    if pending:
        units.append(_Unit(pending, len(units)))
    return units


def _truncate(tokens: list[_Token], limit: int) -> str:
    """Last resort: whole tokens from the start, then an ellipsis, all within ``limit``."""
    kept: list[_Token] = []
    for token in (t for t in tokens if not t.dropped):
        candidate = _render([*kept, token])
        if len(candidate) + len(ELLIPSIS) > limit:
            break
        kept.append(token)
    text = _render(kept).rstrip(_WEAK_DELIMS + " ")
    return (text + ELLIPSIS) if text else ELLIPSIS[:limit]


def compress(text: str, *, limit: int = 150, language: str | None = None) -> str:
    """Compress ``text`` to at most ``limit`` characters without losing its facts.

    Contract:

    * ``len(result) <= limit``, always; secrets are redacted; the same input gives the same output.
    * Text that fits after :func:`clean` is returned cleaned, with every fact.
    * Otherwise, in order, until it fits: drop whole clauses that carry no entity (lowest value first — negation,
      conditions and questions are worth more); drop low-value words (particles, articles, adverbs, then other
      stop words), never an entity, a negation or a condition; drop whole clauses even if they carry entities
      (fewest entities and latest first); and only then end at a token boundary with "…" (counted in ``limit``).
    * Never a cut inside a word, a code, a number, a URL or a placeholder.
    * Every string of :func:`entities` (``text``) survives as long as the entities fit in ``limit`` together.

    ``language`` (``"zh"``/``"en"``, any other value or ``None``: detected) chooses the word segmentation.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    lang = _language(text, language)
    clauses = _clean_clauses(text)
    if not clauses:
        fallback = _normalise(redact(text))
        if len(fallback) <= limit:
            return fallback
        clauses = _split_clauses(fallback)
        if not clauses:
            return ""
    joined = _join(clauses)
    if len(joined) <= limit:
        return joined

    keep = sorted(entities(text), key=len, reverse=True)
    units = _units(clauses)
    for unit in units:
        _score(unit, keep)

    # 1. Whole clauses without entities, least valuable first (later first on a tie).
    kept = list(units)
    for unit in sorted((u for u in units if not u.has_entity), key=lambda u: (u.score, -u.position)):
        if len(_render_units(kept, {})) <= limit or len(kept) == 1:
            break
        kept.remove(unit)
    result = _render_units(kept, {})
    if len(result) <= limit:
        return result

    # 2. Low-value words inside the remaining clauses.
    tokens = {unit.position: [_tokenize(clause.body, lang, keep) for clause in unit.clauses] for unit in kept}
    candidates = [
        (token.value, -unit.position, -index, -order, token)
        for unit in kept
        for index, clause_tokens in enumerate(tokens[unit.position])
        for order, token in enumerate(clause_tokens)
        if token.value >= 0 and not token.protected
    ]
    candidates.sort(key=lambda c: c[:4])
    excess = len(result) - limit
    for *_, token in candidates:
        token.dropped = True
        excess -= len(token.text)
        if excess <= 0:
            result = _render_units(kept, tokens)
            if len(result) <= limit:
                return result
            excess = len(result) - limit
    result = _render_units(kept, tokens)
    if len(result) <= limit:
        return result

    # 3. Whole clauses with entities: the facts no longer fit together, keep the richest.
    for unit in sorted(kept, key=lambda u: (u.score, -u.position)):
        if len(kept) == 1:
            break
        kept.remove(unit)
        result = _render_units(kept, tokens)
        if len(result) <= limit:
            return result

    # 4. One clause left and still too long.
    flat = [token for clause_tokens in tokens[kept[0].position] for token in clause_tokens]
    return _truncate(flat, limit)


# --------------------------------------------------------------------------------------------------------------
# Tool results
# --------------------------------------------------------------------------------------------------------------

_NOISE_KEY = re.compile(
    r"(?:^|_)(?:trace|traceback|stack|stacktrace|debug|log|logs|headers|raw|html|meta|metadata|links|"
    r"request_id|trace_id|span_id|correlation_id|etag|signature|checksum|hash|icon|image|thumbnail|avatar)(?:$|_)",
    re.IGNORECASE,
)
_FACT_FIELD = re.compile(
    r"status|state|result|error|err$|message|msg|reason|code|(?:^|_)id$|_no$|number|tracking|order|eta|date|_at$|"
    r"expire|deadline|amount|total|refund|balance|coupon|completed|failed",
    re.IGNORECASE,
)
_USEFUL_FIELD = re.compile(
    r"num$|price|cost|fee|currency|time|count|qty|quantity|name|phone|email|address|sku|model|remaining",
    re.IGNORECASE,
)
_LONG_URL = 40
_FIELD_VALUE_LIMIT = 60


def _flatten(obj: Any, path: str, out: list[tuple[str, Any]]) -> None:
    if isinstance(obj, dict):
        for key, value in obj.items():
            key_text = str(key)
            if _NOISE_KEY.search(key_text) or key_text.startswith("_"):
                continue
            _flatten(value, f"{path}.{key_text}" if path else key_text, out)
    elif isinstance(obj, list | tuple):
        if obj and all(not isinstance(item, dict | list | tuple) for item in obj):
            out.append((path, ",".join(_scalar(item) for item in obj if _scalar(item))))
        else:
            for index, item in enumerate(obj):
                _flatten(item, f"{path}[{index}]", out)
    else:
        out.append((path, obj))


def _scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        text = _normalise(value)
        if PLACEHOLDER_RE.fullmatch(text) or (_URL_RE.fullmatch(text) and len(text) > _LONG_URL):
            return ""
        return text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return str(value)


def compress_tool_result(obj: Any, *, limit: int = 200) -> str:
    """Render a tool result compactly as ``key=value; key=value`` within ``limit`` characters.

    ``obj`` is a dict, a list or a JSON string (any other string is compressed as text). Secrets are redacted and
    the redacted fields left out; nulls, empty values, long URLs (over 40 characters) and debug fields (trace,
    stack, headers, request_id, …) are dropped. Nested keys are named by their leaf (``eta``) unless two leaves
    collide, then by path (``items[0].sku``). Fields that carry a fact — status, ids, codes, amounts, dates,
    errors, messages — win the space first; the kept fields stay in their original order; long values are
    compressed with :func:`compress`. Deterministic; ``len(result) <= limit``.
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    if isinstance(obj, bytes):
        obj = obj.decode("utf-8", errors="replace")
    if isinstance(obj, str):
        try:
            obj = json.loads(obj)
        except ValueError:
            return compress(obj, limit=limit)
        if isinstance(obj, str):
            return compress(obj, limit=limit)
    flat: list[tuple[str, Any]] = []
    _flatten(redact_obj(obj), "", flat)

    leaves = [re.sub(r"^.*\.", "", path) if path else "value" for path, _ in flat]
    fields: list[tuple[int, str, str, int]] = []  # (order, name, value, priority: higher is kept first)
    for order, ((path, value), leaf) in enumerate(zip(flat, leaves, strict=True)):
        text = _scalar(value)
        if not text:
            continue
        name = leaf if leaves.count(leaf) == 1 else (path or "value")
        if len(text) > _FIELD_VALUE_LIMIT:
            text = compress(text, limit=_FIELD_VALUE_LIMIT)
        priority = 3 if _FACT_FIELD.search(leaf) else 2 if _USEFUL_FIELD.search(leaf) else 1
        if "[" in path:
            priority -= 1  # one line item matters less than the result's own fields
        fields.append((order, name, text, priority))

    chosen: list[tuple[int, str, str, int]] = []
    for field in sorted(fields, key=lambda f: (-f[3], f[0])):
        trial = sorted([*chosen, field])
        if len(_render_fields(trial)) <= limit:
            chosen = trial
        elif not chosen:
            # Even the most important field alone is too long: shorten its value to what is left.
            room = limit - len(field[1]) - 1
            if room >= 1:
                chosen = [(field[0], field[1], compress(field[2], limit=room), field[3])]
    return _render_fields(chosen) if chosen else ""


def _render_fields(fields: list[tuple[int, str, str, int]]) -> str:
    return "; ".join(f"{name}={value}" for _, name, value, _ in fields)
