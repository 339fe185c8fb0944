"""DELETE /api/v1/end-users/<end_user_id> and ``manage.py erase_end_user``: every row of the end user goes, in one
transaction, and nothing of anyone else's; a tombstone with counts and a digest remains, holding no content."""

from __future__ import annotations

from collections import Counter

import pytest
from django.apps import apps
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection
from django.test import Client

from chat.privacy import rights as end_users
from chat.tools import batches
from chat.tools import context as context_mod
from chat.tools.call import ToolOutcome
from chat.tools.registry import do_register_tool
from conversations.access import resolve_session
from conversations.models import ChatSession, Message, StaffAccess
from memory.conversation.units import index_messages
from memory.recall.pipeline import recall
from memory.store import feedback
from memory.tasks import index_turn_task
from tenants.models import EndUser, Erasure, end_user_digest
from tenants.rls import tenant_db_scope, tenant_scope
from tests.factories import open_session, turn_steps, write_memory

pytestmark = pytest.mark.django_db

PHONE = "13912345678"
SECRET, CAT = "我家的猫叫豆豆，是一只橘猫", "豆豆"
APPS = ("tenants", "conversations", "memory", "chat")


def _rows_by_owner():
    """Rows of every table of memdesk's apps (and the worker's jobs, the admin's log), by table, tenant and the
    end user they belong to (through their session when they have one), read past RLS."""
    counts = Counter()
    statements = []
    for app in APPS:
        for model in apps.get_app_config(app).get_models():
            columns = {field.column for field in model._meta.concrete_fields}
            tenant = "t.id" if model._meta.db_table == "tenants_tenant" else "t.tenant_id"
            tenant = tenant if "tenant_id" in columns or model._meta.db_table == "tenants_tenant" else "NULL"
            if model is EndUser:
                owner = "t.id"
            elif "end_user_id" in columns:
                owner = "t.end_user_id"
            elif "session_id" in columns:
                owner = "(SELECT s.end_user_id FROM chat_chatsession s WHERE s.id = t.session_id)"
            else:
                owner = "NULL"
            statements.append((model._meta.db_table, tenant, owner))
    statements.append(("procrastinate_jobs", "(t.args->>'tenant_id')::uuid", "NULL"))
    statements.append(("django_admin_log", "NULL", "NULL"))
    with tenant_db_scope([], bypass=True), connection.cursor() as cursor:
        for table, tenant, owner in statements:
            cursor.execute(f"SELECT {tenant}::text, {owner}::text, count(*) FROM {table} t GROUP BY 1, 2")  # noqa: S608
            for tenant_id, owner_id, count in cursor.fetchall():
                counts[(table, tenant_id, owner_id)] += count
    return counts


def _session(ctx, end_user_id):
    return resolve_session(ctx.tenant, open_session(ctx, end_user_id)["session_id"])


def _end_user(ctx, external_id):
    with tenant_scope(ctx.tenant):
        return EndUser.objects.for_tenant(ctx.tenant).filter(external_id=external_id).first()


def _give_a_life(ctx, end_user_id, staff_user):
    """Everything an end user can leave behind: turns (messages, memories with a replaced version, feedback,
    conversation units), a tool call, a queued batch with its job, a staff read, an admin log entry."""
    session = _session(ctx, end_user_id)
    turn_steps(ctx, session, f"我的手机号是 {PHONE}", f"好的，已记录您的手机号 {PHONE}。")
    turn_steps(ctx, session, "我换号了，新号是 13800001111", "好的，已更新为 13800001111。")
    turn_steps(ctx, session, SECRET, "好的，记下了。")
    tool = f"lookup_{ctx.tenant.slug}"
    with tenant_scope(ctx.tenant):
        said = list(Message.objects.for_tenant(ctx.tenant).filter(session=session).order_by("seq"))
    index_messages(ctx.tenant, session, said)
    # and a turn's conversation memory still queued for the worker
    index_turn_task.defer(tenant_id=str(ctx.tenant.pk), session_id=str(session.pk), message_ids=[str(said[-1].pk)])
    with tenant_scope(ctx.tenant):
        pref = write_memory(ctx, session, "prefers lockers", key="delivery_pref", type="user_profile")
        feedback.do_feedback(ctx.tenant, pref, "misled")
        message = Message.objects.for_tenant(ctx.tenant).filter(session=session, role="user").order_by("-seq")[0]
        started = context_mod.do_start_tool_call(ctx.tenant, session, name=tool, arguments={"order_id": "A-1"})
        context_mod.do_finish_tool_call(
            ctx.tenant, session, message, name=tool, arguments={"order_id": "A-1"},
            outcome=ToolOutcome(result={"status": "shipped"}, metric="ok"), expected_version=started.version,
            round_no=1,
        )  # fmt: skip
        batches.do_create_batch(ctx.tenant, session, tool_name="send_coupon", items=[{"id": "c1"}, {"id": "c2"}])
        StaffAccess.objects.create(
            tenant=ctx.tenant, end_user=session.end_user, session=session, user=staff_user, what="conversation"
        )
    LogEntry.objects.create(
        user=staff_user, content_type=ContentType.objects.get_for_model(EndUser), object_id=str(session.end_user_id),
        object_repr=end_user_id, action_flag=CHANGE,
    )  # fmt: skip
    return session


@pytest.fixture
def cast(acme, globex, staff):
    """alice at acme (to be erased), bob at acme, and globex's own alice: each with a full history."""
    for ctx in (acme, globex):
        do_register_tool(
            ctx.tenant, name="send_coupon", description="send a coupon", parameters={"type": "object"},
            url="https://backend.example/tools/send_coupon", timeout_s=5,
        )  # fmt: skip
    return {
        "alice": _give_a_life(acme, "alice", staff["owner_a"]),
        "bob": _give_a_life(acme, "bob", staff["owner_a"]),
        "globex_alice": _give_a_life(globex, "alice", staff["outsider"]),
    }


def _erase(ctx, end_user_id="alice"):
    return ctx.client.delete(f"/api/v1/end-users/{end_user_id}")


def test_every_row_of_the_end_user_goes_and_nobody_elses(acme, cast):
    # given
    alice = str(cast["alice"].end_user_id)
    before = _rows_by_owner()
    assert sum(n for (_, _, owner), n in before.items() if owner == alice) > 20
    # when
    response = _erase(acme)
    # then
    assert response.status_code == 204, response.content
    after = _rows_by_owner()
    assert not [key for key in after if key[2] == alice]
    changed = {key for key in before.keys() | after.keys() if before[key] != after[key]}
    acme_id = str(acme.tenant.pk)
    # what changed: alice's rows, her batch's job, her admin log entry, and one tombstone more
    assert {key for key in changed if key[2] != alice} == {
        ("tenants_erasure", acme_id, None),
        ("procrastinate_jobs", acme_id, None),
        ("django_admin_log", None, None),
    }
    assert after[("tenants_erasure", acme_id, None)] == before[("tenants_erasure", acme_id, None)] + 1
    # (her batch's run, and her turn's conversation memory queued for the worker)
    assert after[("procrastinate_jobs", acme_id, None)] == before[("procrastinate_jobs", acme_id, None)] - 2
    assert after[("django_admin_log", None, None)] == before[("django_admin_log", None, None)] - 1


def test_the_tombstone_counts_what_went_and_holds_no_content(acme, cast):
    # given
    alice = str(cast["alice"].end_user_id)
    before = _rows_by_owner()
    # when
    _erase(acme)
    # then: its counts are the rows that went, table by table
    with tenant_scope(acme.tenant):
        erasure = Erasure.objects.for_tenant(acme.tenant).get()
    went = Counter()
    for (table, _, owner), n in before.items():
        if owner == alice:
            went[table] += n
    went.update({"procrastinate_jobs": 2, "django_admin_log": 1})
    counts = {table: n for table, n in erasure.counts.items() if table != "procrastinate_events"}
    assert counts == dict(went)
    assert erasure.end_user_digest == end_user_digest(acme.tenant, "alice")
    assert erasure.actor == Erasure.Actor.TENANT_API
    # and the row itself names nothing of her: not her id, not a word she said
    with tenant_db_scope([], bypass=True), connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(e)::text FROM tenants_erasure e WHERE id = %s", [erasure.pk])
        [row] = cursor.fetchone()
    for trace in ("alice", alice, str(cast["alice"].pk), PHONE, CAT, "橘猫"):
        assert trace not in row


def test_recall_finds_nothing_of_what_she_said(acme, cast):
    # given: before, a session of hers recalls her cat
    with tenant_scope(acme.tenant):
        assert any(CAT in m.content for m in recall(acme.tenant, cast["alice"], "我的猫叫什么", record=False).memories)
    # when
    _erase(acme)
    # then: she comes back (a new end user of the same id) and nothing of the old one is found
    again = _session(acme, "alice")
    with tenant_scope(acme.tenant):
        found = recall(acme.tenant, again, "我的猫叫什么 手机号", record=False).memories
    assert not [m for m in found if CAT in m.content or PHONE in m.content]


def test_the_admin_search_and_the_metrics_find_nothing_of_her(acme, cast, staff, client):
    # given: acme's owner finds both alice's and bob's cat
    owner = Client()
    owner.force_login(staff["owner_a"])

    def searched(path, q):
        return {m.end_user.external_id for m in owner.get(path, {"q": q}).context["cl"].result_list}

    assert searched("/admin/memory/memoryunit/", CAT) == {"alice", "bob"}
    # when
    _erase(acme)
    # then: bob's memories are still searchable, hers are not
    assert searched("/admin/memory/memoryunit/", CAT) == {"bob"}
    assert owner.get("/admin/tenants/enduser/", {"q": "alice"}).context["cl"].result_count == 0
    metrics = client.get("/metrics").content.decode()
    assert "alice" not in metrics
    assert str(cast["alice"].pk) not in metrics


def test_a_second_delete_is_404(acme, cast):
    # given
    assert _erase(acme).status_code == 204
    # when
    response = _erase(acme)
    # then
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "end_user_not_found", "message": "No such end user."}}


def test_another_tenants_end_user_is_not_erased(globex, acme, cast):
    # given: globex erases its alice
    # when
    assert _erase(globex).status_code == 204
    # then: acme's alice is untouched
    with tenant_scope(acme.tenant):
        assert ChatSession.objects.for_tenant(acme.tenant).filter(pk=cast["alice"].pk).exists()
    assert _erase(globex, "bob").status_code == 404


@pytest.mark.parametrize(
    ("end_user_id", "code"),
    [("a" * 300, "invalid_end_user_id"), ("alice%01", "invalid_end_user_id"), ("%20%20", "invalid_end_user_id")],
)
def test_a_malformed_id_is_400_and_erases_nothing(acme, cast, end_user_id, code):
    # given
    before = _rows_by_owner()
    # when
    response = _erase(acme, end_user_id)
    # then
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code
    assert _rows_by_owner() == before


def test_a_failure_before_the_tombstone_erases_nothing(acme, cast, monkeypatch):
    # given: the tombstone cannot be written
    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(end_users, "end_user_digest", broken)
    before = _rows_by_owner()
    # when
    with pytest.raises(RuntimeError):
        end_users.do_erase_end_user(acme.tenant, "alice", actor=Erasure.Actor.TENANT_API)
    # then
    assert _rows_by_owner() == before


def test_the_command_erases_as_the_operator_and_prints_the_counts(acme, cast, capsys):
    # when
    call_command("erase_end_user", "acme", "alice")
    # then
    printed = capsys.readouterr().out
    assert "chat_message: " in printed
    assert "memory_memoryunit: " in printed
    assert printed.strip().splitlines()[-1].startswith("total: ")
    assert _end_user(acme, "alice") is None
    assert _end_user(acme, "bob") is not None
    with tenant_scope(acme.tenant):
        assert Erasure.objects.for_tenant(acme.tenant).get().actor == Erasure.Actor.OPERATOR
