"""``manage.py compile_catalogues``: the staff pages' message catalogues (``LOCALE_PATHS``' ``*.po``) compiled to
the ``.mo`` files Django reads, in pure Python (polib), so ``make run`` needs no GNU gettext. Only catalogues
whose ``.mo`` is missing or older than the ``.po`` are written; fuzzy and untranslated entries are left out, as
``msgfmt`` leaves them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polib
from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Compile the message catalogues (locale/*/LC_MESSAGES/*.po) to .mo, without GNU gettext."

    def handle(self, *args: Any, **options: Any) -> None:
        written = 0
        for root in settings.LOCALE_PATHS:
            for po in sorted(Path(root).glob("*/LC_MESSAGES/*.po")):
                mo = po.with_suffix(".mo")
                if mo.exists() and mo.stat().st_mtime >= po.stat().st_mtime:
                    continue
                polib.pofile(str(po)).save_as_mofile(str(mo))
                written += 1
        if options["verbosity"] > 0:
            self.stdout.write(f"compile_catalogues: {written} catalogue(s) compiled")
