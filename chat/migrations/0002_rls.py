from django.db import migrations

from tenants.rls import disable_rls_sql, enable_rls_sql

TABLES = ["chat_chatsession", "chat_message"]


class Migration(migrations.Migration):
    dependencies = [("chat", "0001_initial")]

    operations = [migrations.RunSQL(enable_rls_sql(t), disable_rls_sql(t)) for t in TABLES]
