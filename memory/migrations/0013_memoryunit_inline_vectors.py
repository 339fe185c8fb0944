"""An end user's recall window, read faster (docs/memory.md, "Long histories").

* ``toast_tuple_target`` 4080 (of the 8,160 a page allows) and ``embedding``, ``search_vector`` STORAGE MAIN:
  recall reads the vector and the tsvector of every row of the window (up to 2,000). A unit's row is about
  2.3 kB, 1.5 kB of it the vector; at PostgreSQL's default of ~2 kB the vector, the largest column, went out
  of line, and each row of the window cost a TOAST lookup. In a row larger still (a long context) the text
  columns go out of line first. Rows written before keep their layout until rewritten (``VACUUM FULL
  memory_memoryunit``, or pg_repack online).
* The window's index and the keyed lookups' index end with ``expires_at``: a row no longer valid (an expired
  unit, every superseded value of a key) is passed over in the index instead of read from the table and
  dropped. ``mem_user_window`` replaces ``mem_user_recent``, ``mem_user_key_valid`` replaces ``mem_user_key``.
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memory', '0012_memoryunit_user_key'),
    ]

    operations = [
        migrations.RunSQL(
            sql=[
                "ALTER TABLE memory_memoryunit SET (toast_tuple_target = 4080)",
                "ALTER TABLE memory_memoryunit ALTER COLUMN embedding SET STORAGE MAIN",
                "ALTER TABLE memory_memoryunit ALTER COLUMN search_vector SET STORAGE MAIN",
            ],
            reverse_sql=[
                "ALTER TABLE memory_memoryunit ALTER COLUMN search_vector SET STORAGE EXTENDED",
                "ALTER TABLE memory_memoryunit ALTER COLUMN embedding SET STORAGE EXTERNAL",
                "ALTER TABLE memory_memoryunit RESET (toast_tuple_target)",
            ],
        ),
        migrations.AddIndex(
            model_name='memoryunit',
            index=models.Index(fields=['tenant', 'end_user', '-created_at', 'expires_at'], name='mem_user_window'),
        ),
        migrations.RemoveIndex(model_name='memoryunit', name='mem_user_recent'),
        migrations.AddIndex(
            model_name='memoryunit',
            index=models.Index(fields=['tenant', 'end_user', 'key', 'expires_at'], name='mem_user_key_valid'),
        ),
        migrations.RemoveIndex(model_name='memoryunit', name='mem_user_key'),
    ]
