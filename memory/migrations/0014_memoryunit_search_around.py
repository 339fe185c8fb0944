"""A conversation unit's wider context (``search_around``): the turns before its own message and the one it
answers, indexed in ``search_vector`` at weight B for recall's lexical leg (docs/memory.md, "Found by what it was
about"). Rows written before have none (the database default), and read as they did."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0013_memoryunit_inline_vectors'),
    ]

    operations = [
        migrations.AddField(
            model_name='memoryunit',
            name='search_around',
            field=models.TextField(blank=True, db_default='', default=''),
        ),
    ]
