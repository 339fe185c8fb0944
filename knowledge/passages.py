"""Where an article version is cut into passages: the unit knowledge search finds and a reply cites.

The rules, in order:

1. **Headings.** A passage never spans two sections: each heading starts a new one, and the passage carries
   its heading path (the headings above it, outermost first: ``["Returns", "Refunds"]``).
2. **Paragraphs.** Within a section, whole paragraphs are packed together while the passage stays within
   :data:`PASSAGE_MAX_CHARS` characters.
3. **Sentences.** A paragraph longer than that is cut between sentences — after 。！？ (and ……), or after
   ``.``, ``!`` or ``?`` followed by a space and a capital, a digit, a quote or a Chinese character, or at a
   line break — and its sentences packed the same way. A passage never ends in the middle of a sentence.
4. **The one exception:** a single sentence longer than the limit (a run-on list, a table row) is cut after
   its clauses (，、；：,;:), and only a clause still longer than the limit at its last space, or at the limit.

Pure: no Django, no database (a test or a benchmark runs it as is).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from knowledge.content import Block
from memory.text import CJK_RE

#: The most characters a passage holds: a few paragraphs, about what a reply cites and a prompt can carry
#: five of. Embedding models read ~256 word pieces; 500 characters of English or Chinese stay around it.
PASSAGE_MAX_CHARS = 500
#: The most characters of one heading kept in a passage's heading path.
HEADING_MAX_CHARS = 200

_CJK = CJK_RE.pattern[1:-1]
_CLOSERS = "\"'”’)\\]」』）】"
_SENTENCE_END = re.compile(
    rf"(?:[。！？]+|…{{1,2}}|\n|[.!?]+(?=[{_CLOSERS}]*(?:\s+(?=[A-Z0-9\"'“‘(\[{_CJK}])|\s*$)))[{_CLOSERS}]*\s*"
)
_CLAUSE_END = re.compile(r"[，、；：,;:]\s*")
#: A full stop after these ends no sentence ("Mr. Smith", "No. 5").
_ABBREVIATION = re.compile(r"(?:^|\s)(?:Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|No|Nos|vs|etc|Inc|Ltd|Co|Fig|approx)\.\s*$")


@dataclass(frozen=True)
class PassageDraft:
    """A passage before it is stored: its place in the version, its heading path and its text."""

    position: int
    heading_path: tuple[str, ...]
    text: str


def _pieces(text: str, pattern: re.Pattern[str]) -> list[str]:
    """``text`` cut after each match of ``pattern``; the pieces concatenate to ``text``."""
    pieces: list[str] = []
    start = 0
    for match in pattern.finditer(text):
        if match.end() > start:
            pieces.append(text[start : match.end()])
            start = match.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, each with its end mark and the space after it."""
    out: list[str] = []
    for piece in _pieces(text, _SENTENCE_END):
        if out and _ABBREVIATION.search(out[-1]):
            out[-1] += piece
        else:
            out.append(piece)
    return out


def _hard_cut(text: str, limit: int) -> list[str]:
    out: list[str] = []
    while len(text) > limit:
        space = text.rfind(" ", 0, limit + 1)
        cut = space if space > limit // 2 else limit
        out.append(text[:cut])
        text = text[cut:]
    return [*out, text]


def _units(paragraph: str, limit: int) -> list[str]:
    """The paragraph whole when it fits, else its sentences (an overlong sentence cut by rule 4)."""
    if len(paragraph) <= limit:
        return [paragraph]
    units: list[str] = []
    for sentence in sentences(paragraph):
        if len(sentence.strip()) <= limit:
            units.append(sentence)
            continue
        for clause in _pieces(sentence, _CLAUSE_END):
            units.extend(_hard_cut(clause, limit) if len(clause.strip()) > limit else [clause])
    return units


def _pack(units: Iterable[tuple[str, str]], limit: int) -> list[str]:
    """Units (with the separator that goes before each) packed greedily into texts of at most ``limit``."""
    texts: list[str] = []
    current = ""
    for separator, unit in units:
        candidate = (current + separator + unit) if current else unit
        if len(candidate.strip()) <= limit:
            current = candidate
            continue
        if current.strip():
            texts.append(current.strip())
        current = unit
    if current.strip():
        texts.append(current.strip())
    return texts


def _section_units(paragraphs: list[str], limit: int) -> list[tuple[str, str]]:
    units: list[tuple[str, str]] = []
    for paragraph in paragraphs:
        for index, unit in enumerate(_units(paragraph, limit)):
            units.append(("\n" if index == 0 else "", unit))
    return units


def split(blocks: Iterable[Block], *, limit: int = PASSAGE_MAX_CHARS) -> list[PassageDraft]:
    """The passages of a version's blocks (``knowledge.content``), in order, by the module's rules."""
    drafts: list[PassageDraft] = []
    path: list[tuple[int, str]] = []
    paragraphs: list[str] = []

    def flush() -> None:
        headings = tuple(text for _, text in path)
        for text in _pack(_section_units(paragraphs, limit), limit):
            drafts.append(PassageDraft(len(drafts), headings, text))
        paragraphs.clear()

    for block in blocks:
        if block.level:
            flush()
            while path and path[-1][0] >= block.level:
                path.pop()
            path.append((block.level, block.text[:HEADING_MAX_CHARS]))
        else:
            paragraphs.append(block.text)
    flush()
    return drafts
