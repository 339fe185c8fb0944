# ChatSession and Message moved to the conversations app (docs/architecture.md: the conversation record
# sits below memory and chat). Their tables keep their names and rows: Django's state changes, the
# database does not.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0010_message_turn_lease"),
        ("conversations", "0001_initial"),
        ("memory", "0008_session_models_in_conversations"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="executioncontext",
                    name="session",
                    field=models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="context",
                        serialize=False,
                        to="conversations.chatsession",
                    ),
                ),
                migrations.AlterField(
                    model_name="batch",
                    name="session",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="batches",
                        to="conversations.chatsession",
                    ),
                ),
                migrations.DeleteModel(name="Message"),
                migrations.DeleteModel(name="ChatSession"),
            ],
            database_operations=[],
        ),
    ]
