from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from tenants import retention
from tenants.admin_base import TenantScopedAdmin
from tenants.local_time import KEY as TIMEZONE_KEY
from tenants.local_time import is_timezone
from tenants.models import ApiKey, EndUser, Membership, Tenant


def _days_field(label: Any, help_text: Any) -> forms.IntegerField:
    return forms.IntegerField(
        label=label, help_text=help_text, required=False, min_value=retention.MIN_DAYS, max_value=retention.MAX_DAYS
    )


class TenantForm(forms.ModelForm):
    """The tenant with its retention settings (``tenants.retention``) as typed fields, saved into ``settings``.
    The JSON shows and keeps every other key; a retention key has one place to be set, its field, so the JSON
    refuses one rather than let two values disagree. No ``Meta``: the admin builds it for ``Tenant`` with every
    editable field, so a field added to the model appears without a change here."""

    message_retention_days = _days_field(
        _("Keep messages (days)"), _("Chat messages older than this are deleted, hourly. Empty: messages are kept.")
    )
    memory_retention_days = _days_field(
        _("Keep memories (days)"),
        _(
            "A memory is deleted this long after it was created, even if its own lifetime is longer (a shorter one "
            "still ends it sooner), and so are audit events older than this. Empty: memories live their own "
            "lifetime."
        ),
    )
    history_retention_days = _days_field(
        _("Keep replaced versions (days)"),
        _("A replaced fact's old version is kept this long after its replacement, for as-of questions. Empty: 90."),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "settings" in self.fields:
            self.fields["settings"].help_text = _(
                'Every other setting, as a JSON object; e.g. "timezone": "Asia/Shanghai", the time zone the staff '
                "pages show this tenant's times in (empty: the business hours' time zone, else UTC)."
            )
        stored = self.instance.settings if isinstance(self.instance.settings, dict) else {}
        for key in retention.RETENTION_KEYS:
            self.initial.setdefault(key, stored.get(key))
        if isinstance(self.instance.settings, dict):
            self.initial["settings"] = {k: v for k, v in stored.items() if k not in retention.RETENTION_KEYS}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if "settings" not in self.fields or "settings" in self.errors:
            return cleaned
        other = cleaned.get("settings")
        other = {} if other is None else other
        if not isinstance(other, dict):
            self.add_error("settings", gettext("Settings must be a JSON object."))
            return cleaned
        for key in retention.RETENTION_KEYS:
            if key in other:
                self.add_error("settings", gettext("Set %(key)s in its own field, not in the JSON.") % {"key": key})
        if TIMEZONE_KEY in other and not is_timezone(other[TIMEZONE_KEY]):
            self.add_error(
                "settings",
                gettext("timezone must be a time zone name such as Asia/Shanghai, not %(value)s.")
                % {"value": repr(other[TIMEZONE_KEY])},
            )
        typed = {key: cleaned[key] for key in retention.RETENTION_KEYS if cleaned.get(key) is not None}
        cleaned["settings"] = {**other, **typed}
        return cleaned


@admin.register(Tenant)
class TenantAdmin(TenantScopedAdmin):
    form = TenantForm
    tenant_field = "id"
    list_display = ("slug", "name", "language", "created_at")
    search_fields = ("slug", "name")
    readonly_fields = ("id", "signing_secret", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.is_superuser


@admin.register(Membership)
class MembershipAdmin(TenantScopedAdmin):
    list_display = ("user", "tenant", "role", "created_at")
    list_filter = ("role", "tenant")


@admin.register(ApiKey)
class ApiKeyAdmin(TenantScopedAdmin):
    list_display = ("prefix", "name", "tenant", "created_at", "last_used_at", "revoked_at")
    list_filter = ("tenant",)
    readonly_fields = ("prefix", "created_at", "last_used_at")
    fields = ("tenant", "name", "prefix", "created_at", "last_used_at", "revoked_at")
    actions = ("revoke",)

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if not change:
            plain = obj.new_secret()
            super().save_model(request, obj, form, change)
            self.message_user(
                request,
                gettext("New API key (shown once — copy it now): %(key)s") % {"key": plain},
                level=messages.WARNING,
            )
            return
        super().save_model(request, obj, form, change)

    @admin.action(description=_("Revoke selected keys"))
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        done = ngettext("%(count)d key revoked.", "%(count)d keys revoked.", count)
        self.message_user(request, done % {"count": count})


@admin.register(EndUser)
class EndUserAdmin(TenantScopedAdmin):
    list_display = ("external_id", "tenant", "created_at")
    list_filter = ("tenant",)
    search_fields = ("external_id",)
