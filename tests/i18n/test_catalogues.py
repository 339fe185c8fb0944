"""Every string memdesk marks for translation, in its own Python modules and templates, is in both catalogues,
and translated in the Chinese one.

The strings are extracted the way ``manage.py makemessages`` does it (templates turned into Python by Django's
``templatize``, then GNU ``xgettext`` with Django's keywords), into a temporary directory: the test writes
nothing into the repository. GNU ``msgcmp`` then compares the catalogues with what was extracted."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from django.utils.translation.template import templatize

ROOT = Path(__file__).resolve().parents[2]
LOCALE = ROOT / "locale"
APPS = ("config", "tenants", "conversations", "memory", "knowledge", "chat", "staff_auth")
#: The end user's chat page and widget carry their own Chinese and English (chat.js), not the catalogues'.
END_USER_PAGES = {"templates/chat/page.html", "templates/chat/widget.js"}
#: Django's own keywords (django.core.management.commands.makemessages), besides xgettext's gettext, _, ngettext.
KEYWORDS = (
    "gettext_noop", "gettext_lazy", "ngettext_lazy:1,2", "pgettext:1c,2", "npgettext:1c,2,3",
    "pgettext_lazy:1c,2", "npgettext_lazy:1c,2,3",
)  # fmt: skip


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        # .ci/run installs it (and stops if it cannot): there this test always runs.
        pytest.skip(f"GNU gettext's {name} is not installed (apt-get install gettext; .ci/run installs it)")
    return path


def _templates() -> list[Path]:
    roots = [ROOT / "templates", *(ROOT / app / "templates" for app in APPS)]
    found = [path for root in roots if root.is_dir() for path in root.rglob("*") if path.suffix in {".html", ".txt"}]
    return [path for path in found if str(path.relative_to(ROOT)) not in END_USER_PAGES]


def _extract(work: Path) -> Path:
    """A POT file of every string marked in memdesk's modules and templates."""
    sources = [path for app in APPS for path in (ROOT / app).rglob("*.py") if "migrations" not in path.parts]
    for template in _templates():
        # Named after the template, so a failure's location names it.
        target = work / (str(template.relative_to(ROOT)) + ".py")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(templatize(template.read_text(encoding="utf-8"), origin=str(template)), encoding="utf-8")
        sources.append(target)
    pot = work / "memdesk.pot"
    command = [
        _tool("xgettext"), "--language=Python", "--from-code=UTF-8", "--no-wrap", f"--output={pot}",
        *(f"--keyword={keyword}" for keyword in KEYWORDS), *map(str, sources),
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True)
    return pot


@pytest.fixture(scope="module")
def extracted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _extract(tmp_path_factory.mktemp("messages"))


def _msgcmp(catalogue: Path, pot: Path, *options: str) -> tuple[int, str]:
    """msgcmp's exit status and its complaints, without its warnings about entries no code uses any more."""
    result = subprocess.run([_tool("msgcmp"), *options, str(catalogue), str(pot)], capture_output=True, text=True)
    return result.returncode, "\n".join(line for line in result.stderr.splitlines() if "is not used" not in line)


def test_the_extraction_finds_the_staff_strings(extracted):
    # then: a string of a template, of an admin module and of the console's script are all there
    pot = extracted.read_text(encoding="utf-8")
    for msgid in ('msgid "Staff console"', 'msgid "Revoke selected keys"', 'msgid "Handed back to the AI"'):
        assert msgid in pot


def test_every_string_is_translated_in_the_chinese_catalogue(extracted):
    # when: missing, untranslated and fuzzy entries all count as absent
    status, complaints = _msgcmp(LOCALE / "zh_Hans/LC_MESSAGES/django.po", extracted)
    # then
    assert status == 0, (
        "strings missing or untranslated in locale/zh_Hans (makemessages, then translate):\n" + complaints
    )


def test_every_string_is_in_the_english_catalogue(extracted):
    # when: English may leave a msgstr empty (the msgid is the English text), but the entry must be there
    status, complaints = _msgcmp(LOCALE / "en/LC_MESSAGES/django.po", extracted, "--use-untranslated")
    # then
    assert status == 0, "strings missing from locale/en (run makemessages):\n" + complaints


@pytest.mark.parametrize("language", ["zh_Hans", "en"])
def test_each_catalogue_compiles_with_matching_placeholders(language, tmp_path):
    # when
    catalogue = LOCALE / language / "LC_MESSAGES/django.po"
    command = [_tool("msgfmt"), "--check", "-o", str(tmp_path / "django.mo"), str(catalogue)]
    result = subprocess.run(command, capture_output=True, text=True)
    # then: a translation that drops or renames a %(name)s or {name} fails here, not on a staff member's page
    assert result.returncode == 0, result.stderr
