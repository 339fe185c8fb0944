"""An end user's data rights, and retention. Where an export is streamed: ``rights``.

- ``rights`` — everything memdesk holds about one end user, exported (streamed) or erased.
- ``views`` — the REST views for the export and the erasure.
- ``retention`` — each tenant's retention settings applied, hourly on the worker or by hand.
"""

from chat.privacy.views import EndUserDetailView, EndUserExportView

__all__ = ["EndUserDetailView", "EndUserExportView"]
