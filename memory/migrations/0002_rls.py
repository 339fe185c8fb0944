from django.db import migrations

from tenants.rls import disable_rls_sql, enable_rls_sql

TABLES = ["memory_memoryunit", "memory_memoryevent"]


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]

    operations = [migrations.RunSQL(enable_rls_sql(t), disable_rls_sql(t)) for t in TABLES]
