from django.db import migrations

from tenants.rls import disable_rls_sql, enable_rls_sql


class Migration(migrations.Migration):
    dependencies = [("chat", "0006_tool_batch")]

    operations = [
        migrations.RunSQL(enable_rls_sql("chat_tool"), disable_rls_sql("chat_tool")),
        migrations.RunSQL(enable_rls_sql("chat_batch"), disable_rls_sql("chat_batch")),
    ]
