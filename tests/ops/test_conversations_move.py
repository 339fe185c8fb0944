"""Sessions and messages moved from the chat app to the conversations app in Django's state only: a database
written before the move keeps every row, and the new models read them (docs/architecture.md, "Layers")."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from conversations.models import ChatSession, Message
from memory.models import MemoryUnit
from tenants.rls import operator_scope

BEFORE = [
    ("tenants", "0003_tenant_last_cleanup_at"),
    ("chat", "0010_message_turn_lease"),
    ("memory", "0007_memoryunit_user_recent"),
]


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_the_move_are_read_by_the_moved_models():
    # given a database at the last migration before the move, with a session, a message and a memory of it
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    now = timezone.now()
    with operator_scope():
        tenant = old.get_model("tenants", "Tenant")._default_manager.create(slug="moved", name="Moved")
        end_user = old.get_model("tenants", "EndUser")._default_manager.create(tenant_id=tenant.pk, external_id="u-1")
        session = old.get_model("chat", "ChatSession")._default_manager.create(
            id=uuid.uuid4(), tenant_id=tenant.pk, end_user_id=end_user.pk, expires_at=now
        )
        message = old.get_model("chat", "Message")._default_manager.create(
            id=uuid.uuid4(), tenant_id=tenant.pk, session_id=session.pk, role="user", text="我的订单号是 ABC123", seq=1
        )
        old.get_model("memory", "MemoryUnit")._default_manager.create(
            id=uuid.uuid4(), tenant_id=tenant.pk, end_user_id=end_user.pk, session_id=session.pk,
            type="session_state", content="订单号 ABC123", source_message_id=message.pk,
            expires_at=now + timedelta(hours=1),
        )  # fmt: skip

    # when the migrations of the move run
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    # then the moved models read the same rows, relations included
    with operator_scope():
        moved_session = ChatSession.objects.unscoped(reason="test").get(pk=session.pk)
        moved_message = Message.objects.unscoped(reason="test").get(pk=message.pk)
        memory = MemoryUnit.objects.unscoped(reason="test").get(session_id=session.pk)
        assert moved_message.session_id == moved_session.pk
        assert moved_message.text == "我的订单号是 ABC123"
        assert memory.source_message_id == moved_message.pk
        assert ChatSession._meta.db_table == "chat_chatsession"
        assert Message._meta.db_table == "chat_message"
