"""An article's body sanitised: scripts, styles and handlers never reach its text, its passages or search."""

from __future__ import annotations

from knowledge.content import blocks_of, render


def test_html_scripts_styles_and_handlers_are_removed():
    # given HTML with a script, a style, an event handler and a javascript: link
    body = (
        "<html><head><title>T</title><style>p{color:red}</style></head><body>"
        "<h1 onclick='steal()'>Returns</h1><p>Return within <b>30 days</b>.<script>alert('x')</script></p>"
        "<a href='javascript:alert(1)'>click</a><iframe src='https://evil.example'>frame</iframe></body></html>"
    )
    # when it is read
    text = render(blocks_of(body, "html"))
    # then only the text remains
    assert text == "# Returns\n\nReturn within 30 days.\n\nclick"
    for bad in ("alert", "steal", "color", "javascript", "frame", "<"):
        assert bad not in text


def test_html_inside_markdown_is_sanitised_and_a_lone_angle_bracket_stays():
    # given Markdown with a script tag and a comparison
    body = "# 说明\n\n金额 a<b 时<script>alert(1)</script>免运费，详见 <https://example.com/help>。"
    # then the script is gone, the comparison and the link stay as text
    assert render(blocks_of(body, "markdown")) == "# 说明\n\n金额 a<b 时免运费，详见 https://example.com/help。"


def test_markdown_markup_goes_and_its_words_stay():
    body = (
        "Setext title\n===\n\n* **Bold** item with [a link](https://x.example)\n* `code` item\n\n"
        "```\n# not a heading\n```"
    )
    blocks = blocks_of(body, "markdown")
    assert [(b.level, b.text) for b in blocks] == [
        (1, "Setext title"),
        (0, "Bold item with a link\ncode item"),
        (0, "# not a heading"),
    ]
