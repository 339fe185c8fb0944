"""Conversation memory: every chat message becomes recallable units.

- ``units`` — a message split into units, with their facts, and written (``index_messages``, ``index_turn``).
- ``writer`` — the background writer: turns announced with NOTIFY in the reply's transaction, written in batches.
- ``claims`` — what a unit states: its subjects (identifiers), its values with their kinds, its validity in words.
- ``supersede`` — a later unit with another value of the same attribute supersedes or changes an earlier one.
- ``terms`` — values with no form of their own (a cuisine, an area): a word another of the same kind replaces.
- ``replacement`` — a statement that names what it replaces ("swap the lamb for chicken", 「由烤瓷改成全瓷冠」).
"""

from memory.conversation.supersede import TERM
from memory.conversation.units import SETTLE, index_messages, index_turn, squash
from memory.conversation.writer import DEFAULT_WAIT_S, announce, index_all_pending, listen

__all__ = [
    "DEFAULT_WAIT_S",
    "SETTLE",
    "TERM",
    "announce",
    "index_all_pending",
    "index_messages",
    "index_turn",
    "listen",
    "squash",
]
