"""Helpers for the knowledge tests: an article written through the service (as the API and the importer write
them), with its times given."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from knowledge import services


def write_article(ctx: Any, body: str, *, title: str = "Article", fmt: str = "markdown", **fields: Any) -> Any:
    """A new article through ``do_create_article`` (``fields``: the API's, e.g. ``valid_from`` as ISO text)."""
    checked = services.check_article_input({"title": title, "body": body, "format": fmt, **fields})
    article, _ = services.do_create_article(ctx.tenant, checked, services.prepare(ctx.tenant, checked))
    return article


def new_version(ctx: Any, article: Any, body: str, *, title: str = "Article", **fields: Any) -> Any:
    checked = services.check_article_input({"title": title, "body": body, "format": "markdown", **fields})
    return services.do_update_article(ctx.tenant, article.pk, checked, services.prepare(ctx.tenant, checked))[1]


def iso(value: datetime) -> str:
    return value.isoformat()
