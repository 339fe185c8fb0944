"""A chat session's life and record.

- ``lifecycle`` — open, describe, close.
- ``messages`` — the user's message checked and stored, its turn's lease, pages of the record.
- ``events`` — realtime events: who hears what through the channel layer (a session's tabs, the staff consoles).
  Here rather than in ``chat.handoff``: closing a session publishes too, and sessions sit below handoff.
"""

# Nothing here is imported by another app: its modules are this app's own.
__all__: list[str] = []
