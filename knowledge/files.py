"""An import's input read into checked articles (``knowledge.services.ImportItem``), each named by where it came
from, so an error says "line 3" or "file returns/refunds.md". Used by ``POST /api/v1/knowledge/import`` and
``manage.py import_knowledge``.

- **JSON Lines**: one article per line, each the body of ``POST /api/v1/knowledge/articles``; blank lines skipped.
- **Files**: ``.md``/``.markdown`` (Markdown) and ``.html``/``.htm`` (HTML), UTF-8. A file's ``external_id`` is its
  name (its path under the imported folder), so importing the folder again updates each article instead of
  adding it twice. Its title is its first heading, else the file name. A Markdown file may start with front
  matter between ``---`` lines: ``title``, ``external_id``, ``language``, ``tags`` (comma-separated), ``url``,
  ``segment``, ``valid_from``, ``valid_until`` as ``key: value`` lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from config.errors import ApiError
from config.text_input import loads_bounded
from knowledge.services import ImportItem, InvalidArticle, UnknownFormat, check_article_input, origin_named

#: The most articles one import takes (the request body's own limit, ``MAX_REQUEST_BYTES``, applies first to
#: ``POST /api/v1/knowledge/import``; the command has no body limit and takes any number).
MAX_IMPORT_ARTICLES = 500
SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html"}
FRONT_MATTER_KEYS = frozenset(
    {"title", "external_id", "language", "tags", "url", "segment", "valid_from", "valid_until"}
)
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


class InvalidImport(InvalidArticle):
    code = "invalid_import"


def _checked(origin: str, payload: Any, default_title: str = "") -> ImportItem:
    with origin_named(origin):
        checked = check_article_input(payload, default_title=default_title)
    return ImportItem(origin=origin, checked=checked)


def items_from_jsonl(text: str, *, limit: int | None = MAX_IMPORT_ARTICLES) -> list[ImportItem]:
    """The articles of a JSON Lines document, checked, or the first error naming its line; at most ``limit``."""
    items: list[ImportItem] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        origin = f"line {number}"
        try:
            payload = loads_bounded(line)
        except ValueError as exc:
            raise InvalidImport(f"{origin}: not JSON ({exc})", extra={"item": origin}) from None
        items.append(_checked(origin, payload))
        _check_count(items, limit)
    if not items:
        raise InvalidImport("the import holds no article")
    return items


def _front_matter(text: str, origin: str) -> tuple[dict[str, Any], str]:
    match = _FRONT_MATTER.match(text)
    if match is None:
        return {}, text
    fields: dict[str, Any] = {}
    for line in match.group(1).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or key not in FRONT_MATTER_KEYS:
            raise InvalidImport(
                f"{origin}: front matter lines are 'key: value' with a key of {', '.join(sorted(FRONT_MATTER_KEYS))}",
                extra={"item": origin, "field": key},
            )
        value = value.strip().strip("\"'")
        fields[key] = [t.strip() for t in value.split(",") if t.strip()] if key == "tags" else value
    return fields, text[match.end() :]


def item_from_file(name: str, content: bytes) -> ImportItem:
    """One Markdown or HTML file (``name``: its path under the import, ``/``-separated), checked."""
    origin = f"file {name}"
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in SUFFIXES:
        raise UnknownFormat(
            f"{origin}: only {', '.join(sorted(SUFFIXES))} files are imported",
            extra={"item": origin, "field": "format"},
        )
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidImport(f"{origin}: not UTF-8 text", extra={"item": origin}) from None
    fields: dict[str, Any] = {}
    if SUFFIXES[suffix] == "markdown":
        fields, text = _front_matter(text, origin)
    payload = {"external_id": name, **fields, "body": text, "format": SUFFIXES[suffix]}
    return _checked(origin, payload, default_title=PurePosixPath(name).stem.replace("_", " ").replace("-", " "))


def items_from_files(files: Iterable[tuple[str, bytes]]) -> list[ImportItem]:
    items = []
    for name, content in files:
        items.append(item_from_file(name, content))
        _check_count(items)
    if not items:
        raise InvalidImport("the import holds no article")
    return items


def _check_count(items: list[ImportItem], limit: int | None = MAX_IMPORT_ARTICLES) -> None:
    if limit is not None and len(items) > limit:
        raise InvalidImport(f"at most {limit} articles per import")


def items_from_path(path: Path) -> list[ImportItem]:
    """A folder's ``.md``/``.html`` files (recursively, in name order) or a ``.jsonl`` file, with no limit on the
    count (the command). Raises ``ApiError`` naming the first bad item."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        items = [item_from_file(p.relative_to(path).as_posix(), p.read_bytes()) for p in files]
    elif path.suffix.lower() in (".jsonl", ".ndjson"):
        items = items_from_jsonl(path.read_text(encoding="utf-8-sig"), limit=None)
    elif path.suffix.lower() in SUFFIXES:
        items = [item_from_file(path.name, path.read_bytes())]
    else:
        raise ApiError(f"{path}: give a folder of .md/.html files or a .jsonl file", code="invalid_import")
    if not items:
        raise InvalidImport(f"{path}: no article to import")
    return items
