"""The state one message's rule extraction shares between its extractors (``memory.extraction.rules``,
``memory.extraction.service``).

An extractor reads :attr:`Extraction.text`, skips spans another extractor already claimed (:meth:`Extraction.free`)
and records what it found as a :class:`Found`; the order of the extractors decides who owns a span. Whose a
profile value is — the end user's, a person the user names, the user's workplace or someone else's — is decided
once, in :mod:`memory.extraction.ownership`, through :meth:`Extraction.owner`. No database access.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory.extraction.ownership import Owner, owner_of, whose

__all__ = ["A", "CLAUSE_END", "SEP", "Z", "Extraction", "Found", "digits"]

#: Word boundaries that also hold between a letter and a CJK character (``\b`` does not).
A = r"(?<![A-Za-z0-9_])"
Z = r"(?![A-Za-z0-9_])"
#: What may stand between a label and its value: 「订单号是」, "order number:", "tracking is".
SEP = r"\s*(?:是|为|:|：|=|is|was)?\s*"
CLAUSE_END = "，。；！？,;!?\n"


@dataclass
class Found:
    start: int
    end: int
    key: str
    value: str
    data: dict[str, Any]
    label: str = ""  # overrides the content template's label, e.g. a landline instead of a mobile
    display: str = ""  # how the value is shown in content when it differs from the normalised value
    expires_in: int | None = None


class Extraction:
    """The state of one message's extraction: text, spans already claimed, facts found."""

    def __init__(self, text: str, role: str, now: datetime) -> None:
        self.text = text
        self.role = role
        self.now = now
        self.claimed: list[tuple[int, int]] = []
        self.found: list[Found] = []
        self.bare: set[tuple[int, int]] = set()  # profile values keyed as the user's with no words saying so

    def free(self, start: int, end: int) -> bool:
        return not any(start < e and s < end for s, e in self.claimed)

    def add(self, item: Found) -> None:
        self.claimed.append((item.start, item.end))
        self.found.append(item)

    def clause(self, start: int, end: int) -> str:
        left = max(self.text.rfind(char, 0, start) for char in CLAUSE_END) + 1
        rights = [i for i in (self.text.find(char, end) for char in CLAUSE_END) if i >= 0]
        return self.text[left : min(rights) if rights else len(self.text)]

    def owner(self, start: int, end: int) -> Owner:
        """Whose the profile value at ``text[start:end]`` is (see :func:`memory.extraction.ownership.owner_of`)."""
        return owner_of(self.text, start, end, role=self.role)

    def owner_marker(self, start: int, end: int) -> str:
        """The words that named the owner (「老婆」, "wife's"), for a contact's fact."""
        return re.sub(r"(?:'s|’s|的)$", "", whose(self.text, start, end, role=self.role).marker)


def digits(value: str) -> str:
    return re.sub(r"\D", "", value)
