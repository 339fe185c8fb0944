"""The admin's names for the memory app's models and fields (``config.labels``: why here, not in the models)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from config.labels import relabel
from memory.models import MemoryEvent, MemoryUnit


def apply() -> None:
    relabel(
        MemoryUnit, _("memory unit"), _("memory units"),
        id=_("ID"), tenant=_("tenant"), end_user=_("end user"), session=_("session"), type=_("type"), key=_("key"),
        content=_("content"), data=_("data"), created_at=_("created at"), expires_at=_("expires at"),
        relevance_score=_("relevance score"), use_count=_("use count"), ignore_count=_("ignore count"),
        mislead_count=_("mislead count"), confirm_count=_("confirm count"), superseded_at=_("superseded at"),
        superseded_by=_("superseded by"), source_message=_("source message"),
    )  # fmt: skip
    relabel(
        MemoryEvent, _("memory event"), _("memory events"),
        tenant=_("tenant"), end_user=_("end user"), memory_id=_("memory ID"), kind=_("kind"), actor=_("actor"),
        actor_user=_("actor user"), before=_("before"), after=_("after"), note=_("note"), created_at=_("created at"),
    )  # fmt: skip
