"""The admin's names for the conversations app's models and fields (``config.labels``: why here, not in the
models)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from config.labels import relabel
from conversations.models import ChatSession, Message, SessionRating, StaffAccess


def apply() -> None:
    relabel(
        ChatSession, _("chat session"), _("chat sessions"),
        id=_("ID"), tenant=_("tenant"), end_user=_("end user"), status=_("status"), metadata=_("metadata"),
        created_at=_("created at"), last_activity_at=_("last activity at"), expires_at=_("expires at"),
        closed_at=_("closed at"), topic=_("topic"), context_reset_pending=_("context reset pending"),
        topic_state=_("topic state"), empty_recall_streak=_("empty recall streak"),
        amnesia_alerted=_("amnesia alerted"), state=_("state"), handoff_trigger=_("handoff trigger"),
        handoff_reason=_("handoff reason"), handoff_at=_("handoff at"), assigned_to=_("assigned to"),
        staff_involved=_("staff involved"),
    )  # fmt: skip
    relabel(
        Message, _("message"), _("messages"),
        seq=_("seq"), role=_("role"), text=_("text"), status=_("status"), author=_("author"),
        created_at=_("created at"),
    )  # fmt: skip
    relabel(
        StaffAccess, _("staff access"), _("staff accesses"),
        tenant=_("tenant"), end_user=_("end user"), session=_("session"), user=_("user"), what=_("what"),
        path=_("path"), created_at=_("created at"),
    )  # fmt: skip
    relabel(
        SessionRating, _("session rating"), _("session ratings"),
        tenant=_("tenant"), session=_("session"), score=_("score"), comment=_("comment"), handled_by=_("handled by"),
        staff=_("staff"), created_at=_("created at"), updated_at=_("updated at"),
    )  # fmt: skip
