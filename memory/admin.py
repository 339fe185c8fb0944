"""Staff audit of memories: filter, search, edit with validation, expire,
extend, delete — every change through ``memory.store.lifecycle`` with the staff
user as the actor, and each memory's full history inline.

Opening a memory, an event or a list of them writes a ``StaffAccess`` row per end user shown
(``conversations.staff_access``).

Phone numbers, e-mail addresses and identity numbers in a memory's content,
data and history (and in an event's before and after) are shown masked
(``138****1234``, ``memory.text.masking.mask_obj``) to staff who may not see them
whole: see :func:`unmasked_tenants` for who may. A masked page is read-only
for those values, so a save can never write the masked form back."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.formats import date_format, number_format
from django.utils.html import format_html_join
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from config.errors import ApiError
from conversations.staff_access import AuditedReadsAdmin, What
from memory.models import MAX_CONTENT, MemoryEvent, MemoryUnit
from memory.store import audit, lifecycle, schema
from memory.store.read import is_valid_at, valid_q
from memory.text.masking import mask_obj, mask_text
from tenants.admin_base import EDIT_ROLES, TenantScopedAdmin, member_tenant_ids

#: Lets a member see every memory of their tenants unmasked (``MemoryUnit.Meta.permissions``).
UNMASKED_PERMISSION = "memory.view_unmasked_memoryunit"


def unmasked_tenants(request: HttpRequest) -> set[Any] | None:
    """The tenants whose memories ``request.user`` sees unmasked; None for every tenant.

    Superusers and holders of :data:`UNMASKED_PERMISSION` (granted per user or group by a superuser): every
    tenant they can see. Owners and admins: their own tenants by role, without the permission — they can issue
    an API key and read every memory whole through the API, so masking would hide nothing from them. Agents:
    masked, unless given the permission."""
    user = request.user
    if user.is_superuser or user.has_perm(UNMASKED_PERMISSION):
        return None
    return set(member_tenant_ids(user, roles=EDIT_ROLES))


def _shows_whole(request: HttpRequest, tenant_id: Any) -> bool:
    tenants = unmasked_tenants(request)
    return tenants is None or tenant_id in tenants


def _history_html(obj: MemoryUnit, show: Any) -> str:
    events = MemoryEvent.objects.for_tenant(obj.tenant_id).filter(memory_id=obj.pk).order_by("created_at", "id")
    return (
        format_html_join(
            "",
            "<div>{} — <b>{}</b> {}: {} → {}</div>",
            (
                (
                    date_format(timezone.localtime(e.created_at), "Y-m-d H:i:s"),  # the page's zone
                    e.get_kind_display(),
                    gettext("by %(actor)s")
                    % {"actor": e.get_actor_display() + (f" ({e.actor_user})" if e.actor_user_id else "")},
                    show((e.before or {}).get("content", e.before)) if e.before else "–",
                    show((e.after or {}).get("content", e.after)) if e.after else "–",
                )
                for e in events
            ),
        )
        or "–"
    )


class ExpiredFilter(admin.SimpleListFilter):
    title = _("expired")
    parameter_name = "expired"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("no", _("Valid now")), ("yes", _("Expired"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        now = timezone.now()
        if self.value() == "yes":
            return queryset.exclude(valid_q(now))
        if self.value() == "no":
            return queryset.filter(valid_q(now))
        return queryset


class ScoreFilter(admin.SimpleListFilter):
    title = _("relevance score")
    parameter_name = "score"
    RANGES = {"low": (0.0, 0.7), "mid": (0.7, 1.2), "high": (1.2, 2.01)}

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("low", _("< 0.7 (asks to confirm)")), ("mid", "0.7 – 1.2"), ("high", "≥ 1.2")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() in self.RANGES:
            low, high = self.RANGES[self.value()]
            return queryset.filter(relevance_score__gte=low, relevance_score__lt=high)
        return queryset


class MemoryForm(forms.ModelForm):
    """Built when the admin is imported, before ``memory.labels`` names the fields: it names their labels."""

    expires_at = forms.DateTimeField(label=_("Expires at"))

    class Meta:
        model = MemoryUnit
        fields = ("content", "data", "expires_at")
        labels = {"content": _("Content"), "data": _("Data")}
        widgets = {"content": forms.Textarea(attrs={"rows": 3, "maxlength": MAX_CONTENT})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Shown and read in the memory's tenant's time zone (TenantScopedAdmin.changeform_view): say which.
        self.fields["expires_at"].help_text = timezone.get_current_timezone_name()

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        content = cleaned.get("content")
        if content is not None:
            try:
                schema.check_memory_input(type=self.instance.type, content=content, key=self.instance.key)
            except ApiError as exc:
                self.add_error("content", exc.message)
        expires_at = cleaned.get("expires_at")
        if expires_at is not None and expires_at <= self.instance.created_at:
            self.add_error("expires_at", _("Must be after the memory was created."))
        return cleaned


@admin.register(MemoryUnit)
class MemoryUnitAdmin(AuditedReadsAdmin, TenantScopedAdmin):
    form = MemoryForm
    # A memory's page, and a list of memories once per end user on the page, are recorded staff reads.
    read_what, list_read_what = What.MEMORY, What.MEMORIES
    list_display = (
        "content", "type", "key", "end_user", "session", "score", "created_at", "expires_at", "is_expired",
    )  # fmt: skip
    list_filter = ("tenant", "type", ExpiredFilter, ScoreFilter)
    search_fields = ("content", "key", "end_user__external_id", "=session__id")
    list_select_related = ("end_user", "session", "tenant")
    readonly_fields = (
        "id", "tenant", "end_user", "session", "type", "key", "relevance_score", "created_at", "superseded_at",
        "superseded_by", "source_message", "use_count", "ignore_count", "mislead_count", "confirm_count", "history",
    )  # fmt: skip
    actions = ("expire_now", "extend_24h", "delete_memories")
    list_per_page = 50

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        # The end user and session filters come from the changelist's query string
        # (?end_user__external_id=… / ?session__id=…): no list_filter offers them.
        if lookup in {"end_user__external_id", "session__id", "end_user__id"}:
            return True
        return super().lookup_allowed(lookup, value, request)

    def get_actions(self, request: HttpRequest) -> dict:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    @admin.display(description=_("score"), ordering="relevance_score")
    def score(self, obj: MemoryUnit) -> str:
        return number_format(obj.relevance_score, 2)

    @admin.display(boolean=True, description=_("expired"))
    def is_expired(self, obj: MemoryUnit) -> bool:
        return not is_valid_at(obj, timezone.now())

    @admin.display(description=_("history"))
    def history(self, obj: MemoryUnit) -> str:
        return _history_html(obj, lambda value: value)

    @admin.display(description=_("history"))
    def masked_history(self, obj: MemoryUnit) -> str:
        return _history_html(obj, mask_obj)

    @admin.display(description=_("content"))
    def masked_content(self, obj: MemoryUnit) -> str:
        return mask_text(obj.content)

    @admin.display(description=_("data"))
    def masked_data(self, obj: MemoryUnit) -> Any:
        return mask_obj(obj.data)

    # Masking is decided per row (a member of two tenants may be an owner of one and an agent of the other), so
    # the list's content column is made per request, knowing whose rows show whole.
    def get_list_display(self, request: HttpRequest) -> Any:
        tenants = unmasked_tenants(request)

        @admin.display(description=_("content"), ordering="content")
        def content(obj: MemoryUnit) -> str:
            return obj.content if tenants is None or obj.tenant_id in tenants else mask_text(obj.content)

        return tuple(content if name == "content" else name for name in super().get_list_display(request))

    def _masked(self, request: HttpRequest, obj: Any) -> bool:
        return obj is not None and not _shows_whole(request, obj.tenant_id)

    def get_exclude(self, request: HttpRequest, obj: Any = None) -> Any:
        if self._masked(request, obj):
            return ("content", "data")  # never in the form: a save would write the masked form back
        return super().get_exclude(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = super().get_readonly_fields(request, obj)
        if self._masked(request, obj):
            return ("masked_content", "masked_data", *("masked_history" if f == "history" else f for f in fields))
        return fields

    def save_model(self, request: HttpRequest, obj: MemoryUnit, form: Any, change: bool) -> None:
        """Staff edits go through the service (validation, embedding, event)."""
        original = MemoryUnit.objects.for_tenant(obj.tenant_id).get(pk=obj.pk)
        expires_in = None
        if original.expires_at != obj.expires_at:
            expires_in = int((obj.expires_at - original.created_at).total_seconds())
        lifecycle.do_edit_memory(
            obj.tenant, original, content=obj.content, data=obj.data, expires_in=expires_in,
            actor=audit.Actor.staff(request.user),
        )  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # memories are written by the runtime and the API

    def _each(self, request: HttpRequest, queryset: QuerySet, fn: Any, done: Any) -> None:
        count = 0
        for memory in queryset.select_related("tenant", "end_user"):
            fn(memory)
            count += 1
        self.message_user(request, done(count) % {"count": count}, messages.SUCCESS)

    @admin.action(description=_("Expire now"))
    def expire_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        actor = audit.Actor.staff(request.user)
        self._each(
            request, queryset, lambda m: lifecycle.do_expire_memory(m.tenant, m, actor=actor),
            lambda n: ngettext("%(count)d memory expired.", "%(count)d memories expired.", n),
        )  # fmt: skip

    @admin.action(description=_("Extend 24 h"))
    def extend_24h(self, request: HttpRequest, queryset: QuerySet) -> None:
        actor = audit.Actor.staff(request.user)
        seconds = int(timedelta(hours=24).total_seconds())
        self._each(
            request, queryset, lambda m: lifecycle.do_extend_memory(m.tenant, m, seconds, actor=actor),
            lambda n: ngettext("%(count)d memory extended.", "%(count)d memories extended.", n),
        )  # fmt: skip

    @admin.action(description=_("Delete (history is kept)"))
    def delete_memories(self, request: HttpRequest, queryset: QuerySet) -> None:
        actor = audit.Actor.staff(request.user)
        self._each(
            request, queryset, lambda m: lifecycle.do_delete_memory(m.tenant, m, actor=actor),
            lambda n: ngettext("%(count)d memory deleted.", "%(count)d memories deleted.", n),
        )  # fmt: skip


@admin.register(MemoryEvent)
class MemoryEventAdmin(AuditedReadsAdmin, TenantScopedAdmin):
    # An event's before and after are a memory's content: its page, and the list, are recorded staff reads.
    read_what, list_read_what = What.MEMORY, What.MEMORIES
    list_display = ("created_at", "kind", "actor", "actor_user", "memory_id", "end_user", "note")
    list_filter = ("tenant", "kind", "actor")
    search_fields = ("=memory_id", "note", "end_user__external_id")
    readonly_fields = ("tenant", "end_user", "memory_id", "kind", "actor", "actor_user", "before", "after", "note")

    @admin.display(description=_("before"))
    def masked_before(self, obj: MemoryEvent) -> Any:
        return mask_obj(obj.before)

    @admin.display(description=_("after"))
    def masked_after(self, obj: MemoryEvent) -> Any:
        return mask_obj(obj.after)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = super().get_readonly_fields(request, obj)
        if obj is not None and not _shows_whole(request, obj.tenant_id):
            return tuple({"before": "masked_before", "after": "masked_after"}.get(f, f) for f in fields)
        return fields

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        fields = super().get_fields(request, obj)
        if obj is not None and not _shows_whole(request, obj.tenant_id):
            return [f for f in fields if f not in ("before", "after")]
        return fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
