"""A message's mood, and which memories are care.

Seed §6: 「在用户情绪低落时，能默默调高relevance_score，让关怀类记忆浮出水面」.

:func:`detect_mood` reads a user's message or query, Chinese and English, with a lexicon — no model, pure and
deterministic, microseconds a message. Each cue found adds its weight:

* **strong** words (1.0: 气死, 受不了, 太过分, "furious", "unacceptable", "fed up"), **moderate** ones (0.6: 投诉,
  还没到, 第三次, 等了三天, "still hasn't", "third time", "how many times", a negated positive: 不满意, 不靠谱,
  "not happy") and **weak** ones (0.3: 唉, 到底, "ugh", "again");
* a cue **negated** in its clause counts nothing (「我一点也不生气」, "I'm not upset at all", 「我不是投诉」);
  a negated *positive* is a moderate cue instead;
* an **intensifier** right before a cue (太, 真的, 非常, "so", "really") makes it count half as much again;
* a cue before a **contrast** (但是, 不过, "but") counts less: what follows the contrast is what the user
  means now (「之前很生气，不过已经解决了」);
* a **resolution** (已经解决, 搞定了, "sorted now") takes weight away;
* **punctuation** is a weak signal: one 「！」 0.15, repeated 「！！」/「？！」/"?!" 0.3, two or more English
  words in capitals 0.3 — never enough alone.

The sum maps to a score in [0, 1) (``1 - exp(-sum)``); the message is negative at ``NEGATIVE_AT`` (one strong
cue, one moderate cue, or a weak cue with repeated punctuation). Measured on ``bench/data/mood_labels.json`` by
``bench/quality/mood.py`` (bench/RESULTS.md, "Mood detection"). Known misses: sarcasm without a cue word (「你们可真行」
is caught, most irony is not), dissatisfaction told as a plain fact.

:func:`care_reason` says whether a memory is a care memory — what the agent already did or promised to make
things right: a promised callback, a coupon or compensation given, a complaint on record, an apology, an
escalation — from its key (``callback``, ``coupon``: the keys ``memory.extraction.rules`` produces) or words in its
content.
Recall lifts these for a turn whose query is negative (``memory.recall.ranking``, knob ``mood_care_lift``); nothing
here
reads or writes the store.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["NEGATIVE_AT", "CARE_KEYS", "Mood", "care_reason", "detect_mood"]

#: The score from which a message is negative: 1 - exp(-0.6), one moderate cue.
NEGATIVE_AT = 0.45

STRONG, MODERATE, WEAK = 1.0, 0.6, 0.3
INTENSIFIED = 1.5
BEFORE_CONTRAST = 0.4
RESOLVED = -0.8
NEGATED_POSITIVE = MODERATE


@dataclass(frozen=True)
class Mood:
    """``score`` in [0, 1); ``negative`` when it reaches ``NEGATIVE_AT``; ``cues``: what was found, in text order
    (a negated cue as ``"not:生气"``, a negated positive as ``"not:满意"`` with its weight), for traces."""

    score: float
    negative: bool
    cues: tuple[str, ...] = ()


_N = r"(?:\d+|[一二两三四五六七八九十几半]+)"
_ZH_NEGATIVE: tuple[tuple[str, float], ...] = (
    (
        r"生气|气死|气人|愤怒|恼火|火大|崩溃|受不了|忍无可忍|过分|垃圾(?!分类|桶|袋|回收|短信|邮件)|骗子|骗人|欺骗|"
        r"坑人|坑爹|恶心|无语|离谱|差劲|烂透|什么破|破玩意|绝望|心累|难过|伤心|委屈|郁闷|烦死|急死|失望|糟糕|"
        r"倒霉|搞什么|耍我|敷衍|踢皮球|推来推去|没人管|没人理|不管不问|忽悠|差评|太差|气愤|憋屈|窝火|丢人|"
        r"坑死|黑心|欺负|可真行|真有你们的",
        STRONG,
    ),
    (
        r"投诉|退钱|赔偿|(?<!麻)烦|着急|白等|白跑|焦虑|担心|不满|难受|"
        r"又(?:坏|出问题|没到|错|延迟|失败|不行|卡|断|停|扣)|"
        r"(?:还|仍然|依然|都)没(?:有)?(?:到|收到|发货|退|处理|回复|解决|消息|到账|人|动静|联系|修好|送)|"
        r"一直(?:没|不|都没|在等)|等了" + _N + r"(?:天|个?星期|周|个?月|个?小时|多?天)|"
        r"第[二三四五六2-6]次|多少次|好几次|n次|怎么回事|怎么搞的|凭什么|为什么又|可笑|呵呵|服了|醉了|无奈|头疼|"
        r"糟心|太慢|这么慢|慢死|态度(?:差|恶劣|很差|太差)|质量(?:差|太差|太烂)|什么玩意|到底(?:还要|要等|怎么)",
        MODERATE,
    ),
    (r"唉|哎|到底|算了吧|还要等", WEAK),
)
_ZH_POSITIVE = r"满意|开心|高兴|愉快|靠谱|专业|合理|负责|好用|管用|像话|公平|舒服"
_ZH_NEGATORS = re.compile(r"不|没|别|毫|未|无须|不用|不必|并非")
_ZH_INTENSIFIERS = re.compile(r"(?:太|非常|特别|真的|真是|真|超级|超|极其|十分|简直|实在|好|很|巨|太太)$")
_ZH_CONTRAST = re.compile(r"但是|但|不过|可是|然而")
_ZH_RESOLVED = re.compile(r"已经解决|解决了(?!吗|没)|搞定了|处理好了|已经收到|没事了|没关系")

_EN_NEGATIVE: tuple[tuple[str, float], ...] = (
    (
        r"angry|angrier|furious|livid|pissed(?: off)?|outrag\w*|infuriat\w*|fed up|sick of|sick and tired|"
        r"unacceptable|ridiculous|terrible|awful|horrible|worst|disgust\w*|pathetic|scam\w*|rip-?off|useless|"
        r"hate|upset|frustrat\w*|disappoint\w*|devastated|miserable|depressed|heartbroken|wtf|"
        r"thanks for nothing|what a joke|this is a joke|absurd|insulting|fuming|appalling|shameful|lousy",
        STRONG,
    ),
    (
        r"annoy\w*|unhappy|dissatisfied|sad|worried|anxious|stressed|complain\w*|complaint|"
        r"still (?:hasn't|haven't|has not|have not|not|no|waiting|nothing|broken|doesn't|isn't|can't|won't|didn't)|"
        r"never (?:arrived|came|received|got|showed|heard|called|replied|answered)|"
        r"(?:second|third|fourth|fifth|2nd|3rd|4th|5th) time|how many times|"
        r"(?:waited|waiting|been waiting)(?: for)?(?: over| more than)? (?:\d+|two|three|four|five|six|several|many) "
        r"(?:days|weeks|hours|months)|"
        r"(?:nobody|no one|no-one)(?: has| ever| is| has been)? (?:called|replied|answered|helped|helping|responded|"
        r"responding|answering|got back)|"
        r"seriously\?|what the hell|damn|lied|cheated|mad|wasted|waste of|incompetent|rude|sucks|"
        r"poor service|bad service|oh great|just great|yeah right|unbelievable|broken again|this is insane",
        MODERATE,
    ),
    (r"ugh|sigh|again|hopeless", WEAK),
)
_EN_POSITIVE = r"happy|satisfied|pleased|acceptable|fair|helpful|good enough|ok|okay|professional|reliable"
_EN_NEGATORS = {"not", "never", "no", "hardly", "without", "nothing", "nor", "neither", "nobody"}
_EN_INTENSIFIERS = {
    "very", "so", "really", "extremely", "totally", "absolutely", "completely", "super", "incredibly", "utterly",
    "truly", "fucking", "bloody", "beyond", "too",
}  # fmt: skip
_EN_CONTRAST = re.compile(r"\b(?:but|however|though|although)\b", re.IGNORECASE)
_EN_RESOLVED = re.compile(
    r"\b(?:(?:it'?s|all|that'?s|everything'?s) (?:sorted|fine|good|resolved) now|(?:has been|is|got) (?:resolved|"
    r"sorted|fixed)|no worries|no problem|all good)\b",
    re.IGNORECASE,
)


def _cues(table: tuple[tuple[str, float], ...], positive: str, *, english: bool) -> list[tuple[re.Pattern[str], float]]:
    def compile_(pattern: str) -> re.Pattern[str]:
        if english:  # whole words only: "mad" is not in "made"
            return re.compile(rf"(?<![A-Za-z'])(?:{pattern})(?![A-Za-z])", re.IGNORECASE)
        return re.compile(pattern)

    # weight 0: a positive word, which counts only when negated
    return [*((compile_(p), w) for p, w in table), (compile_(positive), 0.0)]


_ZH = _cues(_ZH_NEGATIVE, _ZH_POSITIVE, english=False)
_EN = _cues(_EN_NEGATIVE, _EN_POSITIVE, english=True)
_ACRONYMS = {"USD", "RMB", "CNY", "SMS", "VIP", "APP", "FAQ", "PIN", "ATM", "DHL", "UPS", "SKU", "API"}
_CLAUSE_END = re.compile(r"[，,。.；;！!？?\n]")
_WORD = re.compile(r"[A-Za-z']+")


def _clause_before(text: str, start: int) -> str:
    """The text of the cue's clause before it: negation and intensity do not cross a comma or a full stop."""
    ends = [m.end() for m in _CLAUSE_END.finditer(text, 0, start)]
    return text[ends[-1] if ends else 0 : start]


def _negated(before: str, *, english: bool) -> bool:
    if english:
        words = [w.lower() for w in _WORD.findall(before)][-4:]
        return any(w in _EN_NEGATORS or w.endswith("n't") for w in words)
    return bool(_ZH_NEGATORS.search(before[-4:]))


def _intensified(before: str, *, english: bool) -> bool:
    if english:
        words = _WORD.findall(before)
        return bool(words) and words[-1].lower() in _EN_INTENSIFIERS
    return bool(_ZH_INTENSIFIERS.search(before.rstrip()))


def _matches(text: str) -> list[tuple[int, int, float, bool]]:
    """Every cue as (start, end, weight, english), overlaps dropped (the earlier, then the longer, wins)."""
    found = [(m.start(), m.end(), w, english) for table, english in ((_ZH, False), (_EN, True)) for rx, w in table
             for m in rx.finditer(text) if m.end() > m.start()]  # fmt: skip
    found.sort(key=lambda f: (f[0], -(f[1] - f[0])))
    kept: list[tuple[int, int, float, bool]] = []
    for cue in found:
        if not kept or cue[0] >= kept[-1][1]:
            kept.append(cue)
    return kept


def _punctuation(text: str) -> float:
    """Repeated marks and shouting (two words in capitals) add up; a single 「！」 is the weakest signal."""
    signal = 0.0
    if re.search(r"[!！]{2,}|[?？][!！]|[!！][?？]|[?？]{2,}", text):
        signal += 0.3
    elif re.search(r"[!！]", text):
        signal += 0.15
    capitals = [w for w in re.findall(r"\b[A-Z]{3,}\b", text) if w not in _ACRONYMS]
    if len(capitals) >= 2:
        signal += 0.3
    return signal


def detect_mood(text: str) -> Mood:
    """The mood of ``text`` (a user's message or recall query). See the module docstring for the rules."""
    total = 0.0
    cues: list[str] = []
    contrasts = [m.start() for rx in (_ZH_CONTRAST, _EN_CONTRAST) for m in rx.finditer(text)]
    for start, end, weight, english in _matches(text):
        word = text[start:end]
        before = _clause_before(text, start)
        negated = _negated(before, english=english)
        if weight == 0.0:  # a positive word: a cue only when negated (不满意, "not happy")
            if not negated:
                continue
            weight, word = NEGATED_POSITIVE, f"not:{word}"
        elif negated:
            cues.append(f"not:{word}")
            continue
        if _intensified(before, english=english):
            weight *= INTENSIFIED
        if any(c > end for c in contrasts):
            weight *= BEFORE_CONTRAST
        total += weight
        cues.append(word)
    if _ZH_RESOLVED.search(text) or _EN_RESOLVED.search(text):
        total += RESOLVED
        cues.append("resolved")
    signal = _punctuation(text)
    if signal:
        total += signal
        cues.append("punctuation")
    score = round(1 - math.exp(-max(0.0, total)), 4)
    return Mood(score=score, negative=score >= NEGATIVE_AT, cues=tuple(cues))


#: Keys ``memory.extraction.rules`` gives to what the agent promised or gave: a callback (「24小时内给您回电」), a
#: coupon.
CARE_KEYS = frozenset({"callback", "coupon"})
_CARE_WORDS = re.compile(
    r"投诉|回电|回访|回拨|跟进|补偿|赔偿|赔付|优惠券|代金券|红包|道歉|致歉|抱歉|歉意|安抚|加急|专人|升级处理|"
    r"(?i:\b(?:complain\w*|call(?:ing)? (?:you |the customer |them )?back|callback|follow(?:ed|ing)?[- ]?up|"
    r"compensat\w+|coupon|voucher|credited|goodwill|apologi[sz]\w*|sorry|escalat\w+)\b)"
)


def care_reason(key: str | None, content: str) -> str | None:
    """Why a memory is a care memory (``"key:callback"``, ``"word:补偿"``), or None when it is not one."""
    if key in CARE_KEYS:
        return f"key:{key}"
    match = _CARE_WORDS.search(content or "")
    return f"word:{match.group(0)}" if match else None
