from django.db import migrations

from tenants.rls import disable_rls_sql, enable_rls_sql


class Migration(migrations.Migration):
    dependencies = [("chat", "0003_session_state_and_context")]

    operations = [migrations.RunSQL(enable_rls_sql("chat_executioncontext"), disable_rls_sql("chat_executioncontext"))]
