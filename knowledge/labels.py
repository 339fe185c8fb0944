"""The admin's names for the knowledge app's models and fields (``config.labels``: why here, not in the models)."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

from config.labels import relabel
from knowledge.models import Article, ArticleVersion, Citation, ContentGap, Passage


def apply() -> None:
    relabel(
        Article, _("article"), _("articles"),
        id=_("ID"), tenant=_("tenant"), external_id=_("external ID"), title=_("title"), language=_("language"),
        tags=_("tags"), url=_("URL"), segment=_("segment"), created_at=_("created at"), updated_at=_("updated at"),
    )  # fmt: skip
    relabel(
        ArticleVersion, _("article version"), _("article versions"),
        id=_("ID"), tenant=_("tenant"), article=_("article"), number=_("version"), title=_("title"),
        language=_("language"), format=_("format"), body=_("body"), text=_("sanitised text"),
        valid_from=_("valid from"), valid_until=_("valid until"), created_at=_("created at"),
    )  # fmt: skip
    relabel(
        Passage, _("passage"), _("passages"),
        id=_("ID"), tenant=_("tenant"), version=_("version"), public_id=_("passage ID"), position=_("position"),
        heading_path=_("heading path"), text=_("text"), search_text=_("search text"),
        search_title=_("search title"), search_headings=_("search headings"), search_vector=_("search vector"),
        embedding=_("embedding"),
        embedding_model=_("embedding model"),
    )  # fmt: skip
    relabel(
        Citation, _("citation"), _("citations"),
        id=_("ID"), tenant=_("tenant"), message=_("reply"), version=_("version"), passage_id=_("passage ID"),
        label=_("label"), created_at=_("created at"),
    )  # fmt: skip
    relabel(
        ContentGap, _("content gap"), _("content gaps"),
        id=_("ID"), tenant=_("tenant"), message=_("message"), text=_("question"), group_key=_("group"),
        best_score=_("best score"), created_at=_("created at"),
    )  # fmt: skip
