"""The admin's names for the chat app's models and fields (``config.labels``: why here, not in the models)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from chat.models import Batch, Tool
from config.labels import relabel


def apply() -> None:
    relabel(
        Tool, _("tool"), _("tools"),
        tenant=_("tenant"), name=_("name"), description=_("description"), parameters=_("parameters"), url=_("URL"),
        timeout_s=_("timeout (s)"), created_at=_("created at"),
    )  # fmt: skip
    relabel(
        Batch, _("batch"), _("batches"),
        id=_("ID"), tenant=_("tenant"), session=_("session"), tool_name=_("tool name"), items=_("items"),
        total=_("total"), next_index=_("next index"), completed=_("completed"), failed=_("failed"),
        last_success_id=_("last success ID"), failures=_("failures"), status=_("status"), job_id=_("job ID"),
        created_at=_("created at"), updated_at=_("updated at"), finished_at=_("finished at"),
    )  # fmt: skip
