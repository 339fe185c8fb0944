"""The admin's names for the staff_auth app's models and fields (``config.labels``: why here, not in the
models)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from config.labels import relabel
from staff_auth.models import Invitation, StaffAuthEvent


def apply() -> None:
    relabel(
        Invitation, _("invitation"), _("invitations"),
        tenant=_("tenant"), email=_("e-mail"), role=_("role"), invited_by=_("invited by"), created_at=_("created at"),
        expires_at=_("expires at"), accepted_at=_("accepted at"), accepted_by=_("accepted by"),
    )  # fmt: skip
    relabel(
        StaffAuthEvent, _("staff sign-in event"), _("staff sign-in events"),
        kind=_("kind"), tenant=_("tenant"), user=_("user"), actor=_("actor"), invitation=_("invitation"),
        detail=_("detail"), created_at=_("created at"),
    )  # fmt: skip
