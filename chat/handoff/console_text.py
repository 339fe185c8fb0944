"""The words the staff console's script shows (``chat/static/memdesk/console.js``), in the staff member's language.

The page hands them to the script as a JSON data block (``<script type="application/json" id="mdk-console-text">``,
with the response's CSP nonce like every inline ``<script>``): the script holds no text of its own, and the
catalogues (``locale/``) translate these like any other string. ``{name}`` marks a value the script fills in.
"""

from __future__ import annotations

import json

from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext_lazy as _

from conversations.models import ChatSession

CONSOLE_TEXT = {
    "online": _("Online"),
    "offline": _("Offline, reconnecting…"),
    "not_allowed": _("Not allowed: sign in as staff"),
    "released": _("Handed back to the AI"),
    "waiting": _("#{position} waiting"),
    "with": _("with {staff}"),
    "why": _("Why"),
    "customer": _("Customer"),
    "summary": _("Summary"),
    "memories": _("Memories"),
    "tool_calls": _("Open tool calls"),
    "who_customer": _("customer"),
    "who_staff": _("staff"),
    "who_ai": _("AI"),
    # A session's state, as the conversation's admin names it.
    **{f"state_{value}": label for value, label in ChatSession.State.choices},
}

#: json_script's escapes: the JSON can neither end the ``<script>`` element it sits in nor open another.
_IN_SCRIPT = str.maketrans({"<": "\\u003C", ">": "\\u003E", "&": "\\u0026"})


def console_text_json() -> SafeString:
    """:data:`CONSOLE_TEXT` in the active language, as JSON safe to put inside a ``<script>`` element."""
    text = json.dumps({key: str(value) for key, value in CONSOLE_TEXT.items()}, ensure_ascii=False)
    return mark_safe(text.translate(_IN_SCRIPT))  # noqa: S308 - escaped above, as django.utils.html.json_script does
