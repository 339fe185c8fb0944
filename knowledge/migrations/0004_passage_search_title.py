"""The article's title gets its own search column and weight (``knowledge.indexing``): search counts a word of
the title, what the whole article is about, apart from the passage's own words and its section's headings.

Existing passages are re-indexed here: ``search_title`` from their version's title, ``search_headings`` from their
heading path alone (it held the title too), ``search_vector`` from the three. Row-level security is bypassed for
this one transaction (every tenant's passages are re-indexed the same way)."""

from django.db import migrations, models

BATCH = 2000


def reindex(apps, schema_editor):
    from knowledge.indexing import HEADINGS_WEIGHT, TITLE_WEIGHT
    from memory.text import TS_CONFIG, document_text
    from tenants.rls import tenant_db_scope

    alias = schema_editor.connection.alias
    with tenant_db_scope((), bypass=True, using=alias), schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT p.id, v.title, p.heading_path FROM knowledge_passage p"
            " JOIN knowledge_articleversion v ON v.id = p.version_id ORDER BY p.id"
        )
        rows = cursor.fetchall()
        for start in range(0, len(rows), BATCH):
            cursor.executemany(
                "UPDATE knowledge_passage SET search_title = %s, search_headings = %s WHERE id = %s",
                [
                    (document_text([title]), document_text(list(headings or [])), passage_id)
                    for passage_id, title, headings in rows[start : start + BATCH]
                ],
            )
        cursor.execute(
            f"""UPDATE knowledge_passage SET search_vector =
                to_tsvector('{TS_CONFIG}'::regconfig, COALESCE(search_text, ''))
                || setweight(to_tsvector('{TS_CONFIG}'::regconfig, COALESCE(search_title, '')), '{TITLE_WEIGHT}')
                || setweight(to_tsvector('{TS_CONFIG}'::regconfig, COALESCE(search_headings, '')), '{HEADINGS_WEIGHT}')
            """  # noqa: S608 - our own constants
        )


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0003_passage_embedding_hnsw"),
    ]

    operations = [
        migrations.AddField(
            model_name="passage",
            name="search_title",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.RunPython(reindex, migrations.RunPython.noop),
    ]
