"""The user's reaction to the agent's previous reply (S13): a bare
confirmation confirms the memories that reply used, wherever that reply lies
in the session (the turn reads it from its recent messages, or on its own
when many messages have come since)."""

from __future__ import annotations

import pytest

from chat.prompt.build import SUMMARY_MESSAGES
from conversations.access import resolve_session
from conversations.models import Message
from memory.models import MemoryEvent, MemoryUnit
from tenants.rls import tenant_scope
from tests.factories import open_session, turn_steps

pytestmark = pytest.mark.django_db


def _confirmations(ctx):
    """Keys of the memories the user's confirmations confirmed."""
    with tenant_scope(ctx.tenant):
        ids = (
            MemoryEvent.objects.for_tenant(ctx.tenant)
            .filter(kind=MemoryEvent.Kind.CONFIRM, note="the user confirmed it")
            .values_list("memory_id", flat=True)
        )
        return list(MemoryUnit.objects.for_tenant(ctx.tenant).filter(pk__in=list(ids)).values_list("key", flat=True))


@pytest.fixture
def session(acme):
    return resolve_session(acme.tenant, open_session(acme, "alice")["session_id"])


@pytest.fixture
def phone_used(acme, session):
    """A first turn whose reply repeats (uses) the phone number the user gave."""
    turn_steps(acme, session, "我的手机号是 13912345678", "好的，已记录您的手机号 13912345678。")
    with tenant_scope(acme.tenant):
        reply = Message.objects.for_tenant(acme.tenant).get(session=session, role=Message.Role.ASSISTANT)
        phone = MemoryUnit.objects.for_tenant(acme.tenant).get(key="phone", superseded_at__isnull=True)
    assert str(phone.pk) in reply.data["used"]
    return phone


def test_a_confirmation_confirms_what_the_previous_reply_used(acme, session, phone_used):
    # when
    turn_steps(acme, session, "对的", "好的。")
    # then
    assert _confirmations(acme) == ["phone"]


def test_the_previous_reply_is_found_beyond_the_recent_messages(acme, session, phone_used):
    # given: more messages since that reply than a turn reads for its history
    with tenant_scope(acme.tenant):
        last = Message.objects.for_tenant(acme.tenant).filter(session=session).order_by("-seq").first()
        Message.objects.bulk_create(
            Message(tenant=acme.tenant, session=session, role=Message.Role.TOOL, text="{}", seq=last.seq + i + 1)
            for i in range(SUMMARY_MESSAGES + 5)
        )
    # when
    turn_steps(acme, session, "对的", "好的。")
    # then
    assert _confirmations(acme) == ["phone"]


def test_a_message_that_neither_confirms_nor_corrects_gives_no_feedback(acme, session, phone_used):
    turn_steps(acme, session, "运费怎么算", "运费十元。")
    assert _confirmations(acme) == []


def test_a_turn_indexes_the_agents_question_with_the_users_answer(acme, session):
    # given the agent asked for an e-mail address and the user answered with the address alone
    turn_steps(acme, session, "你好", "请问您的联系邮箱是什么？")
    turn_steps(acme, session, "zhang.wei@example.com", "好的，已记录。")
    # then the e-mail memory carries the question (the runtime passes the previous message) as context
    with tenant_scope(acme.tenant):
        email = MemoryUnit.objects.for_tenant(acme.tenant).get(key="email", superseded_at__isnull=True)
    assert "邮箱" in email.search_context.split()


def test_a_reply_that_repeats_a_recalled_memory_raises_it_and_audits_it_and_leaves_the_rest(acme, session):
    # given two memories the next turn recalls
    turn_steps(acme, session, "我叫张伟，手机号是 13912345678", "好的。")
    with tenant_scope(acme.tenant):
        before = dict(MemoryUnit.objects.for_tenant(acme.tenant).values_list("key", "relevance_score"))
    assert {"name", "phone"} <= set(before)

    # when the reply repeats the phone number only
    prepared = turn_steps(acme, session, "帮我查一下我的手机号和名字", "您的手机号是 13912345678。")

    # then the phone is used (+0.1, use_count 1, one "use" event naming the reply); the name is untouched
    with tenant_scope(acme.tenant):
        rows = {m.key: m for m in MemoryUnit.objects.for_tenant(acme.tenant).filter(superseded_at__isnull=True)}
        reply = Message.objects.for_tenant(acme.tenant).filter(session=session, role="assistant").latest("seq")
        uses = list(MemoryEvent.objects.for_tenant(acme.tenant).filter(kind=MemoryEvent.Kind.USE))
    assert str(rows["phone"].pk) in prepared.recalled
    assert reply.data["used"] == [str(rows["phone"].pk)]
    assert rows["phone"].relevance_score == pytest.approx(before["phone"] + 0.1)
    assert rows["phone"].use_count == 1
    assert rows["name"].relevance_score == before["name"]
    assert rows["name"].use_count == 0
    assert [(e.memory_id, e.note, e.before, e.after) for e in uses] == [
        (rows["phone"].pk, f"value appears in reply {reply.pk}", {"relevance_score": 1.0}, {"relevance_score": 1.1})
    ]
