"""Tenant tools (S1, S16; API.md "Tools").

- ``registry`` — a tool checked, registered, listed, deleted; as the model is offered it.
- ``call`` — the signed call to the tenant's URL and its outcome: one streaming loop, awaited by a turn and run to
  its end by the batch worker.
- ``context`` — a session's execution context during tool calls.
- ``topic_context`` — the execution context on a topic switch: a tool call belongs to its topic.
- ``compact`` — S15's JSON for every structured value entering a prompt.
- ``batches`` — batch operations: one tool called once per item, in the background worker.
"""

# Nothing here is imported by another app: its modules are this app's own.
__all__: list[str] = []
