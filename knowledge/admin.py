"""The tenant's articles in the admin: read-only, with their version history and what changed between one version
and the next. Articles are written through the API and the importer (``knowledge.services``), which keep the
validity rules; staff with an owner's or admin's role may retire an article from here (the same service).

For a team deciding what to write next:

- **What would the agent find** (``…/knowledge/article/find/``, linked from the articles' list): a question and
  an optional date and segment → the passages ``knowledge.search_knowledge`` answers, with their scores, exactly
  as a chat turn would get them.
- **Which replies cited which version**: each article's page lists its versions' citations (``Citation``), and
  the citations have a list of their own.
- **Content gaps**: the questions about the business that found nothing, grouped by their words with counts,
  the most asked first (``knowledge.replies.content_gaps``).
"""

from __future__ import annotations

import difflib
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from knowledge import search_knowledge
from knowledge.models import Article, ArticleVersion, Citation, ContentGap
from knowledge.replies import content_gaps
from knowledge.services import do_retire_article
from tenants.admin_base import EDIT_ROLES, TenantScopedAdmin, member_tenant_ids
from tenants.models import Tenant

#: The most lines of one diff shown (a rewritten article is better read version by version).
MAX_DIFF_LINES = 400


def version_diff(older: ArticleVersion, newer: ArticleVersion) -> list[str]:
    """What changed from ``older`` to ``newer``: a unified diff of their titles and sanitised texts."""
    before = [f"# {older.title}", "", *older.text.splitlines()]
    after = [f"# {newer.title}", "", *newer.text.splitlines()]
    lines = difflib.unified_diff(before, after, f"v{older.number}", f"v{newer.number}", lineterm="", n=2)
    return list(lines)[:MAX_DIFF_LINES]


#: The most citations an article's page lists (the citations' own list has them all).
MAX_CITATIONS_SHOWN = 50


def staff_tenants(request: HttpRequest) -> QuerySet:
    """The tenants whose knowledge this staff member may read: every tenant for a superuser, else their own."""
    if request.user.is_superuser:
        return Tenant.objects.order_by("slug")
    return Tenant.objects.filter(pk__in=member_tenant_ids(request.user)).order_by("slug")


class FindForm(forms.Form):
    """What would the agent find: the question as a customer would ask it, when, and for which segment."""

    tenant = forms.ModelChoiceField(queryset=Tenant.objects.none(), label=_("tenant"))
    question = forms.CharField(max_length=2000, label=_("question"))
    as_of = forms.DateTimeField(required=False, label=_("as of"), help_text=_("Empty: now."))
    segment = forms.CharField(required=False, max_length=50, label=_("segment"))

    def __init__(self, *args: Any, tenants: QuerySet, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = tenants  # type: ignore[attr-defined]
        if tenants.count() == 1:
            self.fields["tenant"].initial = tenants.first()


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
              "updated_at", "cited_by", "history")  # fmt: skip
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

    def get_urls(self) -> list[Any]:
        find = self.admin_site.admin_view(self.find_view)
        return [path("find/", find, name="knowledge_article_find"), *super().get_urls()]

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        links = {"find_url": reverse("admin:knowledge_article_find"), "gaps_url": reverse(
            "admin:knowledge_contentgap_changelist")}  # fmt: skip
        return super().changelist_view(request, {**(extra_context or {}), **links})

    def find_view(self, request: HttpRequest) -> HttpResponse:
        """What would the agent find for this question (the module's docstring)."""
        if not self.has_view_permission(request):
            return self.admin_site.login(request) if not request.user.is_authenticated else HttpResponse(status=403)
        form = FindForm(request.GET or None, tenants=staff_tenants(request))
        hits = None
        if form.is_valid():
            data = form.cleaned_data
            hits = search_knowledge(
                data["tenant"], data["question"], as_of=data["as_of"], k=10, segment=data["segment"] or None
            )
        context = {**self.admin_site.each_context(request), "title": _("What would the agent find?"), "form": form,
                   "hits": hits, "opts": self.model._meta}  # fmt: skip
        return TemplateResponse(request, "admin/knowledge/find.html", context)

    @admin.display(description=_("cited by replies"))
    def cited_by(self, obj: Article) -> SafeString:
        rows = list(
            Citation.all_objects.filter(tenant_id=obj.tenant_id, version__article=obj)
            .select_related("version")
            .order_by("-created_at")[:MAX_CITATIONS_SHOWN]
        )
        if not rows:
            return format_html("{}", _("No reply has cited this article yet."))
        body = format_html_join(
            "",
            "<tr><td>v{}</td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td></tr>",
            ((c.version.number, c.created_at.strftime("%Y-%m-%d %H:%M"), c.passage_id, c.message_id) for c in rows),
        )
        titles = (_("version"), _("when"), _("passage ID"), _("reply"))
        head = format_html("<tr>{}</tr>", format_html_join("", "<th>{}</th>", ((t,) for t in titles)))
        return format_html("<table>{}{}</table>", head, body)

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


class ReadOnlyAdmin(TenantScopedAdmin):
    """Rows the chat turn writes and staff only read."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Citation)
class CitationAdmin(ReadOnlyAdmin):
    """Which reply cited which article version, newest first."""

    list_display = ("created_at", "tenant", "article_title", "version_number", "label", "passage_id", "message")
    list_filter = ("tenant",)
    search_fields = ("passage_id", "version__title")
    list_select_related = ("version", "tenant")
    ordering = ("-created_at",)
    raw_id_fields = ("message", "version")

    @admin.display(description=_("article"))
    def article_title(self, obj: Citation) -> str:
        return obj.version.title

    @admin.display(description=_("version"))
    def version_number(self, obj: Citation) -> int:
        return obj.version.number


@admin.register(ContentGap)
class ContentGapAdmin(ReadOnlyAdmin):
    """The questions that found nothing, grouped by their words with counts (the module's docstring); a group's
    questions one by one through the list's search (``?q=``) or its ``group_key``."""

    list_display = ("created_at", "tenant", "text", "group_key", "best_score")
    list_filter = ("tenant",)
    search_fields = ("text", "group_key")
    ordering = ("-created_at",)
    raw_id_fields = ("message",)

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        if request.GET or not self.has_view_permission(request):
            return super().changelist_view(request, extra_context)  # a search or a filter: the questions themselves
        groups = [(tenant, content_gaps(tenant)) for tenant in staff_tenants(request)]
        context = {**self.admin_site.each_context(request), "title": _("Content gaps"), "opts": self.model._meta,
                   "groups": [(t, g) for t, g in groups if g]}  # fmt: skip
        return TemplateResponse(request, "admin/knowledge/content_gaps.html", context)
