"""manage.py expire_memories removes expired memories and prints counts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from memory.models import MemoryEvent, MemoryUnit
from memory.store import write as store
from tenants.rls import operator_scope
from tests.factories import open_session_obj


def test_removes_only_expired_and_keeps_history(acme, globex, capsys):
    a = open_session_obj(acme, "alice")
    g = open_session_obj(globex, "gina")
    past = timezone.now() - timedelta(days=3)
    store.do_write_memory(acme.tenant, a, type="fact_reference", content="old acme fact", expires_in=60, now=past)
    store.do_write_memory(acme.tenant, a, type="fact_reference", content="live acme fact")
    store.do_write_memory(globex.tenant, g, type="fact_reference", content="old globex fact", expires_in=60, now=past)

    call_command("expire_memories", "--tenant", "acme")

    out = capsys.readouterr().out
    assert "acme: 1 expired memories removed" in out
    with operator_scope():
        contents = set(MemoryUnit.objects.unscoped(reason="test").values_list("content", flat=True))
        deleted = MemoryEvent.objects.unscoped(reason="test").filter(kind="delete").get()
    assert contents == {"live acme fact", "old globex fact"}
    assert deleted.before["content"] == "old acme fact"


def test_older_than_keeps_recently_expired(acme, capsys):
    a = open_session_obj(acme, "alice")
    store.do_write_memory(
        acme.tenant, a, type="fact_reference", content="expired an hour ago", expires_in=60,
        now=timezone.now() - timedelta(hours=1),
    )  # fmt: skip
    call_command("expire_memories", "--older-than", "1")
    assert "total: 0" in capsys.readouterr().out


def test_unknown_tenant_is_an_error(db):
    with pytest.raises(CommandError, match="no tenant"):
        call_command("expire_memories", "--tenant", "nope")
