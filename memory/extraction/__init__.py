"""From chat text to keyed facts: runs after every message, the user's and the agent's, and stores them through
``memory.store``.

- ``run`` — the entry point, ``extract_and_store``: rules, then (optionally) the model, then the store.
- ``rules`` — the model-free extractors in one table and one order; where a phone number is recognised as the
  end user's and keyed (with ``ownership`` deciding whose it is).
- ``state`` — what one message's extractors share.
- ``content`` — the human sentence of a rule-extracted fact (≤ 150 characters, the message's language).
- ``dates`` — dates and times in chat text, resolved against the message's own time.
- ``service`` — customer-service facts beyond the profile: events, accounts, memberships, callbacks, batches.
- ``ownership`` — whose value it is: the end user's, or someone else's named in the same message.
- ``confirmation`` — does a message replace a fact, or only confirm it?
- ``model`` — Ollama-assisted extraction, optional; the caller hands the model call in.
"""

from memory.extraction.rules import extract_facts
from memory.extraction.run import extract_and_store

__all__ = ["extract_and_store", "extract_facts"]
