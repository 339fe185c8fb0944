"""The admin's names for the tenants app's models and fields (``config.labels``: why here, not in the models)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from config.labels import relabel
from tenants.models import ApiKey, EndUser, Membership, Tenant


def apply() -> None:
    relabel(
        Tenant, _("tenant"), _("tenants"),
        id=_("ID"), slug=_("slug"), name=_("name"), agent_role=_("agent role"), allowed_origins=_("allowed origins"),
        language=_("language"), settings=_("settings"), signing_secret=_("signing secret"),
        send_legacy_signature=_("send legacy signature"), created_at=_("created at"),
        last_cleanup_at=_("last cleanup at"),
    )  # fmt: skip
    relabel(
        Membership, _("membership"), _("memberships"),
        user=_("user"), tenant=_("tenant"), role=_("role"), created_at=_("created at"), last_seen_at=_("last seen at"),
    )  # fmt: skip
    relabel(
        ApiKey, _("API key"), _("API keys"),
        id=_("ID"), tenant=_("tenant"), name=_("name"), prefix=_("prefix"), key_hash=_("key hash"),
        created_at=_("created at"), last_used_at=_("last used at"), revoked_at=_("revoked at"),
    )  # fmt: skip
    relabel(
        EndUser, _("end user"), _("end users"),
        id=_("ID"), tenant=_("tenant"), external_id=_("external ID"), created_at=_("created at"),
        memory_enabled=_("memory enabled"),
    )  # fmt: skip
