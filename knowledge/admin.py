"""The tenant's articles in the admin: read-only, with their version history and what changed between one version
and the next. Articles are written through the API and the importer (``knowledge.services``), which keep the
validity rules; staff with an owner's or admin's role may retire an article from here (the same service)."""

from __future__ import annotations

import difflib
from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from knowledge.models import Article, ArticleVersion
from knowledge.services import do_retire_article
from tenants.admin_base import EDIT_ROLES, TenantScopedAdmin

#: The most lines of one diff shown (a rewritten article is better read version by version).
MAX_DIFF_LINES = 400


def version_diff(older: ArticleVersion, newer: ArticleVersion) -> list[str]:
    """What changed from ``older`` to ``newer``: a unified diff of their titles and sanitised texts."""
    before = [f"# {older.title}", "", *older.text.splitlines()]
    after = [f"# {newer.title}", "", *newer.text.splitlines()]
    lines = difflib.unified_diff(before, after, f"v{older.number}", f"v{newer.number}", lineterm="", n=2)
    return list(lines)[:MAX_DIFF_LINES]


class ArticleVersionInline(admin.TabularInline):
    model = ArticleVersion
    extra = 0
    fields = ("number", "title", "language", "format", "valid_from", "valid_until", "created_at")
    readonly_fields = fields
    can_delete = False
    show_change_link = False
    ordering = ("-number",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Article)
class ArticleAdmin(TenantScopedAdmin):
    list_display = ("title", "tenant", "external_id", "language", "segment", "updated_at")
    list_filter = ("tenant", "language", "segment")
    search_fields = ("title", "external_id", "tags")
    ordering = ("-updated_at",)
    fields = ("tenant", "id", "external_id", "title", "language", "tags", "url", "segment", "created_at",
              "updated_at", "history")  # fmt: skip
    readonly_fields = fields
    inlines = [ArticleVersionInline]
    actions = ["retire_now"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # articles are written through the API and the importer

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a change is a new version (PUT), never an edit in place

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # retire instead: history stays

    def has_retire_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request, None, EDIT_ROLES)

    @admin.display(description=_("version history"))
    def history(self, obj: Article) -> SafeString:
        versions = list(ArticleVersion.all_objects.filter(tenant_id=obj.tenant_id, article=obj).order_by("number"))
        if not versions:
            return mark_safe("")  # noqa: S308 - a constant
        parts = []
        for older, newer in zip(versions, versions[1:], strict=False):
            diff = "\n".join(version_diff(older, newer)) or str(_("(no change in the text)"))
            parts.append(
                format_html(
                    "<h4>{}</h4><pre style='white-space: pre-wrap'>{}</pre>",
                    _("Version %(old)d → version %(new)d") % {"old": older.number, "new": newer.number},
                    diff,
                )
            )
        first = versions[0]
        parts.append(
            format_html(
                "<h4>{}</h4><pre style='white-space: pre-wrap'>{}</pre>",
                _("Version %(number)d") % {"number": first.number},
                first.text,
            )
        )
        # each part is built by format_html, which escapes every value
        return mark_safe("".join(str(part) for part in reversed(parts)))  # noqa: S308

    @admin.action(description=_("Retire now"), permissions=["retire"])
    def retire_now(self, request: HttpRequest, queryset: QuerySet) -> None:
        count = 0
        for article in queryset.select_related("tenant"):
            do_retire_article(article.tenant, article.pk)
            count += 1
        message = ngettext("%(count)d article retired.", "%(count)d articles retired.", count)
        self.message_user(request, message % {"count": count}, messages.SUCCESS)
