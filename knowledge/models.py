"""The tenant's knowledge: articles, their versions with validity, and the passages search finds.

- ``Article`` — one help article of a tenant: its own id in the tenant's help centre (``external_id``), its tags,
  link and audience (``segment``); title and language repeat its newest version's, for lists.
- ``ArticleVersion`` — what the article said over one interval ``[valid_from, valid_until)`` (the seed's 保鲜期
  applied to knowledge): the body as given, its format and its sanitised text. An article's versions never
  overlap; ``valid_until`` null is open-ended. A version is never edited in place: a change is a new version
  (``knowledge.services``), so ``as_of`` finds what was true then.
- ``Passage`` — a piece of a version's text (``knowledge.passages``: at most ``PASSAGE_MAX_CHARS``), with its
  heading path, its segmented words and tsvector for the lexical leg and its embedding for the vector leg.

Every table is tenant-owned, with row-level security (migration ``knowledge.0001``).
"""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from pgvector.django import HnswIndex, VectorField

from memory.models import EMBEDDING_DIM
from tenants.models import Tenant
from tenants.scoping import TenantOwned


class Article(TenantOwned):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    #: The article's id in the tenant's own help centre; unique per tenant when given (imports update by it).
    external_id = models.CharField(max_length=200, null=True, blank=True)
    title = models.CharField(max_length=300)
    language = models.CharField(max_length=10)
    tags = ArrayField(models.CharField(max_length=50), default=list, blank=True)
    url = models.URLField(max_length=500, blank=True, default="")
    #: The audience: empty for everyone, else a customer segment ("vip", "enterprise"); knowledge search serves
    #: an article with a segment only to a search for that segment.
    segment = models.CharField(
        max_length=50, blank=True, default="", help_text=_("Empty: for every customer. Else only for this segment.")
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta(TenantOwned.Meta):
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "external_id"],
                condition=Q(external_id__isnull=False),
                name="uniq_article_external_id",
            )
        ]
        indexes = [models.Index(fields=["tenant", "-created_at"], name="article_by_tenant")]

    def __str__(self) -> str:
        return self.title


class ArticleVersion(TenantOwned):
    class Format(models.TextChoices):
        MARKDOWN = "markdown", _("Markdown")
        HTML = "html", _("HTML")

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    article = models.ForeignKey(Article, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    title = models.CharField(max_length=300)
    language = models.CharField(max_length=10)
    format = models.CharField(max_length=10, choices=Format.choices)
    #: The body as the tenant sent it (for the record; never served, searched or rendered as HTML).
    body = models.TextField()
    #: The sanitised text (``knowledge.content.render``): what passages are cut from.
    text = models.TextField()
    valid_from = models.DateTimeField()
    #: Null: open-ended. A version equal to its ``valid_from`` was cancelled before it began (a retire).
    valid_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta(TenantOwned.Meta):
        constraints = [
            models.UniqueConstraint(fields=["article", "number"], name="uniq_article_version"),
            models.CheckConstraint(
                condition=Q(valid_until__isnull=True) | Q(valid_until__gte=F("valid_from")),
                name="article_version_validity_order",
            ),
        ]
        indexes = [models.Index(fields=["tenant", "valid_from"], name="article_version_validity")]
        ordering = ["article", "number"]

    def __str__(self) -> str:
        return f"{self.title} v{self.number}"

    def valid_at(self, when: object) -> bool:
        """Whether this version is the one served at ``when`` (the SQL twin: ``knowledge.search.VALID_SQL``)."""
        return self.valid_from <= when and (self.valid_until is None or when < self.valid_until)  # type: ignore[operator]


class Passage(TenantOwned):
    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    version = models.ForeignKey(ArticleVersion, on_delete=models.CASCADE, related_name="passages")
    #: The short, stable id a reply cites (``knowledge.indexing.passage_public_id``).
    public_id = models.CharField(max_length=16)
    position = models.PositiveIntegerField()
    heading_path = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    text = models.TextField()
    #: Segmented words (``memory.text.document_text``) of the text, of the article's title and of the heading path.
    search_text = models.TextField(blank=True, default="")
    search_title = models.TextField(blank=True, default="")
    search_headings = models.TextField(blank=True, default="")
    search_vector = SearchVectorField(null=True)
    embedding = VectorField(dimensions=EMBEDDING_DIM, null=True, blank=True)
    embedding_model = models.CharField(max_length=60, blank=True, default="")

    class Meta(TenantOwned.Meta):
        constraints = [
            models.UniqueConstraint(fields=["version", "position"], name="uniq_passage_position"),
            models.UniqueConstraint(fields=["tenant", "public_id"], name="uniq_passage_public_id"),
        ]
        indexes = [
            GinIndex(fields=["search_vector"], name="passage_search_vector"),
            models.Index(fields=["tenant", "version"], name="passage_by_version"),
            # The vector leg's approximate nearest neighbours (knowledge.search): pgvector 0.8's iterative scan
            # keeps walking the graph until the tenant's valid passages fill the candidates.
            HnswIndex(
                name="passage_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]
        ordering = ["version", "position"]

    def __str__(self) -> str:
        return self.public_id


class Citation(TenantOwned):
    """A reply that cited a passage (``chat.turn.knowledge``): which reply (``message``) cited which article
    version, through which passage and under which label of its prompt. Written with the reply, in the same
    transaction (``knowledge.replies.do_record_citations``); never edited. The reply's end user erased, their
    messages go and these rows with them."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    message = models.ForeignKey("conversations.Message", on_delete=models.CASCADE, related_name="+")
    version = models.ForeignKey(ArticleVersion, on_delete=models.CASCADE, related_name="citations")
    #: The passage's public id (``Passage.public_id``): stable across re-indexing, what the reply's API shows.
    passage_id = models.CharField(max_length=16)
    #: The label the prompt gave the passage (``K1``…): what the reply's text says.
    label = models.CharField(max_length=8)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta(TenantOwned.Meta):
        constraints = [
            models.UniqueConstraint(fields=["message", "passage_id"], name="uniq_citation_per_reply"),
        ]
        indexes = [
            models.Index(fields=["tenant", "version", "-created_at"], name="citation_by_version"),
        ]
        ordering = ["-created_at", "id"]

    def __str__(self) -> str:
        return f"{self.label} → {self.passage_id}"


class ContentGap(TenantOwned):
    """A customer's question about the business that no passage answered well enough (``chat.turn.knowledge``):
    what a team should write next. One row per question; the admin groups them by ``group_key`` (the
    question's distinctive words, ``knowledge.replies.gap_key``), so 「周日几点关门？」 and 「你们周日几点关门呀」
    count together. The question's secrets are redacted before it is stored; it goes with its message."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    message = models.ForeignKey("conversations.Message", on_delete=models.CASCADE, related_name="+")
    text = models.TextField()
    group_key = models.CharField(max_length=200)
    #: The best passage's score (0: none found at all) — below the tenant's threshold, by definition.
    best_score = models.FloatField(default=0.0)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta(TenantOwned.Meta):
        indexes = [models.Index(fields=["tenant", "group_key"], name="content_gap_by_group")]
        ordering = ["-created_at", "id"]

    def __str__(self) -> str:
        return self.text[:80]
