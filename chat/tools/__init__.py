"""Tenant tools (S1, S16; API.md "Tools").

- ``registry`` — register, list, delete; the signed call (``call_tool``, one streaming loop).
- ``context`` — a session's execution context during tool calls.
- ``topic_context`` — the execution context on a topic switch: a tool call belongs to its topic.
- ``compact`` — S15's JSON for every structured value entering a prompt.
- ``batches`` — batch operations: one tool called once per item, in the background worker.
"""

# Nothing here is imported by another app: its modules are this app's own.
__all__: list[str] = []
