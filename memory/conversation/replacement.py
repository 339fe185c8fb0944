"""A statement that names what it replaces: "swap the lamb for chicken", "changed the venue from the garden at 9
Orchard Close to Fernleigh Village Hall", "Mum's name is Noreen, not Maureen", 「方案已由烤瓷改成全瓷冠」,
「把上门改成线上」.

Such a statement carries the old value in its own words, so an earlier statement that says that value — however
it was worded, whoever said it, and whatever vectors say of the two — states something the later one has changed.
The frames are the languages' words for putting one thing in another's place (a closed class: from … to, replace
… with, swap … for, … instead of …, …, not …; 由/从 … 改为/换成/调到, 把/将 … 换成, 是…，不是…), not any one thing's
phrasing. Pure: no database.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from memory.conversation.claims import values_of
from memory.text.language import has_cjk

__all__ = ["Replacement", "labelled_replacements", "named_replacements"]

# An English span of a few words, up to a clause's end.
_SPAN = r"[^,;.!?()\n]{2,48}?"
_CHANGE_VERB = (
    r"(?:replac|swapp?|switch|chang|mov|upgrad|downgrad|updat|correct|amend|reschedul|transferr?|push|bump)"
    r"(?:e|ed|es|ing)?"
)
_EN_FRAMES = (
    # "changed the venue from the garden at 9 Orchard Close to Fernleigh Village Hall", "moved from Friday to Monday"
    re.compile(
        rf"(?i)\b{_CHANGE_VERB}\b[^.;!?]{{0,40}}?\bfrom\s+(?P<old>{_SPAN})\s+to\s+(?P<new>{_SPAN})(?=\s*(?:[,;.!?)\n]|$|\s+(?:and|as|so|but|which|for|on|at)\b))"
    ),
    # "replaced the lamb tagine with a mild chicken shawarma", "swap the lamb for chicken"
    re.compile(
        r"(?i)\b(?:replac|swapp?|switch|exchang|substitut)(?:e|ed|es|ing)?\s+(?P<old>" + _SPAN + r")\s+(?:with|for)\s+"
        r"(?P<new>" + _SPAN + r")(?=\s*(?:[,;.!?)\n]|$|\s+(?:and|as|so|but|which|alongside|instead)\b))"
    ),
    # "the 21st instead of the 20th", "Row K rather than Row F", "Noreen, not Maureen"
    re.compile(
        r"(?i)(?P<new>\b[\w'£$€#/-]+(?:\s+[\w'£$€#/-]+){0,2}?)\s*(?:,?\s+(?:instead\s+of|rather\s+than)|,\s+not)\s+"
        r"(?:the\s+)?(?P<old>[\w'£$€#/-]+(?:\s+[\w'£$€#/-]+){0,2}?)(?=\s*(?:[,;.!?)\n]|$))"
    ),
)
_ZH_SPAN = r"[^，。；！？,;!?（）()由从\n]{1,20}?"
_ZH_FRAMES = (
    # 「方案已由烤瓷（2800元）改成全瓷冠」, 「从上门改为线上」: 由/从 name the old value
    re.compile(
        r"(?:由|从)(?P<old>"
        + _ZH_SPAN
        + r")(?:[（(][^）)]{0,20}[）)])?\s*(?:改|换|调|升级|降级|变更|更正|更新|修改|挪)"
        r"(?:为|成|到)了?(?P<new>" + _ZH_SPAN + r")(?=[，。；！？,;!?\s（(]|$)"
    ),
    # 「把羊肉换成鸡肉」: with 把/将 only a swap names the old value; 「将联系电话更新为…」 names the field changed
    re.compile(
        r"(?:把|将)(?P<old>"
        + _ZH_SPAN
        + r")(?:[（(][^）)]{0,20}[）)])?\s*(?:换|替换)(?:为|成)了?(?P<new>"
        + _ZH_SPAN
        + r")"
        r"(?=[，。；！？,;!?\s（(]|$)"
    ),
    # 「过敏的是头孢，不是青霉素」, 「是1302室，不是1203」
    re.compile(r"是(?P<new>" + _ZH_SPAN + r")[，,]?\s*(?:而)?不是(?P<old>" + _ZH_SPAN + r")(?=[，。；！？,;!?\s]|$)"),
)
#: Words that say nothing of which value it is: articles, possessives, pronouns, the frame's own nouns.
_FILLER_EN = frozenset(
    "a an the my our your their his her its it them this that these those to of for from with some any one".split()
)
#: Words that are no value, whatever frame they stand in: "sure, not today", "that's it, not now".
_NO_VALUE_EN = frozenset(
    "i i'm im me you we he she they it that's this there here now today tomorrow yet really sure ok okay yes no "
    "just only even quite exactly so too very all both either".split()
)
_FILLER_ZH = re.compile(r"^(?:您的|我的|你的|您|我|你|了|的|原来的|之前的|原先的)+|(?:了|的|吧|呢|啊)+$")


@dataclass(frozen=True)
class Replacement:
    """One value a statement puts in another's place: ``old`` and ``new`` as said (fillers dropped)."""

    old: str
    new: str

    def stated_in(self, text: str) -> bool:
        """Whether an earlier statement ``text`` says the old value and not the new one: it states what was
        replaced."""
        if has_cjk(self.old):
            flat = re.sub(r"\s+", "", text)
            old, new = _cores(self.old, self.new)
            return (self.old in flat and self.new not in flat) or (old in flat and new not in flat)
        words = _words(text)
        return set(_words(self.old)) <= words and not set(_words(self.new)) <= words


def _cores(old: str, new: str) -> tuple[str, str]:
    """Two Chinese values without the head they share (「基础版」, 「畅享版」 → 基础, 畅享): an earlier statement names
    the thing by its distinguishing part with another head (「基础月卡」). Values whose cores would be shorter than
    two characters are returned whole."""
    head = 0
    while head < min(len(old), len(new)) and old[-1 - head] == new[-1 - head]:
        head += 1
    lead = 0
    while lead < min(len(old), len(new)) - head and old[lead] == new[lead]:
        lead += 1
    core_old, core_new = old[lead : len(old) - head], new[lead : len(new) - head]
    if len(core_old) < 2 or len(core_new) < 2:
        return old, new
    return core_old, core_new


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[\w'£$€#/-]+", text.casefold()) if w not in _FILLER_EN}


def _clean_en(span: str) -> str:
    words = [w for w in re.findall(r"[\w'£$€#/-]+", span) if w.casefold() not in _FILLER_EN]
    return " ".join(words)


def named_replacements(text: str) -> list[Replacement]:
    """The replacements ``text`` names, each with the old value and the new as it says them. A span that keeps
    no word of its own (only fillers), or an old value the new one contains ("2 to 3 days"), names none."""
    found: list[Replacement] = []
    frames = _ZH_FRAMES if has_cjk(text) else _EN_FRAMES
    for frame in frames:
        for match in frame.finditer(text):
            if has_cjk(text):
                old = _FILLER_ZH.sub("", match.group("old").strip())
                new = _FILLER_ZH.sub("", match.group("new").strip())
                if len(old) < 2 and not re.search(r"\d", old):
                    continue
            else:
                old, new = _clean_en(match.group("old")), _clean_en(match.group("new"))
                if {w.casefold() for w in old.split()} <= _NO_VALUE_EN or {
                    w.casefold() for w in new.split()
                } <= _NO_VALUE_EN:
                    continue
            if not old or not new or old.casefold() == new.casefold() or old.casefold() in new.casefold():
                continue
            found.append(Replacement(old, new))
    return found


# A Chinese value under its label: the words naming an attribute, a copula or a verb of setting it, and what
# follows to the clause's end (「默认投递柜点是翠湖小区东门B区柜」, 「已把默认投递柜点修改为银河大厦北门柜」). The
# markers are the language's copulas and verbs of setting (a closed class); the label and the value are whatever
# stands around them. English is left out: "the … is …" describes a thing as often as it sets an attribute ("the
# chain is worn"), and English frames tried on the service sets moved no fit question and lost answers elsewhere.
_ZH_SET = (
    r"(?:(?:已经?|已为您|已帮您)?(?:修改|更改|变更|更新|调整|改|换|设置|设|登记|更正|升级|降级)(?:为|成)|是|为|：|:)"
)
_ZH_LABELLED = re.compile(
    r"(?P<label>[\u4e00-\u9fff]{2,10}?)\s*" + _ZH_SET + r"\s*(?P<value>[^，。；！？,;!?\s（(]{2,24})"
)
#: Words that make a clause a question: what it asks is no value (「常用的柜点是哪个」).
_ASKING = re.compile(r"[哪啥谁吗么？?]|什么|多少|几")
#: Chinese words before a label that belong to no label: who it is, what was done, the thing pointed at.
_ZH_LEAD = re.compile(r"^.*(?:已经|已|把|将|给|为|帮|您的|我的|你的|您|我|你|他|她|这|那|就|都|也|还|现在|目前|当前)")
_ZH_LABEL_TAIL = re.compile(r"(?:现在|目前|当前|还|也|都|就|已经|已)+$")


def _typed(value: str) -> bool:
    """Whether ``value`` is a typed value and little else (「周五下午2点」, 「40元」): its kind's own attributes
    compare it. A named thing with a typed word in it (「周六素描提高班」) is not."""
    rest = value
    for typed in sorted(values_of(value), key=lambda v: v.start, reverse=True):
        rest = rest[: typed.start] + rest[typed.end :]
    return len(re.findall(r"[\u4e00-\u9fff]", rest)) < 2


@lru_cache(maxsize=1024)
def _labelled_values(text: str) -> tuple[tuple[frozenset[str], str], ...]:
    """The values a Chinese ``text`` states under a label, each with its label's character pairs. A value that is
    a typed one (a date, an amount, a count…: ``claims.values_of``) is left to the attributes of its kind, and a
    clause that asks states none. Cached: the writer compares each new unit with up to ``NEIGHBOURS`` earlier
    ones, and an earlier unit with every new one."""
    out: list[tuple[frozenset[str], str]] = []
    if not has_cjk(text):
        return ()
    for clause in re.split(r"[，。；！？,;!?\n]", text):
        if _ASKING.search(clause):
            continue
        for match in _ZH_LABELLED.finditer(clause):
            label = _ZH_LABEL_TAIL.sub("", _ZH_LEAD.sub("", match.group("label")))
            value = _FILLER_ZH.sub("", match.group("value"))
            if len(label) < 3 or len(value) < 2 or _typed(value):
                continue
            out.append((frozenset(label[i : i + 2] for i in range(len(label) - 1)), value))
    return tuple(out)


def labelled_replacements(old: str, new: str) -> list[Replacement]:
    """The values a later Chinese statement ``new`` gives under a label that an earlier ``old`` gave another
    value under (「默认投递柜点是翠湖小区东门B区柜」, later 「已把默认投递柜点修改为银河大厦北门柜」): the later value
    replaces the earlier. Labels are the same when they share two character pairs (a label of three characters or
    more). A value either statement also says, or one containing the other, replaces nothing."""
    found: list[Replacement] = []
    earlier = _labelled_values(old)
    if not earlier:
        return found
    for label, value in _labelled_values(new):
        for old_label, old_value in earlier:
            replacement = Replacement(old_value, value)
            if (
                len(label & old_label) >= 2
                and replacement.stated_in(old)
                and not replacement.stated_in(new)
                and old_value.casefold() not in value.casefold()
                and value.casefold() not in old_value.casefold()
            ):
                found.append(replacement)
    return found
