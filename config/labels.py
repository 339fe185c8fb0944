"""Translatable names of memdesk's models and fields, as the admin shows them (column titles, form labels, the
index, breadcrumbs).

Why not ``verbose_name=`` in the models: a model's ``Meta.verbose_name`` and a field's ``verbose_name`` are part
of its migration state, so naming them there would mean a migration in every app for text that never reaches
the database. :func:`relabel` sets them when the apps are ready (each app's ``labels.py``, called from its
``AppConfig.ready``) on ``Options.verbose_name`` and ``Field.verbose_name``, which the admin reads; the migration
autodetector reads ``Options.original_attrs`` and the fields' constructor arguments, which this leaves alone.
Each English name is the one Django derived before (``"created at"``), tidied where that was wrong (``ID``,
``URL``, ``API key``, ``batches``).

Forms built when a module is imported (``class Meta: model = …``) take their labels then, before ``ready``: they
name their fields' labels themselves (``memory.admin.MemoryForm``). Help texts and choices labels stay in the
models (wrapped in ``gettext_lazy``: the same text, so their migration state does not change).
"""

from __future__ import annotations

from django.db import models
from django.utils.functional import Promise


def relabel(model: type[models.Model], singular: Promise, plural: Promise, /, **fields: Promise) -> None:
    """``model``'s verbose names and those of the ``fields`` named (each must exist); positional-only, so a
    field may be called ``name``."""
    opts = model._meta
    opts.verbose_name = singular
    opts.verbose_name_plural = plural
    for field_name, label in fields.items():
        opts.get_field(field_name).verbose_name = label
