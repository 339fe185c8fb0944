"""Articles and their versions: ``check_*`` validates and raises a typed error, ``do_*`` writes, in one
transaction in the tenant's row-level-security scope.

Validity (the seed's 保鲜期 applied to knowledge). A version is served for ``[valid_from, valid_until)``;
``valid_until`` null is open-ended. The rules, one home each:

- **A new version** (``do_update_article``, an import of a changed article) starts at its ``valid_from``
  (default now) and supersedes the version current at that instant: that one's ``valid_until`` becomes the new
  ``valid_from``. It is refused (``overlapping_validity``) when it starts at or before the current version's own
  start (the old one would be left with nothing), or when it would overlap any other version (one scheduled
  later, unless the new one ends before it begins).
- **Retire** (``do_retire_article``) ends the version current at ``at`` (default now) at ``at``, and cancels the
  versions scheduled to start after it (their ``valid_until`` set to their ``valid_from``: kept for the record,
  never served). No version of the article is served after ``at`` until a new one is written.
- Versions are never edited in place and never deleted by these services: ``as_of`` finds what was true then.

Concurrency: every change of an article's versions first locks the article's row (``select_for_update``), so two
writers of one article take turns and the overlap check sees the other's version.

Bad input never stores anything: the whole input is checked (``check_article_input``) and embedded
(``knowledge.indexing.prepare_passages``) before the transaction opens, and the validity check runs inside it,
before the first write.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from config.errors import ApiError, NotFound
from config.ids import parse_uuid
from config.text_input import clean_text
from knowledge.content import FORMATS, Block, blocks_of, render, title_of
from knowledge.indexing import PreparedPassages, passage_public_id, prepare_passages, search_vector
from knowledge.models import Article, ArticleVersion, Passage
from memory.text import detect_language
from tenants.rls import tenant_scope

#: The most characters of one article's body, as given (markup included). A help article is a few thousand;
#: a longer text is several articles.
MAX_BODY_CHARS = 100_000
#: An import writing at least this many articles refreshes the planner's statistics of the knowledge tables.
ANALYZE_AFTER = 200
MAX_TITLE_CHARS = 300
MAX_TAGS = 20
MAX_TAG_CHARS = 50
MAX_SEGMENT_CHARS = 50
MAX_URL_CHARS = 500
MAX_EXTERNAL_ID_CHARS = 200
#: The languages an article may be written in (and ``zh-Hans``, ``en-US``… of them); absent: detected.
LANGUAGES = ("zh", "en")
FIELDS = frozenset(
    {"external_id", "title", "body", "format", "language", "tags", "url", "segment", "valid_from", "valid_until"}
)
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
_LANGUAGE = re.compile(r"^([a-z]{2})(?:[-_][A-Za-z0-9]{1,8})*$")


class InvalidArticle(ApiError):
    code = "invalid_article"


class EmptyBody(InvalidArticle):
    code = "empty_body"


class BodyTooLong(InvalidArticle):
    code = "body_too_long"


class UnknownLanguage(InvalidArticle):
    code = "unknown_language"


class UnknownFormat(InvalidArticle):
    code = "unknown_format"


class OverlappingValidity(InvalidArticle):
    code = "overlapping_validity"


class ArticleNotFound(NotFound):
    code = "article_not_found"


class DuplicateExternalId(ApiError):
    status = 409
    code = "duplicate_external_id"


@dataclass(frozen=True)
class ArticleInput:
    """An article's input, checked: clean strings, its blocks and sanitised text, its times (None: not given)."""

    title: str
    body: str
    format: str
    language: str
    blocks: list[Block]
    text: str
    external_id: str | None = None
    tags: list[str] = field(default_factory=list)
    url: str = ""
    segment: str = ""
    valid_from: datetime | None = None
    valid_until: datetime | None = None


# --- checks ------------------------------------------------------------------------


def parse_time(value: Any, field_name: str, *, error: type[ApiError] = InvalidArticle) -> datetime:
    """An ISO 8601 date and time with its zone, in UTC, or ``error`` naming the field."""
    invalid = error(f"{field_name} must be an ISO 8601 date and time with its zone", extra={"field": field_name})
    try:
        # ValueError: well-formed but impossible (month 13); OverflowError: out of range once in UTC
        parsed = parse_datetime(value) if isinstance(value, str) else None
        if parsed is None:
            raise invalid
        if parsed.tzinfo is None:
            raise error(f"{field_name} has no zone: say which (Z, +08:00, …)", extra={"field": field_name})
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        raise invalid from None


def _string(payload: dict[str, Any], name: str, limit: int, *, required: bool = False) -> str:
    value = payload.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise InvalidArticle(f"{name} must be a non-empty string", extra={"field": name})
    value = clean_text(value, field=name).strip()
    if len(value) > limit:
        raise InvalidArticle(f"{name} must be at most {limit} characters", extra={"field": name})
    return value


def _language(value: Any, text: str) -> str:
    if value is None or value == "":
        return detect_language(text)
    match = _LANGUAGE.match(value) if isinstance(value, str) else None
    base = match.group(1).lower() if match else None
    if base not in LANGUAGES:
        raise UnknownLanguage(
            f"language must be one of {', '.join(LANGUAGES)} (or a regional form of one), not {value!r}",
            extra={"field": "language"},
        )
    return base


def _tags(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_TAGS:
        raise InvalidArticle(f"tags must be a list of at most {MAX_TAGS} strings", extra={"field": "tags"})
    tags: list[str] = []
    for tag in value:
        if not isinstance(tag, str) or not tag.strip() or len(tag.strip()) > MAX_TAG_CHARS:
            raise InvalidArticle(
                f"each tag must be a string of 1 to {MAX_TAG_CHARS} characters", extra={"field": "tags"}
            )
        tag = clean_text(tag, field="tags").strip()
        if tag not in tags:
            tags.append(tag)
    return tags


def _url(value: Any) -> str:
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or len(value) > MAX_URL_CHARS:
        raise InvalidArticle(
            f"url must be an http(s) URL of at most {MAX_URL_CHARS} characters", extra={"field": "url"}
        )
    try:
        URLValidator(schemes=["http", "https"])(value)
    except ValidationError:
        raise InvalidArticle("url must be an http(s) URL", extra={"field": "url"}) from None
    return value


def check_article_input(payload: Any, *, default_title: str = "") -> ArticleInput:
    """``payload`` (API.md "Knowledge": the body of ``POST`` and ``PUT``) checked whole, or a typed 400 naming the
    field: ``invalid_article``, ``empty_body`` (nothing but markup, scripts or whitespace), ``body_too_long``
    (over ``MAX_BODY_CHARS``), ``unknown_format``, ``unknown_language``, ``invalid_text``. ``default_title``:
    the title when neither ``title`` nor a heading gives one (a file's name)."""
    if not isinstance(payload, dict):
        raise InvalidArticle("the body must be a JSON object")
    unknown = sorted(set(payload) - FIELDS)
    if unknown:
        raise InvalidArticle(f"unknown fields: {', '.join(unknown)}", extra={"field": unknown[0]})
    body = payload.get("body")
    if not isinstance(body, str) or not body.strip():
        raise EmptyBody("body must be a non-empty string", extra={"field": "body"})
    fmt = payload.get("format")
    if fmt not in FORMATS:
        raise UnknownFormat(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}", extra={"field": "format"})
    if len(body) > MAX_BODY_CHARS:
        raise BodyTooLong(f"body must be at most {MAX_BODY_CHARS} characters, not {len(body)}", extra={"field": "body"})
    body = clean_text(body, field="body")
    blocks = blocks_of(body, fmt)
    text = render(blocks)
    if not any(block.level == 0 for block in blocks):
        raise EmptyBody("body has no text once sanitised (markup, scripts and headings alone)", extra={"field": "body"})
    title = _string(payload, "title", MAX_TITLE_CHARS) or title_of(blocks)[:MAX_TITLE_CHARS] or default_title
    if not title:
        raise InvalidArticle("title must be a non-empty string", extra={"field": "title"})
    external_id = _string(payload, "external_id", MAX_EXTERNAL_ID_CHARS) or None
    segment = _string(payload, "segment", MAX_SEGMENT_CHARS)
    if segment and not _SEGMENT.match(segment):
        raise InvalidArticle("segment must be letters, digits and . _ : - (e.g. vip)", extra={"field": "segment"})
    valid_from = parse_time(payload["valid_from"], "valid_from") if payload.get("valid_from") is not None else None
    valid_until = parse_time(payload["valid_until"], "valid_until") if payload.get("valid_until") is not None else None
    return ArticleInput(
        title=title,
        body=body,
        format=fmt,
        language=_language(payload.get("language"), title + "\n" + text),
        blocks=blocks,
        text=text,
        external_id=external_id,
        tags=_tags(payload.get("tags")),
        url=_url(payload.get("url")),
        segment=segment,
        valid_from=valid_from,
        valid_until=valid_until,
    )


def _interval(checked: ArticleInput, now: datetime) -> tuple[datetime, datetime | None]:
    start = checked.valid_from or now
    if checked.valid_until is not None and checked.valid_until <= start:
        problem = "valid_until must be after valid_from" + ("" if checked.valid_from else " (now)")
        raise InvalidArticle(problem, code="invalid_validity", extra={"field": "valid_until"})
    return start, checked.valid_until


def _overlaps(a_from: datetime, a_until: datetime | None, b_from: datetime, b_until: datetime | None) -> bool:
    """Whether ``[a_from, a_until)`` and ``[b_from, b_until)`` share an instant (an empty interval shares none)."""
    if a_until is not None and a_until <= a_from or b_until is not None and b_until <= b_from:
        return False
    return (b_until is None or a_from < b_until) and (a_until is None or b_from < a_until)


def plan_new_version(
    versions: Sequence[ArticleVersion], start: datetime, until: datetime | None
) -> ArticleVersion | None:
    """The version a new one valid for ``[start, until)`` supersedes (None: none is current at ``start``), or
    ``OverlappingValidity``: the module's rules."""
    current = next((v for v in versions if v.valid_at(start)), None)
    if current is not None and start <= current.valid_from:
        raise OverlappingValidity(
            f"valid_from must be after the start of version {current.number} ({current.valid_from.isoformat()}), "
            "which it supersedes",
            extra={"field": "valid_from", "version": current.number},
        )
    for version in versions:
        if version is current:
            continue  # cut at ``start``: what remains ends before the new one begins
        if _overlaps(start, until, version.valid_from, version.valid_until):
            raise OverlappingValidity(
                f"the new version would overlap version {version.number} "
                f"(valid from {version.valid_from.isoformat()}"
                + (f" until {version.valid_until.isoformat()})" if version.valid_until else ")"),
                extra={"field": "valid_until" if until is not None else "valid_from", "version": version.number},
            )
    return current


# --- reads -------------------------------------------------------------------------


def get_article(tenant: Any, article_id: Any) -> Article:
    """The tenant's article, or 404 ``article_not_found`` (another tenant's is not found either)."""
    pk = parse_uuid(article_id, ArticleNotFound("no such article"))
    article = Article.objects.for_tenant(tenant).filter(pk=pk).first()
    if article is None:
        raise ArticleNotFound("no such article")
    return article


def versions_of(tenant: Any, article: Article) -> list[ArticleVersion]:
    return list(ArticleVersion.objects.for_tenant(tenant).filter(article=article).order_by("number"))


def shown_version(versions: Sequence[ArticleVersion], as_of: datetime | None, now: datetime) -> ArticleVersion | None:
    """The version an article is shown with: the one valid at ``as_of`` (None if none is); without ``as_of`` the
    one valid now, else the newest that was ever valid (a cancelled one is shown only when there is no other)."""
    if as_of is not None:
        return next((v for v in versions if v.valid_at(as_of)), None)
    served = [v for v in versions if v.valid_until is None or v.valid_until > v.valid_from]
    fallback = (served or list(versions) or [None])[-1]
    return next((v for v in versions if v.valid_at(now)), fallback)


def list_articles(
    tenant: Any, *, as_of: datetime | None = None, tag: str | None = None
) -> list[tuple[Article, ArticleVersion]]:
    """The tenant's articles with the version each is shown with (``shown_version``), newest article first;
    with ``as_of`` only those with a version valid then; with ``tag`` only those tagged so."""
    now = timezone.now()
    with tenant_scope(tenant):
        query = Article.objects.for_tenant(tenant).order_by("-created_at", "id")
        if tag:
            query = query.filter(tags__contains=[tag])
        articles = list(query)
        by_article: dict[Any, list[ArticleVersion]] = {}
        versions = ArticleVersion.objects.for_tenant(tenant).filter(article__in=[a.pk for a in articles])
        for version in versions.order_by("number"):
            by_article.setdefault(version.article_id, []).append(version)
    out = []
    for article in articles:
        version = shown_version(by_article.get(article.pk, []), as_of, now)
        if version is not None:
            out.append((article, version))
    return out


def describe_article(tenant: Any, article_id: Any) -> tuple[Article, list[ArticleVersion]]:
    """The tenant's article and all its versions, oldest first (404 ``article_not_found``)."""
    with tenant_scope(tenant):
        article = get_article(tenant, article_id)
        return article, versions_of(tenant, article)


# --- writes ------------------------------------------------------------------------


def _store_version(
    tenant: Any,
    article: Article,
    number: int,
    checked: ArticleInput,
    prepared: PreparedPassages,
    start: datetime,
    until: datetime | None,
    now: datetime,
) -> ArticleVersion:
    version = ArticleVersion.objects.create(
        tenant=tenant,
        article=article,
        number=number,
        title=checked.title,
        language=checked.language,
        format=checked.format,
        body=checked.body,
        text=checked.text,
        valid_from=start,
        valid_until=until,
        created_at=now,
    )
    Passage.objects.bulk_create(
        Passage(
            tenant=tenant,
            version=version,
            public_id=passage_public_id(article.pk, number, p.draft.position),
            position=p.draft.position,
            heading_path=list(p.draft.heading_path),
            text=p.draft.text,
            search_text=p.search_text,
            search_title=p.search_title,
            search_headings=p.search_headings,
            embedding=p.embedding,
            embedding_model=prepared.model if p.embedding is not None else "",
        )
        for p in prepared.passages
    )
    Passage.objects.for_tenant(tenant).filter(version=version).update(search_vector=search_vector())
    return version


def _apply_metadata(article: Article, checked: ArticleInput, now: datetime) -> None:
    article.title = checked.title
    article.language = checked.language
    article.tags = checked.tags
    article.url = checked.url
    article.segment = checked.segment
    if checked.external_id is not None:
        article.external_id = checked.external_id
    article.updated_at = now


def prepare(tenant: Any, checked: ArticleInput) -> PreparedPassages:
    """The checked input's passages, embedded (no database: call before the write's transaction)."""
    return prepare_passages(tenant, checked.title, checked.blocks)


def do_create_article(
    tenant: Any, checked: ArticleInput, prepared: PreparedPassages, *, now: datetime | None = None
) -> tuple[Article, ArticleVersion]:
    """A new article with its first version. 409 ``duplicate_external_id`` when the tenant has an article of that
    ``external_id`` (write a new version of it with ``PUT``)."""
    now = now or timezone.now()
    start, until = _interval(checked, now)
    with tenant_scope(tenant):
        if checked.external_id is not None:
            existing = Article.objects.for_tenant(tenant).filter(external_id=checked.external_id).first()
            if existing is not None:
                raise DuplicateExternalId(
                    f"an article with external_id {checked.external_id!r} exists: PUT a new version of it",
                    extra={"field": "external_id", "article_id": str(existing.pk)},
                )
        try:
            with transaction.atomic():
                article = Article(tenant=tenant, created_at=now)
                _apply_metadata(article, checked, now)
                article.save(force_insert=True)
                version = _store_version(tenant, article, 1, checked, prepared, start, until, now)
        except IntegrityError:  # the same external_id created concurrently
            raise DuplicateExternalId(
                f"an article with external_id {checked.external_id!r} exists", extra={"field": "external_id"}
            ) from None
    return article, version


def _locked(tenant: Any, article_id: Any) -> Article:
    article = get_article(tenant, article_id)
    return Article.objects.for_tenant(tenant).select_for_update().get(pk=article.pk)


def do_update_article(
    tenant: Any, article_id: Any, checked: ArticleInput, prepared: PreparedPassages, *, now: datetime | None = None
) -> tuple[Article, ArticleVersion]:
    """A new version of the article, superseding the one current at its ``valid_from`` (the module's rules)."""
    now = now or timezone.now()
    start, until = _interval(checked, now)
    with tenant_scope(tenant):
        article = _locked(tenant, article_id)
        if checked.external_id is not None and checked.external_id != article.external_id:
            other = Article.objects.for_tenant(tenant).filter(external_id=checked.external_id).exclude(pk=article.pk)
            if other.exists():
                raise DuplicateExternalId(
                    f"another article has external_id {checked.external_id!r}", extra={"field": "external_id"}
                )
        versions = versions_of(tenant, article)
        current = plan_new_version(versions, start, until)
        if current is not None:
            ArticleVersion.objects.for_tenant(tenant).filter(pk=current.pk).update(valid_until=start)
        number = max((v.number for v in versions), default=0) + 1
        version = _store_version(tenant, article, number, checked, prepared, start, until, now)
        _apply_metadata(article, checked, now)
        article.save()
    return article, version


def do_retire_article(tenant: Any, article_id: Any, *, at: datetime | None = None) -> Article:
    """No version of the article is served after ``at`` (default now): the current one ends at ``at``, those
    scheduled after it are cancelled. Retiring a retired article changes nothing."""
    now = timezone.now()
    at = at or now
    with tenant_scope(tenant):
        article = _locked(tenant, article_id)
        versions = ArticleVersion.objects.for_tenant(tenant).filter(article=article)
        versions.filter(valid_from__lt=at).exclude(valid_until__lte=at).update(valid_until=at)
        later = versions.filter(valid_from__gte=at).exclude(valid_until__isnull=False, valid_until__lte=at)
        for version in later:
            ArticleVersion.objects.for_tenant(tenant).filter(pk=version.pk).update(valid_until=version.valid_from)
        article.updated_at = now
        article.save(update_fields=["updated_at"])
    return article


# --- bulk import -------------------------------------------------------------------


@dataclass(frozen=True)
class ImportItem:
    """One article of an import: where it came from (``item``: "line 3" or "file returns.md"), checked."""

    origin: str
    checked: ArticleInput


@dataclass
class ImportCounts:
    created: int = 0
    updated: int = 0
    unchanged: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"created": self.created, "updated": self.updated, "unchanged": self.unchanged}


def _same(version: ArticleVersion, article: Article, checked: ArticleInput) -> bool:
    return (
        (version.title, version.body, version.format, version.language)
        == (checked.title, checked.body, checked.format, checked.language)
        and (article.tags, article.url, article.segment) == (checked.tags, checked.url, checked.segment)
        and (checked.valid_from is None or checked.valid_from == version.valid_from)
        and checked.valid_until == version.valid_until
    )


def check_import_items(items: Sequence[ImportItem]) -> None:
    """The import as a whole: each ``external_id`` at most once (a second would be a second article or an
    ambiguous version)."""
    seen: dict[str, str] = {}
    for item in items:
        key = item.checked.external_id
        if key is None:
            continue
        if key in seen:
            raise InvalidArticle(
                f"external_id {key!r} appears twice ({seen[key]} and {item.origin})",
                code="invalid_import",
                extra={"field": "external_id", "item": item.origin},
            )
        seen[key] = item.origin


def needs_write(tenant: Any, item: ImportItem) -> bool:
    """Whether importing ``item`` writes anything: false when the tenant's article of its ``external_id`` has a
    newest version that says the same (so an import run twice embeds and writes nothing twice)."""
    checked = item.checked
    if checked.external_id is None:
        return True
    with tenant_scope(tenant):
        existing = Article.objects.for_tenant(tenant).filter(external_id=checked.external_id).first()
        if existing is None:
            return True
        newest = ArticleVersion.objects.for_tenant(tenant).filter(article=existing).order_by("-number").first()
        return newest is None or not _same(newest, existing, checked)


def do_import_article(tenant: Any, item: ImportItem, prepared: PreparedPassages, counts: ImportCounts) -> None:
    """One checked article of an import: created; or, when the tenant has one of its ``external_id``, a new
    version if anything differs from the newest (``needs_write``), else nothing."""
    checked = item.checked
    with tenant_scope(tenant), transaction.atomic():
        existing = None
        if checked.external_id is not None:
            existing = Article.objects.for_tenant(tenant).filter(external_id=checked.external_id).first()
        if existing is None:
            do_create_article(tenant, checked, prepared)
            counts.created += 1
            return
        if not needs_write(tenant, item):
            counts.unchanged += 1
            return
        do_update_article(tenant, existing.pk, checked, prepared)
        counts.updated += 1


#: Passages of an import item that writes nothing: never embedded, never stored.
NOTHING = PreparedPassages(model="", passages=[])


def do_import_articles(
    tenant: Any, items: Sequence[ImportItem], *, progress: Callable[[str, int], None] | None = None
) -> ImportCounts:
    """Every article of an import in one transaction: a refused one (``overlapping_validity``…, naming its
    ``item``) stores none of them. Only the items that write something are embedded, before the transaction.
    ``progress("embed" | "write", n)`` is called after each item of either step (the command's progress bar).
    An import writing :data:`ANALYZE_AFTER` articles or more ends with ``ANALYZE`` of the knowledge tables, so the
    first searches after it plan on the tables' new sizes."""
    check_import_items(items)
    prepared = []
    for item in items:
        prepared.append(prepare(tenant, item.checked) if needs_write(tenant, item) else NOTHING)
        if progress is not None:
            progress("embed", 1)
    counts = ImportCounts()
    with tenant_scope(tenant), transaction.atomic():
        for item, passages in zip(items, prepared, strict=True):
            with origin_named(item.origin):
                do_import_article(tenant, item, passages, counts)
            if progress is not None:
                progress("write", 1)
    if counts.created + counts.updated >= ANALYZE_AFTER:
        # The planner's statistics still describe the tables before the import (autovacuum analyses later):
        # the first searches of a tenant it does not know yet would plan as for a handful of rows.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE knowledge_article, knowledge_articleversion, knowledge_passage")
    return counts


@contextmanager
def origin_named(origin: str) -> Iterator[None]:
    """An error raised in the block says which item of an import it is about (``item``: "line 3", "file a.md")."""
    try:
        yield
    except ApiError as exc:
        exc.extra.setdefault("item", origin)
        if not exc.message.startswith(origin):
            exc.message = f"{origin}: {exc.message}"
        raise
