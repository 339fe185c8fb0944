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

from memory.text.language import has_cjk

__all__ = ["Replacement", "named_replacements"]

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
            return self.old in flat and self.new not in flat
        words = _words(text)
        return set(_words(self.old)) <= words and not set(_words(self.new)) <= words


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
