"""Batch writes (``write_memories``): one embedding call and one transaction for
several memories, with the same guarantees as ``do_write_memory``."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from config.errors import ApiError
from conversations.models import Message
from memory.embeddings import models as embeddings
from memory.extraction.run import extract_and_store
from memory.models import MemoryEvent, MemoryUnit
from memory.store import audit, indexing
from memory.store import read as fetch
from memory.store import write as store
from memory.store.write import MemoryItem
from memory.topics import warm_up_domains
from tenants.rls import tenant_scope
from tests.factories import open_session_obj
from tests.memory.conftest import race


@pytest.fixture
def embed_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The texts of every ``embeddings.embed`` call (the real model still runs)."""
    calls: list[list[str]] = []
    real = embeddings.embed

    def counting(texts: Any, **kwargs: Any) -> Any:
        calls.append(list(texts))
        return real(texts, **kwargs)

    monkeypatch.setattr(embeddings, "embed", counting)
    return calls


def _rows(tenant: Any, **filters: Any) -> list[MemoryUnit]:
    with tenant_scope(tenant):
        return list(MemoryUnit.objects.for_tenant(tenant).filter(**filters).order_by("created_at", "id"))


def _events(tenant: Any, memory_id: Any) -> list[str]:
    with tenant_scope(tenant):
        return list(MemoryEvent.objects.for_tenant(tenant).filter(memory_id=memory_id).values_list("kind", flat=True))


def _full_text_ids(tenant: Any, term: str) -> set[Any]:
    with tenant_scope(tenant), connection.cursor() as cursor:
        cursor.execute("SELECT id FROM memory_memoryunit WHERE search_vector @@ plainto_tsquery('english', %s)", [term])
        return {row[0] for row in cursor.fetchall()}


def test_batch_creates_every_memory_with_its_event_vector_and_search_vector(acme, acme_session, embed_calls):
    # given three facts of one message
    items = [
        MemoryItem(
            type="fact_reference", key="order_id", content="订单号：JD2024123456", data={"order_id": "JD2024123456"}
        ),
        MemoryItem(type="user_profile", key="phone", content="用户手机号：13912345678"),
        MemoryItem(type="session_state", content="The customer asks about a late refund"),
    ]

    # when
    results = store.write_memories(acme.tenant, acme_session, items, actor=audit.END_USER)

    # then one embedding call for all three, three rows, one create event each
    assert embed_calls == [[item.content for item in items]]
    assert [r.outcome for r in results] == ["created", "created", "created"]
    rows = {m.pk: m for m in _rows(acme.tenant)}
    assert set(rows) == {r.memory.pk for r in results}
    for result in results:
        stored = rows[result.memory.pk]
        assert stored.embedding is not None
        assert len(stored.embedding) == 384
        assert stored.embedding_model == embeddings.model_for(acme.tenant, stored.type)  # a Chinese tenant: USE
        assert stored.search_vector
        assert _events(acme.tenant, stored.pk) == ["create"]
    assert rows[results[2].memory.pk].session_id == acme_session.pk  # session-scoped type
    assert rows[results[1].memory.pk].session_id is None
    # and the segmented Chinese term and the English words match through full text
    assert _full_text_ids(acme.tenant, "订单号") == {results[0].memory.pk}
    assert _full_text_ids(acme.tenant, "单号") == {results[0].memory.pk}
    assert _full_text_ids(acme.tenant, "refunds") == {results[2].memory.pk}


@pytest.mark.parametrize("context", ["", "What did you paint? A sunset over the lake"])
def test_a_written_row_holds_every_field_and_the_search_vector_of_its_text_and_context(acme, acme_session, context):
    # when a memory with data, a source message and (or not) a context is written
    with tenant_scope(acme.tenant):
        source = Message.objects.for_tenant(acme.tenant).create(
            tenant=acme.tenant, session=acme_session, role="user", text="订单号 JD2024123456", seq=1
        )
    written = store.do_write_memory(
        acme.tenant, acme_session, type="fact_reference", key="order_id", content="订单号：JD2024123456",
        data={"order_id": "JD2024123456", "note": "加急"}, expires_in=3600, source_message=source,
        source_role="user", context=context,
    ).memory  # fmt: skip

    # then the stored row is the instance, field by field
    with tenant_scope(acme.tenant):
        stored = MemoryUnit.objects.for_tenant(acme.tenant).get(pk=written.pk)
        fields = [f for f in MemoryUnit._meta.concrete_fields if f.name not in ("embedding", "search_vector")]
        for field in fields:
            assert getattr(stored, field.attname) == getattr(written, field.attname), field.name
        assert list(stored.embedding) == pytest.approx(list(written.embedding), abs=1e-6)
        # and its search_vector is exactly what ``indexing.search_vector`` computes for its text and context
        expected = indexing.search_vector(stored.search_text, stored.search_context)
        row = MemoryUnit.objects.for_tenant(acme.tenant).filter(pk=written.pk).annotate(expected=expected)
        [(vector, wanted)] = row.values_list("search_vector", "expected")
    assert vector == wanted
    assert "jd2024123456" in vector.lower()
    assert ("paint" in vector) == bool(context)
    assert stored.search_context == indexing.context_text(context)
    assert bool(stored.search_context) == bool(context)


def test_single_write_stores_its_search_vector_in_the_insert(acme, acme_session):
    # when
    written = store.do_write_memory(acme.tenant, acme_session, type="fact_reference", content="快递单号：SF1234567890")

    # then
    assert _full_text_ids(acme.tenant, "快递") == {written.memory.pk}


def test_keyed_item_in_a_batch_replaces_the_live_memory_and_chains_in_batch_repeats(acme, acme_session):
    # given a live phone number
    old = store.do_write_memory(acme.tenant, acme_session, type="user_profile", key="phone", content="手机 13800000000")

    # when a batch changes it twice and repeats the last value
    results = store.write_memories(
        acme.tenant,
        acme_session,
        [
            MemoryItem(type="user_profile", key="phone", content="手机 13900000000"),
            MemoryItem(type="user_profile", key="name", content="用户姓名 张伟"),
            MemoryItem(type="user_profile", key="phone", content="手机 13700000000"),
            MemoryItem(type="user_profile", key="phone", content="手机 13700000000"),
        ],
    )

    # then
    assert [r.outcome for r in results] == ["replaced", "created", "replaced", "refreshed"]
    first, _, second, again = results
    assert first.replaced.pk == old.memory.pk
    assert second.replaced.pk == first.memory.pk
    assert again.memory.pk == second.memory.pk
    phones = {m.pk: m for m in _rows(acme.tenant, key="phone")}
    assert len(phones) == 3
    live = [m for m in phones.values() if m.superseded_at is None]
    assert [m.content for m in live] == ["手机 13700000000"]
    assert live[0].confirm_count == 1
    assert phones[old.memory.pk].superseded_by_id == first.memory.pk
    assert phones[first.memory.pk].superseded_by_id == second.memory.pk
    assert phones[first.memory.pk].expires_at == phones[first.memory.pk].created_at  # never valid on its own
    assert _events(acme.tenant, old.memory.pk) == ["create", "replace"]
    assert _events(acme.tenant, first.memory.pk) == ["create", "replace"]
    assert _events(acme.tenant, second.memory.pk) == ["create", "confirm"]
    visible = fetch.list_memories(acme.tenant, acme_session, type="user_profile")
    assert {m.content for m in visible} == {"用户姓名 张伟", "手机 13700000000"}


def test_repeated_fact_costs_no_embedding_and_still_counts_a_confirmation(acme, acme_session, embed_calls):
    # given
    first = store.do_write_memory(acme.tenant, acme_session, type="user_profile", key="name", content="用户姓名 张伟")
    embed_calls.clear()

    # when the same fact comes again, alone and in a batch
    again = store.do_write_memory(acme.tenant, acme_session, type="user_profile", key="name", content="用户姓名 张伟")
    batch = store.write_memories(
        acme.tenant, acme_session, [MemoryItem(type="user_profile", key="name", content="用户姓名 张伟")]
    )

    # then no embedding, no new row, two confirmations
    assert embed_calls == []
    assert again.outcome == "refreshed"
    assert batch[0].outcome == "refreshed"
    assert again.memory.pk == batch[0].memory.pk == first.memory.pk
    [row] = _rows(acme.tenant, key="name")
    assert row.confirm_count == 2
    assert row.relevance_score == 1.0
    assert _events(acme.tenant, row.pk) == ["create", "confirm", "confirm"]


@pytest.mark.parametrize("microsecond", [0, 123456])
def test_a_refresh_audits_the_expiry_before_and_after_as_snapshot_writes_them(acme, acme_session, microsecond):
    # given a memory whose expiry is on a whole second (isoformat then omits the fraction) or not
    from datetime import timedelta

    from django.utils import timezone

    first = store.do_write_memory(
        acme.tenant, acme_session, type="user_profile", key="name", content="用户姓名 张伟", data={"name": "张伟"}
    )
    expiry = (timezone.now() + timedelta(hours=1)).replace(microsecond=microsecond)
    with tenant_scope(acme.tenant):
        MemoryUnit.objects.for_tenant(acme.tenant).filter(pk=first.memory.pk).update(
            expires_at=expiry, relevance_score=1.23456
        )
        before = audit.snapshot(MemoryUnit.objects.for_tenant(acme.tenant).get(pk=first.memory.pk))

    # when the same fact comes again
    again = store.do_write_memory(
        acme.tenant,
        acme_session,
        type="user_profile",
        key="name",
        content="用户姓名 张伟",
        data={"name": "张伟"},
        expires_in=7 * 86400,
    )

    # then the confirm event holds exactly what snapshot() gives for the row before and after
    assert again.outcome == "refreshed"
    with tenant_scope(acme.tenant):
        row = MemoryUnit.objects.for_tenant(acme.tenant).get(pk=first.memory.pk)
        event = MemoryEvent.objects.for_tenant(acme.tenant).get(memory_id=row.pk, kind="confirm")
    assert before["expires_at"] == expiry.isoformat()
    assert event.before == before
    assert event.after == audit.snapshot(row)
    assert event.after["expires_at"] != event.before["expires_at"]
    assert (event.actor, event.note, event.end_user_id) == ("system", "repeated fact", row.end_user_id)
    assert audit.snapshot(again.memory) == event.after


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        (MemoryItem(type="fact_reference", content="长" * 151), "content_too_long"),
        (MemoryItem(type="no_such_type", content="whatever"), "unknown_type"),
    ],
)
def test_a_bad_item_fails_the_whole_batch_and_leaves_stored_data_intact(acme, acme_session, embed_calls, bad, code):
    # given a live memory and its history
    old = store.do_write_memory(acme.tenant, acme_session, type="user_profile", key="phone", content="手机 13800000000")
    embed_calls.clear()

    # when the second item of a batch is bad
    with pytest.raises(ApiError) as raised:
        store.write_memories(
            acme.tenant,
            acme_session,
            [
                MemoryItem(type="user_profile", key="phone", content="手机 13900000000"),
                bad,
                MemoryItem(type="fact_reference", content="订单号：JD2024000001"),
            ],
        )

    # then a clear error names the item, and nothing was embedded or written
    assert raised.value.code == code
    assert raised.value.extra == {"index": 1}
    assert raised.value.message.startswith("items[1]: ")
    assert embed_calls == []
    [row] = _rows(acme.tenant)
    assert (row.pk, row.content, row.superseded_at) == (old.memory.pk, "手机 13800000000", None)
    assert _events(acme.tenant, row.pk) == ["create"]


def test_an_empty_batch_writes_nothing(acme, acme_session):
    assert store.write_memories(acme.tenant, acme_session, []) == []
    assert _rows(acme.tenant) == []


def test_extraction_stores_a_messages_facts_with_one_embedding_call(acme, acme_session, embed_calls):
    # given the topic model's examples embedded, as a worker's warm-up does once per process
    warm_up_domains(embeddings.model_for(acme.tenant, "session_state"))
    embed_calls.clear()
    # and a message with three facts
    with tenant_scope(acme.tenant):
        message = Message.objects.for_tenant(acme.tenant).create(
            tenant=acme.tenant,
            session=acme_session,
            role=Message.Role.USER,
            text="我叫张伟，手机号 13912345678，订单号 JD2024123456 还没到",
            seq=1,
        )

    # when
    result = extract_and_store(acme.tenant, acme_session, message)

    # then the three facts were embedded in one call; the only other call is the message itself, which topic
    # tracking compares with the session's current topic (docs/memory-intelligence.md, topic switches)
    fact_calls = [call for call in embed_calls if call != [message.text]]
    assert len(fact_calls) == 1
    assert len(fact_calls[0]) == 3
    assert len(embed_calls) <= 2
    assert [w.outcome for w in result.written] == ["created", "created", "created"]
    rows = _rows(acme.tenant)
    assert {m.key for m in rows} == {"name", "phone", "order_id"}
    assert {m.source_message_id for m in rows} == {message.pk}
    assert {m.source_role for m in rows} == {"user"}
    with tenant_scope(acme.tenant):
        actors = set(MemoryEvent.objects.for_tenant(acme.tenant).values_list("actor", flat=True))
    assert actors == {MemoryEvent.Actor.END_USER}


@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_and_single_writes_leave_one_live_memory_per_key(acme):
    # given two racing batches that touch the same keys in opposite orders, and two single writers
    session = open_session_obj(acme, "alice")

    def batch(n: int, keys: list[str]) -> None:
        items = [MemoryItem(type="user_profile", key=key, content=f"{key} value {n}") for key in keys]
        store.write_memories(acme.tenant, session, items)

    def single(n: int, keys: list[str]) -> None:
        for key in keys:
            store.do_write_memory(acme.tenant, session, type="user_profile", key=key, content=f"{key} value {n}")

    plans = [(0, batch, ["phone", "name", "email"]), (1, batch, ["email", "name", "phone"]),
             (2, single, ["name", "phone"]), (3, single, ["phone", "email"])]  # fmt: skip

    # when
    errors = race(*[lambda plan=plan: plan[1](plan[0], plan[2]) for plan in plans])

    # then every write landed, one live memory per key, the rest in history
    assert errors == []
    for key, writes in (("phone", 4), ("name", 3), ("email", 3)):
        rows = _rows(acme.tenant, key=key)
        assert len(rows) == writes
        live = [m for m in rows if m.superseded_at is None]
        assert len(live) == 1
        assert all(m.superseded_by_id is not None for m in rows if m.superseded_at is not None)
        assert sum(_events(acme.tenant, m.pk).count("create") for m in rows) == writes


def test_one_write_for_several_sessions_keeps_each_end_users_slots_apart(acme, embed_calls):
    # given two customers, each with a phone on record
    anna, ben = open_session_obj(acme, "anna"), open_session_obj(acme, "ben")
    store.write_memories(acme.tenant, anna, [MemoryItem(type="user_profile", key="phone", content="手机：13900000001")])
    store.write_memories(acme.tenant, ben, [MemoryItem(type="user_profile", key="phone", content="手机：13900000002")])
    embed_calls.clear()

    # when one write (the background writer's batch) carries a new phone for anna, the same sentence for both,
    # and a session-scoped note for each
    said = "I will call back tomorrow"
    results = store.write_sessions_memories(
        acme.tenant,
        [
            (anna, [MemoryItem(type="user_profile", key="phone", content="手机：13900000009"),
                    MemoryItem(type="fact_reference", key="conversation:same", content=said),
                    MemoryItem(type="session_state", key="note", content="anna waits for a refund")]),
            (ben, [MemoryItem(type="fact_reference", key="conversation:same", content=said),
                   MemoryItem(type="session_state", key="note", content="ben asks about shipping")]),
        ],
    )  # fmt: skip

    # then anna's phone is replaced and ben's untouched, and each customer has their own row of the sentence
    assert [r.outcome for r in results] == ["replaced", "created", "created", "created", "created"]
    assert len(embed_calls) == 1
    live = {
        (m.end_user_id, m.key): m.content
        for m in _rows(acme.tenant, superseded_at__isnull=True, key__in=["phone", "conversation:same", "note"])
    }
    assert live == {
        (anna.end_user_id, "phone"): "手机：13900000009",
        (ben.end_user_id, "phone"): "手机：13900000002",
        (anna.end_user_id, "conversation:same"): said,
        (ben.end_user_id, "conversation:same"): said,
        (anna.end_user_id, "note"): "anna waits for a refund",
        (ben.end_user_id, "note"): "ben asks about shipping",
    }
    notes = {m.content: m.session_id for m in _rows(acme.tenant, key="note")}
    assert notes == {"anna waits for a refund": anna.pk, "ben asks about shipping": ben.pk}


def test_a_write_for_several_sessions_refuses_another_tenants_session(acme, globex):
    # given a session of another tenant slipped into the batch
    mine, theirs = open_session_obj(acme, "cara"), open_session_obj(globex, "cara")
    item = MemoryItem(type="fact_reference", content="Prefers e-mail")

    # when it is written, then nothing is, for either tenant
    with pytest.raises(ValueError, match="sessions of the tenant"):
        store.write_sessions_memories(acme.tenant, [(mine, [item]), (theirs, [item])])
    assert _rows(acme.tenant) == []
    assert _rows(globex.tenant) == []
