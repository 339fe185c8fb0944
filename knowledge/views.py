"""REST views of the tenant's knowledge (API.md "Knowledge"; tenant API key): parse, call ``knowledge.services``
or ``knowledge.search``, serialize.

The views are ``self_scoped``: the request middleware does not wrap them in one request transaction, because a
write embeds its passages (and a search its query) before its own short transaction opens; every service call
opens the tenant's row-level-security scope itself.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.errors import ApiError
from config.parsers import BoundedJSONParser
from knowledge import services
from knowledge.files import InvalidImport, items_from_files, items_from_jsonl
from knowledge.models import Article, ArticleVersion
from knowledge.search import MAX_K, search
from memory.serializers import parse_as_of
from tenants.throttles import KnowledgeThrottle

MAX_QUERY_CHARS = 1000


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z") if value is not None else None


def serialize_article(article: Article, version: ArticleVersion) -> dict[str, Any]:
    """API.md's Article: the article with the version it is shown with (``services.shown_version``)."""
    return {
        "id": str(article.pk),
        "external_id": article.external_id,
        "title": version.title,
        "language": version.language,
        "tags": list(article.tags),
        "url": article.url,
        "segment": article.segment,
        "version": version.number,
        "valid_from": _iso(version.valid_from),
        "valid_until": _iso(version.valid_until),
        "created_at": _iso(article.created_at),
    }


def serialize_version(version: ArticleVersion) -> dict[str, Any]:
    return {
        "version": version.number,
        "title": version.title,
        "language": version.language,
        "format": version.format,
        "valid_from": _iso(version.valid_from),
        "valid_until": _iso(version.valid_until),
        "created_at": _iso(version.created_at),
        "text": version.text,
    }


def _as_of(raw: Any) -> datetime | None:
    try:
        return parse_as_of(raw)
    except serializers.ValidationError:
        raise ApiError("as_of must be an ISO 8601 date-time, e.g. 2026-11-30T12:00:00Z", code="invalid_as_of") from None


_TIME = serializers.DateTimeField(required=False, allow_null=True)
ArticleIn = inline_serializer(
    "KnowledgeArticleIn",
    {
        "external_id": serializers.CharField(required=False, allow_null=True),
        "title": serializers.CharField(),
        "body": serializers.CharField(),
        "format": serializers.ChoiceField(choices=["markdown", "html"]),
        "language": serializers.CharField(required=False, allow_null=True),
        "tags": serializers.ListField(child=serializers.CharField(), required=False),
        "url": serializers.URLField(required=False, allow_blank=True),
        "segment": serializers.CharField(required=False, allow_blank=True),
        "valid_from": _TIME,
        "valid_until": _TIME,
    },
)
_ARTICLE_FIELDS = {
    "id": serializers.UUIDField(),
    "external_id": serializers.CharField(allow_null=True),
    "title": serializers.CharField(),
    "language": serializers.CharField(),
    "tags": serializers.ListField(child=serializers.CharField()),
    "url": serializers.CharField(),
    "segment": serializers.CharField(),
    "version": serializers.IntegerField(),
    "valid_from": serializers.DateTimeField(),
    "valid_until": serializers.DateTimeField(allow_null=True),
    "created_at": serializers.DateTimeField(),
}
ArticleOut = inline_serializer("KnowledgeArticle", _ARTICLE_FIELDS)
VersionOut = inline_serializer(
    "KnowledgeArticleVersion",
    {
        "version": serializers.IntegerField(),
        "title": serializers.CharField(),
        "language": serializers.CharField(),
        "format": serializers.CharField(),
        "valid_from": serializers.DateTimeField(),
        "valid_until": serializers.DateTimeField(allow_null=True),
        "created_at": serializers.DateTimeField(),
        "text": serializers.CharField(),
    },
)
ArticleDetailOut = inline_serializer(
    "KnowledgeArticleDetail", {**_ARTICLE_FIELDS, "versions": serializers.ListField(child=VersionOut)}
)
ArticleListOut = inline_serializer("KnowledgeArticleList", {"articles": serializers.ListField(child=ArticleOut)})
RetireIn = inline_serializer("KnowledgeRetireIn", {"at": _TIME})
SearchIn = inline_serializer(
    "KnowledgeSearchIn",
    {
        "query": serializers.CharField(),
        "as_of": _TIME,
        "k": serializers.IntegerField(required=False, min_value=1, max_value=MAX_K),
        "segment": serializers.CharField(required=False, allow_null=True),
    },
)
SearchOut = inline_serializer(
    "KnowledgeSearchResults",
    {
        "results": serializers.ListField(
            child=inline_serializer(
                "KnowledgeSearchResult",
                {
                    "article_id": serializers.UUIDField(),
                    "version": serializers.IntegerField(),
                    "title": serializers.CharField(),
                    "url": serializers.CharField(),
                    "passage_id": serializers.CharField(),
                    "text": serializers.CharField(),
                    "score": serializers.FloatField(),
                },
            )
        )
    },
)
ImportOut = inline_serializer(
    "KnowledgeImportResult",
    {
        "created": serializers.IntegerField(),
        "updated": serializers.IntegerField(),
        "unchanged": serializers.IntegerField(),
    },
)


class KnowledgeView(APIView):
    self_scoped = True
    throttle_classes = [KnowledgeThrottle]


def _detail(tenant: Any, article_id: Any) -> dict[str, Any]:
    article, versions = services.describe_article(tenant, article_id)
    shown = services.shown_version(versions, None, timezone.now())
    body = serialize_article(article, shown) if shown is not None else {}
    return {**body, "versions": [serialize_version(v) for v in versions]}


class ArticleListView(KnowledgeView):
    @extend_schema(
        operation_id="knowledge_articles_list",
        parameters=[
            OpenApiParameter("as_of", OpenApiTypes.DATETIME, description="only articles valid then, as they were"),
            OpenApiParameter("tag", str),
        ],
        responses={200: ArticleListOut},
    )
    def get(self, request: Request) -> Response:
        tag = request.query_params.get("tag") or None
        pairs = services.list_articles(request.tenant, as_of=_as_of(request.query_params.get("as_of")), tag=tag)
        return Response({"articles": [serialize_article(article, version) for article, version in pairs]})

    @extend_schema(operation_id="knowledge_articles_create", request=ArticleIn, responses={201: ArticleOut})
    def post(self, request: Request) -> Response:
        checked = services.check_article_input(request.data)
        prepared = services.prepare(request.tenant, checked)
        article, version = services.do_create_article(request.tenant, checked, prepared)
        return Response(serialize_article(article, version), status=status.HTTP_201_CREATED)


class ArticleDetailView(KnowledgeView):
    @extend_schema(operation_id="knowledge_article", responses={200: ArticleDetailOut})
    def get(self, request: Request, article_id: str) -> Response:
        return Response(_detail(request.tenant, article_id))

    @extend_schema(operation_id="knowledge_article_new_version", request=ArticleIn, responses={200: ArticleOut})
    def put(self, request: Request, article_id: str) -> Response:
        services.describe_article(request.tenant, article_id)  # 404 before any embedding
        checked = services.check_article_input(request.data)
        prepared = services.prepare(request.tenant, checked)
        article, version = services.do_update_article(request.tenant, article_id, checked, prepared)
        return Response(serialize_article(article, version))


class ArticleRetireView(KnowledgeView):
    @extend_schema(operation_id="knowledge_article_retire", request=RetireIn, responses={200: ArticleDetailOut})
    def post(self, request: Request, article_id: str) -> Response:
        data = request.data if isinstance(request.data, dict) else None
        if data is None or set(data) - {"at"}:
            raise services.InvalidArticle('the body is {"at"?: "<ISO 8601 time>"}')
        at = services.parse_time(data["at"], "at") if data.get("at") is not None else None
        services.do_retire_article(request.tenant, article_id, at=at)
        return Response(_detail(request.tenant, article_id))


class KnowledgeSearchView(KnowledgeView):
    @extend_schema(operation_id="knowledge_search", request=SearchIn, responses={200: SearchOut})
    def post(self, request: Request) -> Response:
        data = request.data if isinstance(request.data, dict) else {}
        query = data.get("query")
        if not isinstance(query, str) or not query.strip() or len(query) > MAX_QUERY_CHARS:
            raise ApiError(f"query must be a string of 1 to {MAX_QUERY_CHARS} characters", code="invalid_query")
        k = data.get("k", 5)
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            raise ApiError(f"k must be an integer from 1 to {MAX_K}", code="invalid_k")
        segment = data.get("segment")
        if segment is not None and not isinstance(segment, str):
            raise ApiError("segment must be a string", code="invalid_query")
        hits = search(request.tenant, query.strip(), as_of=_as_of(data.get("as_of")), k=k, segment=segment)
        return Response({"results": [hit.as_dict() for hit in hits]})


class JsonLinesParser(BaseParser):
    """A JSON Lines body, handed to the view as text (``knowledge.files.items_from_jsonl`` reads it)."""

    media_type = "application/x-ndjson"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> str:
        try:
            return stream.read().decode("utf-8-sig") if stream is not None else ""
        except UnicodeDecodeError:
            raise InvalidImport("the body must be UTF-8 JSON Lines") from None


class JsonLinesAliasParser(JsonLinesParser):
    media_type = "application/jsonl"


class KnowledgeImportView(KnowledgeView):
    parser_classes = [JsonLinesParser, JsonLinesAliasParser, MultiPartParser, BoundedJSONParser]

    @extend_schema(
        operation_id="knowledge_import",
        request={
            "application/x-ndjson": OpenApiTypes.STR,
            "multipart/form-data": inline_serializer(
                "KnowledgeImportFiles", {"files": serializers.ListField(child=serializers.FileField())}
            ),
        },
        responses={200: ImportOut},
        description="Many articles at once: JSON Lines (one article per line, the body of POST "
        "/api/v1/knowledge/articles) or Markdown and HTML files (multipart). All or nothing: a bad article stores "
        "none (docs/knowledge.md).",
    )
    def post(self, request: Request) -> Response:
        if isinstance(request.data, str):
            items = items_from_jsonl(request.data)
        elif request.FILES:
            files = [(f.name, f.read()) for name in request.FILES for f in request.FILES.getlist(name)]
            items = items_from_files(files)
        else:
            raise InvalidImport("send JSON Lines (application/x-ndjson) or files (multipart/form-data)")
        counts = services.do_import_articles(request.tenant, items)
        return Response(counts.as_dict())
