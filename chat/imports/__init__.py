"""Past conversations imported with their own times (API.md "Past conversations (import)").

- ``service`` — the payload checked whole, the closed session and its messages stored, the job queued;
  idempotent by ``external_id``; the import's status.
- ``run`` — the background job: each message's facts and conversation units written as of when it was said.
- ``views`` — the REST views (tenant API key).
"""

from chat.imports.views import ConversationImportDetailView, ConversationImportView

__all__ = ["ConversationImportDetailView", "ConversationImportView"]
