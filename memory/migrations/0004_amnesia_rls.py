from django.db import migrations

from tenants.rls import disable_rls_sql, enable_rls_sql


class Migration(migrations.Migration):
    dependencies = [("memory", "0003_amnesiaalert")]

    operations = [migrations.RunSQL(enable_rls_sql("memory_amnesiaalert"), disable_rls_sql("memory_amnesiaalert"))]
