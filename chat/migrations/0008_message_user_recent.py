"""The per-tenant rate limit's index: a tenant's user messages by time.

Built ``CONCURRENTLY`` so a large ``chat_message`` keeps taking writes while
it builds (hence a non-atomic migration)."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("chat", "0007_tool_batch_rls"),
        ("tenants", "0003_tenant_last_cleanup_at"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="message",
            index=models.Index(
                condition=models.Q(("role", "user")), fields=["tenant", "created_at"], name="message_user_recent"
            ),
        ),
    ]
