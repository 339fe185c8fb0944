"""An article's body, as given, turned into clean text with its headings: the one place that reads Markdown and
HTML, and the one place that decides what of them may reach a passage, a prompt or a search index.

The danger it guards: an article's HTML comes from the tenant's help centre (or an export of it) and may hold
scripts, styles, event handlers and ``javascript:`` links. Whatever the format, the body goes through **nh3**
(the Python binding of the Rust *ammonia* sanitiser, maintained, html5ever's parser) before anything reads
it: scripts, styles and the other tags in :data:`DROPPED_WITH_CONTENT` go with their content; every other tag
that is not plain markup is removed. What remains is read as blocks — headings and paragraphs — and stored as
the version's ``text``: each heading a line of ``#`` marks and its words, paragraphs separated by blank lines,
no markup (:func:`render`). Only that text is ever split, indexed, searched or handed to the chat; the body as
given is kept for the record and shown escaped.

Markdown: ATX (``## Title``) and setext (``Title`` over ``===`` or ``---``) headings, fenced code kept as text
(a ``#`` inside it is no heading), list items, quotes and table rows as lines; links and images keep their
words, emphasis and code marks go. HTML inside Markdown is sanitised as above; a ``<`` that opens no tag
(``a<b``) stays text.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser

import nh3

FORMATS = ("markdown", "html")

#: Tags removed together with everything inside them (ammonia's default is script and style).
DROPPED_WITH_CONTENT = frozenset(
    {"script", "style", "title", "head", "noscript", "template", "iframe", "object", "embed", "svg", "math"}
)


@dataclass(frozen=True)
class Block:
    """A heading (``level`` 1–6) or a paragraph (``level`` 0) of clean text."""

    level: int
    text: str


# --- sanitising --------------------------------------------------------------------


def sanitize_html(body: str) -> str:
    """``body`` with everything but plain markup removed (nh3, :data:`DROPPED_WITH_CONTENT` with its content)."""
    return nh3.clean(body, clean_content_tags=set(DROPPED_WITH_CONTENT), link_rel=None)


#: A ``<`` that starts a complete tag or comment; any other ``<`` is text (``a<b``, ``< 5``).
_TAG_START = re.compile(r"<(?!/?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>|!--)")
_AUTOLINK = re.compile(r"<((?:https?|mailto):[^\s<>]+)>")


def _strip_tags(text: str) -> str:
    """Markdown text with its HTML removed (scripts and styles with their content), as plain text."""
    text = _AUTOLINK.sub(r"\1", text)
    text = _TAG_START.sub("&lt;", text.replace("&", "&amp;"))
    return html.unescape(nh3.clean(text, tags=set(), clean_content_tags=set(DROPPED_WITH_CONTENT)))


# --- Markdown ----------------------------------------------------------------------

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+")
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+")
_TABLE_RULE = re.compile(r"^[ \t]*\|?[ \t]*:?-{2,}:?[ \t]*(?:\|[ \t]*:?-{2,}:?[ \t]*)*\|?[ \t]*$")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\](?:\([^)]*\)|\[[^\]]*\])")
_EMPHASIS = re.compile(r"(\*\*|__|~~|\*|`+)(?=\S)(.+?)(?<=\S)\1")
_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|>~])")


def _inline(text: str) -> str:
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    for _ in range(3):  # nested emphasis (***x***, **`x`**)
        text = _EMPHASIS.sub(r"\2", text)
    return _ESCAPE.sub(r"\1", text).strip()


def markdown_blocks(body: str) -> list[Block]:
    """Headings and paragraphs of a Markdown body, sanitised."""
    blocks: list[Block] = []
    lines: list[str] = []

    def flush() -> None:
        text = "\n".join(line for line in lines if line)
        if text.strip():
            blocks.append(Block(0, text.strip()))
        lines.clear()

    fence: str | None = None
    for raw in _strip_tags(body).splitlines():
        if fence is not None:
            if raw.strip().startswith(fence):
                fence = None
                flush()
            else:
                lines.append(raw.rstrip())
            continue
        opened = _FENCE.match(raw)
        if opened:
            flush()
            fence = opened.group(1)
            continue
        atx = _ATX.match(raw)
        if atx:
            flush()
            title = _inline(atx.group(2) or "")
            if title:
                blocks.append(Block(len(atx.group(1)), title))
            continue
        setext = _SETEXT.match(raw)
        if setext and len(lines) == 1 and not _LIST_ITEM.match(lines[0]):
            title = _inline(lines[0])
            lines.clear()
            if title:
                blocks.append(Block(1 if setext.group(1)[0] == "=" else 2, title))
            continue
        if not raw.strip() or _RULE.match(raw):
            flush()
            continue
        if _TABLE_RULE.match(raw) and "-" in raw:
            continue
        line = _QUOTE.sub("", raw)
        item = _LIST_ITEM.match(line)
        if item:
            line = line[item.end() :]
        line = line.strip()
        if line.startswith("|") or line.endswith("|"):
            line = " | ".join(cell.strip() for cell in line.strip("|").split("|"))
        lines.append(_inline(line))
    flush()
    return blocks


# --- HTML --------------------------------------------------------------------------

_HEADINGS = {f"h{n}": n for n in range(1, 7)}
#: Tags that end a paragraph (a line break within one: ``br``, ``li``, ``tr``, ``dt``, ``dd``).
_BLOCK_TAGS = frozenset(
    {"p", "div", "section", "article", "header", "footer", "aside", "nav", "blockquote", "pre", "table", "ul",
     "ol", "dl", "figure", "figcaption", "hr", "details", "summary", "caption", "center", "hgroup"}
)  # fmt: skip
_LINE_TAGS = frozenset({"br", "li", "tr", "dt", "dd"})
_CELL_TAGS = frozenset({"td", "th"})
_SPACES = re.compile(r"[ \t\r\f\v]+")


class _BlockReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self._parts: list[str] = []
        self._heading = 0
        self._pre = 0

    def _flush(self) -> None:
        text = "".join(self._parts)
        self._parts.clear()
        lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
        text = "\n".join(line for line in lines if line)
        if not text:
            return
        if self._heading:
            self.blocks.append(Block(self._heading, " ".join(text.split("\n"))))
        else:
            self.blocks.append(Block(0, text))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HEADINGS:
            self._flush()
            self._heading = _HEADINGS[tag]
        elif tag in _BLOCK_TAGS:
            self._flush()
            if tag == "pre":
                self._pre += 1
        elif tag in _LINE_TAGS:
            self._parts.append("\n")
        elif tag in _CELL_TAGS:
            self._parts.append(" | " if self._parts and not self._parts[-1].endswith("\n") else "")

    def handle_endtag(self, tag: str) -> None:
        if tag in _HEADINGS:
            self._flush()
            self._heading = 0
        elif tag in _BLOCK_TAGS:
            self._flush()
            if tag == "pre" and self._pre:
                self._pre -= 1
        elif tag in _LINE_TAGS:
            self._parts.append("\n")

    def handle_data(self, data: str) -> None:
        self._parts.append(data if self._pre else data.replace("\n", " "))

    def close(self) -> None:
        super().close()
        self._flush()


def html_blocks(body: str) -> list[Block]:
    """Headings and paragraphs of an HTML body, sanitised first."""
    reader = _BlockReader()
    reader.feed(sanitize_html(body))
    reader.close()
    return reader.blocks


# --- both --------------------------------------------------------------------------


def blocks_of(body: str, fmt: str) -> list[Block]:
    """``body`` in ``fmt`` (one of :data:`FORMATS`) as clean blocks."""
    if fmt == "markdown":
        return markdown_blocks(body)
    if fmt == "html":
        return html_blocks(body)
    raise ValueError(f"format must be one of {FORMATS}, not {fmt!r}")


def render(blocks: list[Block]) -> str:
    """The version's stored ``text``: a heading as a line of ``#`` marks and its words, blocks apart by a blank
    line. For people (the admin, the API, a diff); passages are cut from the blocks themselves."""
    return "\n\n".join(("#" * block.level + " " + block.text) if block.level else block.text for block in blocks)


def title_of(blocks: list[Block]) -> str:
    """The first heading's words, or an empty string (the importer's fallback for a file without a title)."""
    return next((block.text for block in blocks if block.level), "")
