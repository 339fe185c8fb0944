# The row-level security policy of every tenant-owned table compares tenant_id as a uuid (tenants.rls.POLICY_USING_PER_ROW):
# same rows visible, better plans. Here, above every app that creates a policy, so it runs after all of them.

from django.db import migrations

from tenants.rls import POLICY_USING_PER_ROW, POLICY_USING_TEXT, alter_every_policy_sql


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0011_session_models_in_conversations"),
        ("conversations", "0005_retention_indexes"),
        ("memory", "0011_retention_indexes"),
        ("tenants", "0006_handoff"),
    ]

    operations = [
        migrations.RunSQL(alter_every_policy_sql(POLICY_USING_PER_ROW), alter_every_policy_sql(POLICY_USING_TEXT)),
    ]
