"""Memory: typed, compressed, expiring memories of an end user, written from chat and recalled in three stages
(docs/memory.md). Below the chat runtime: it never imports it and never calls the model itself — a caller that
wants model-assisted extraction hands it a function (``memory.extraction.model.StructuredAsk``).

Django's files and the REST views stay at this package's root: ``models``, ``admin``, ``labels``, ``apps``,
``tasks`` (background jobs), ``metrics``, ``serializers``, ``views`` (``/api/v1/memories…``). Everything else is
a package, each above the ones after it (import-linter's "memory's packages in order" contract):

- ``memory.end_user`` — the end user's own view of their memories (its views share ``memory.serializers``,
  which know recall's limits: so it sits above recall).
- ``memory.recall`` — three-stage recall.
- ``memory.conversation`` — every chat message as recallable units, written by the background writer.
- ``memory.extraction`` — from a message to keyed facts: rules, dates, service facts, ownership, the model.
- ``memory.topics`` — topic switches: detection, freezing and returning.
- ``memory.store`` — writing, reading, changing and auditing stored memories; feedback, consent, retention.
- ``memory.embeddings`` — sentence vectors (they read ``memory.models``, which masks text: so above text).
- ``memory.text`` — pure text functions (no Django, no database).

Other apps import only what a package's ``__init__`` exports (import-linter's "memory's packages are private"
contract, ``make lint``).
"""
