from django.db import migrations
from pgvector.django import VectorExtension

from tenants.rls import disable_rls_sql, enable_rls_sql


class Migration(migrations.Migration):
    dependencies = [("tenants", "0001_initial")]

    operations = [
        # Created by the embedded bootstrap (or an operator) as a superuser; a
        # no-op then. On a database where the app role may create it, it does.
        VectorExtension(),
        migrations.RunSQL(enable_rls_sql("tenants_enduser"), disable_rls_sql("tenants_enduser")),
    ]
