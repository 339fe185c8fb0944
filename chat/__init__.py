"""The chat runtime: sessions, turns, the prompt, tools, handoff and data rights (the top layer; docs/architecture.md).

Django's files and the transports stay at this package's root: ``models``, ``admin``, ``labels``, ``apps``,
``tasks`` (the background jobs, found by procrastinate's autodiscovery), ``metrics``, ``serializers``; the REST
``views``, the chat socket (``consumers``, ``routing``, ``ws_auth``), the browser ``pages``, and ``llm``, the
Ollama client every part that speaks to the model shares. Everything else is a package:

- ``chat.sessions`` — a session's life: open, describe, close; its message record; its realtime events.
- ``chat.turn`` — one chat turn: store, prepare, generate with tool rounds, finish; "forget" said in chat.
- ``chat.prompt`` — the two-channel prompt within an exact token budget: build, tokens, summary, the prepared turn.
- ``chat.tools`` — tenant tools: the registry and the signed call, the execution context, batches.
- ``chat.handoff`` — a person takes over: the state machine, triggers, options, offline hours, the note, the
  staff console.
- ``chat.privacy`` — an end user's data rights: export and erasure; the retention job.

Other apps (``config``'s urls, asgi and ops) import only what a package's ``__init__`` exports (import-linter's
"chat's packages are private" contract, ``make lint``).
"""
