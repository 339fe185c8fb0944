# Every tenant-owned table's row-level security policy reads its settings in sub-selects, evaluated once per
# statement instead of for every row (tenants.rls.POLICY_USING): the same rows visible, a long read cheaper.
# Above every app that creates a policy, as chat.0012.

from django.db import migrations

from tenants.rls import POLICY_USING, POLICY_USING_PER_ROW, alter_every_policy_sql


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0012_rls_policy_compares_uuids"),
        ("conversations", "0005_retention_indexes"),
        ("memory", "0013_memoryunit_inline_vectors"),
        ("tenants", "0006_handoff"),
        ("staff_auth", "0002_staffpreference"),
    ]

    operations = [
        migrations.RunSQL(alter_every_policy_sql(POLICY_USING), alter_every_policy_sql(POLICY_USING_PER_ROW)),
    ]
