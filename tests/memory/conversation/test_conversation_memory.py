"""Conversation memory through the chat path: what customers and agents say is recallable later.

Every turn goes through ``POST /api/v1/sessions/<id>/messages`` (``chat.turn.run.run_turn``) with the fake
model answering the agent's scripted reply; every question goes through ``POST /api/v1/memories/recall`` from
a new session of the same end user — what a customer who comes back gets.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from testkit.fake_ollama import Reply
from tests.factories import TenantCtx, open_session

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]

EN_FACTS = {
    3: ("I'm planning a party, my birthday is on the twelfth of March.", "Lovely! Happy early birthday."),
    17: ("When will my blender ship?", "Your blender leaves our warehouse on the fifth of December."),
    29: ("Any discount for me?", "I added a spring voucher to your account; it stays valid until the end of June."),
    41: ("How many points do I have now?", "Your loyalty balance is 2,380 points after the last purchase."),
}
EN_FILLER = [
    ("Do you sell kitchen scales?", "Yes, we have three models of kitchen scales."),
    ("What colours does the kettle come in?", "The kettle comes in black, white and sage green."),
    ("Is delivery free over fifty pounds?", "Yes, standard delivery is free above fifty pounds."),
    ("Can I pay with PayPal?", "Yes, PayPal is accepted at checkout."),
    ("Do you have a store in Leeds?", "We have a showroom in Leeds on Briggate."),
]
ZH_FACTS = {
    4: ("我下个月要过生日，我是三月十二号生日", "好的，提前祝您生日快乐！"),
    18: ("我那台空气炸锅什么时候发？", "您的空气炸锅预计十二月五号从仓库发出。"),
    30: ("有没有优惠？", "已经给您账户里放了一张春季满减券，六月底前都能用。"),
    42: ("我现在积分有多少？", "您上次购物后会员积分余额是两千三百八十分。"),
}
ZH_FILLER = [
    ("你们有卖厨房秤吗？", "有的，我们有三款厨房秤。"),
    ("电水壶有哪些颜色？", "电水壶有黑色、白色和浅绿色。"),
    ("满多少包邮？", "满九十九元就包邮。"),
    ("可以用支付宝付款吗？", "可以的，结算时选择支付宝即可。"),
    ("你们在杭州有门店吗？", "杭州门店在湖滨银泰三楼。"),
]


def _talk(ctx: TenantCtx, fake: Any, sid: str, user: str, agent: str) -> dict[str, Any]:
    fake.script(Reply(text=agent))
    response = ctx.client.post(f"/api/v1/sessions/{sid}/messages", {"text": user}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _dialogue(ctx: TenantCtx, fake: Any, end_user: str, facts: dict, filler: list, turns: int = 60) -> None:
    sid = open_session(ctx, end_user)["session_id"]
    for turn in range(1, turns + 1):
        user, agent = facts.get(turn, filler[turn % len(filler)])
        _talk(ctx, fake, sid, user, agent)


def _recall(ctx: TenantCtx, end_user: str, query: str, **extra: Any) -> list[dict[str, Any]]:
    """Recall from a new session of ``end_user`` (a customer who comes back)."""
    sid = open_session(ctx, end_user)["session_id"]
    response = ctx.client.post(
        "/api/v1/memories/recall", {"query": query, "k": 5, **extra}, format="json", HTTP_X_SESSION_ID=sid
    )
    assert response.status_code == 200, response.content
    return [r["memory"] for r in response.json()["results"]]


def _memories(ctx: TenantCtx, **filters: Any) -> list[Any]:
    from memory.models import MemoryUnit
    from tenants.rls import tenant_scope

    with tenant_scope(ctx.tenant):
        return list(MemoryUnit.objects.for_tenant(ctx.tenant).filter(**filters).order_by("created_at", "id"))


def _messages(ctx: TenantCtx, sid: str) -> list[Any]:
    from conversations.models import Message
    from tenants.rls import tenant_scope

    with tenant_scope(ctx.tenant):
        return list(Message.objects.for_tenant(ctx.tenant).filter(session_id=sid).order_by("seq"))


def _found(memories: list[dict[str, Any]], *needles: str) -> bool:
    return any(all(n.casefold() in m["content"].casefold() for n in needles) for m in memories)


def test_sixty_english_turns_are_recallable_from_a_new_session(globex, fake_ollama):
    _dialogue(globex, fake_ollama, "alice", EN_FACTS, EN_FILLER)
    assert _found(_recall(globex, "alice", "When is my birthday?"), "twelfth of March")
    assert _found(_recall(globex, "alice", "When does my blender ship?"), "fifth of December")
    assert _found(_recall(globex, "alice", "Until when is my voucher valid?"), "end of June")
    assert _found(_recall(globex, "alice", "What is my points balance?"), "2,380")


def test_sixty_chinese_turns_are_recallable_from_a_new_session(acme, fake_ollama):
    _dialogue(acme, fake_ollama, "wang", ZH_FACTS, ZH_FILLER)
    assert _found(_recall(acme, "wang", "我生日是哪天？"), "三月十二号")
    assert _found(_recall(acme, "wang", "空气炸锅哪天发货？"), "十二月五号")
    assert _found(_recall(acme, "wang", "那张优惠券什么时候过期"), "六月底")
    assert _found(_recall(acme, "wang", "我还有多少积分"), "两千三百八十")


def test_each_unit_is_a_linked_fact_reference_in_the_message_language(acme, fake_ollama):
    sid = open_session(acme, "lin")["session_id"]
    turn = _talk(acme, fake_ollama, sid, "I live in Shenzhen and I prefer e-mail over phone calls.", "好的，已记下。")
    units = _memories(acme, source_message_id=turn["message_id"], data__source="conversation")
    assert [u.content for u in units] == ["I live in Shenzhen and I prefer e-mail over phone calls."]
    assert units[0].type == "fact_reference"
    assert units[0].source_role == "user"
    assert units[0].session_id is None  # the end user's: a new session finds it
    lifetime = units[0].expires_at - units[0].created_at
    assert lifetime == timedelta(days=90)
    # the agent's "OK, noted" carries no fact: no unit
    assert not _memories(acme, source_message_id=turn["reply_id"], data__source="conversation")


def test_the_tenant_sets_how_long_conversation_memories_live(acme, fake_ollama):
    acme.tenant.settings = {**acme.tenant.settings, "conversation_memory_days": 7}
    acme.tenant.save()
    sid = open_session(acme, "lin")["session_id"]
    turn = _talk(acme, fake_ollama, sid, "我家猫叫豆豆，对鸡肉过敏。", "记住了。")
    [unit] = _memories(acme, source_message_id=turn["message_id"], data__source="conversation")
    assert unit.expires_at - unit.created_at == timedelta(days=7)


def test_a_long_message_is_split_at_sentences_into_units_of_at_most_150_characters(acme, fake_ollama):
    sentence = "第{i}件事：包裹编号是 PKG-{i:04d}，里面有{i}本书，请在周{d}送到前台。"
    text = "".join(sentence.format(i=i, d=i % 7 + 1) for i in range(1, 12))
    sid = open_session(acme, "lin")["session_id"]
    turn = _talk(acme, fake_ollama, sid, text, "收到。")
    units = _memories(acme, source_message_id=turn["message_id"], data__source="conversation")
    contents = [u.content for u in units]
    assert all(len(c) <= 150 for c in contents)
    joined = "".join(contents)
    for i in range(1, 12):  # every code survives: split, never cut
        assert f"PKG-{i:04d}" in joined


def test_a_changed_address_is_served_as_the_new_one_and_the_old_one_only_as_of_then(acme, fake_ollama):
    sid = open_session(acme, "zhao")["session_id"]
    _talk(acme, fake_ollama, sid, "我的地址是北京市朝阳区建国路88号", "好的，已记录您的地址：北京市朝阳区建国路88号。")
    before_move = timezone.now()
    _talk(acme, fake_ollama, sid, "我搬家了，新地址是上海市浦东新区世纪大道100号", "好的，地址已更新。")

    now = _recall(acme, "zhao", "我现在的地址是哪里")
    first_with_address = next(m for m in now if "路" in m["content"] or "大道" in m["content"])
    assert "世纪大道100号" in first_with_address["content"]
    old_rank = [i for i, m in enumerate(now) if "建国路88号" in m["content"]]
    new_rank = [i for i, m in enumerate(now) if "世纪大道100号" in m["content"]]
    assert not old_rank or min(old_rank) > max(new_rank)  # never above the current address

    then = _recall(acme, "zhao", "我的地址", as_of=before_move.isoformat())
    assert any("建国路88号" in m["content"] for m in then)
    assert not any("世纪大道" in m["content"] for m in then)


def test_keyed_fact_content_follows_the_message_language_not_the_tenants(acme, globex, fake_ollama):
    zh_sid = open_session(acme, "mixed")["session_id"]  # acme's default language is Chinese
    _talk(acme, fake_ollama, zh_sid, "My email is mixed@example.com", "Noted.")
    en_sid = open_session(globex, "mixed")["session_id"]  # globex's is English
    _talk(globex, fake_ollama, en_sid, "我的邮箱是 mixed@example.com", "好的。")
    [zh_tenant_fact] = _memories(acme, key="email")
    [en_tenant_fact] = _memories(globex, key="email")
    assert zh_tenant_fact.content.startswith("User")
    assert "邮箱" not in zh_tenant_fact.content
    assert "邮箱" in en_tenant_fact.content


def test_a_turn_killed_after_its_reply_loses_no_memory_once_the_worker_sweeps(acme, fake_ollama, tmp_path):
    """A process that dies between the reply and the write: its messages are stored, unindexed; the
    worker's sweep at start (``manage.py index_messages``, what ``run_worker`` runs) writes their units."""
    sid = open_session(acme, "kim")["session_id"]
    fake_ollama.script(Reply(text="Your parcel will be handed to the courier on Friday morning."))
    script = tmp_path / "turn_then_die.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import asyncio, os, sys
            sys.path.insert(0, {str(ROOT)!r})
            os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
            import django
            django.setup()
            from django.conf import settings
            settings.OLLAMA_HOST = {fake_ollama.host!r}
            from conversations.models import ChatSession
            from chat.turn.run import run_turn
            from tenants.models import Tenant
            from tenants.rls import tenant_scope
            tenant = Tenant.objects.get(slug="acme")
            with tenant_scope(tenant):
                session = ChatSession.objects.for_tenant(tenant).get(pk={sid!r})

            async def die(result):
                print("done", result.message_id, flush=True)
                os._exit(9)  # killed after the reply, before the write

            asyncio.run(run_turn(tenant, session, "I collect stamps from Iceland.", on_done=die))
            """
        )
    )
    env = {**os.environ, "MEMDESK_DB_NAME": connection.settings_dict["NAME"], "LOG_LEVEL": "WARNING"}
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 9, proc.stderr
    assert proc.stdout.startswith("done")

    stored = _messages(acme, sid)
    assert [m.role for m in stored] == ["user", "assistant"]
    assert all(m.memory_indexed_at is None for m in stored)
    assert not _found(_recall(acme, "kim", "Which country are my stamps from?"), "Iceland")

    out = subprocess.run(
        [sys.executable, "manage.py", "index_messages", "--settle", "0"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert _found(_recall(acme, "kim", "Which country are my stamps from?"), "Iceland")
    assert _found(_recall(acme, "kim", "When does my parcel go to the courier?"), "Friday morning")
    assert all(m.memory_indexed_at is not None for m in _messages(acme, sid))


def test_the_units_commit_asynchronously_and_what_follows_on_the_connection_stays_durable(acme, fake_ollama, settings):
    """The units' transaction commits without waiting for the disk (a crash loses it whole, and the sweep
    writes it again); the setting ends with it, so the next transaction on the connection — a turn's
    message — is durable again."""
    from conversations.models import ChatSession
    from memory.conversation.units import index_messages
    from tenants.rls import tenant_scope

    settings.MEMORY_WRITER = "off"  # the turn leaves its messages to index
    sid = open_session(acme, "ines")["session_id"]
    fake_ollama.script(Reply(text="Noted."))
    response = acme.client.post(f"/api/v1/sessions/{sid}/messages", {"text": "My locker code is 4471."}, format="json")
    assert response.status_code == 200, response.content
    seen: list[str] = []

    def record(execute, sql, params, many, context):
        seen.append(sql)
        if "UPDATE chat_message SET memory_indexed_at" in sql:  # the mark, inside the units' transaction
            with context["connection"].cursor() as cursor:
                cursor.execute("SHOW synchronous_commit")
                seen.append(f"synchronous_commit={cursor.fetchone()[0]}")
        return execute(sql, params, many, context)

    with tenant_scope(acme.tenant):
        session = ChatSession.objects.for_tenant(acme.tenant).get(pk=sid)
    stored = _messages(acme, sid)
    with connection.execute_wrapper(record):
        index_messages(acme.tenant, session, stored)
    assert "synchronous_commit=off" in seen
    assert _found(_recall(acme, "ines", "What is my locker code?"), "4471")
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"


def _rank(memories: list[dict[str, Any]], needle: str) -> int:
    return next((i for i, m in enumerate(memories) if needle in m["content"]), 99)


def test_a_question_found_by_the_query_brings_its_answer_first(acme, fake_ollama):
    """「我的快递到哪了」 finds the user's own earlier question best; what the customer needs is the agent's
    answer to it, which says 「郑州转运中心」 without a word of the question."""
    sid = open_session(acme, "qa")["session_id"]
    _talk(acme, fake_ollama, sid, "我寄的快递到哪了？", "目前在郑州转运中心，预计后天送达。")
    for user, agent in ZH_FILLER:
        _talk(acme, fake_ollama, sid, user, agent)
    found = _recall(acme, "qa", "我的快递到哪了")
    assert _rank(found, "郑州转运中心") < _rank(found, "我寄的快递到哪了")
    assert _rank(found, "郑州转运中心") <= 1


def test_a_question_about_now_ranks_the_newest_statement_first(acme, fake_ollama):
    """No rule keys an arrival time; the newer statement is the current one when the customer asks what
    holds now (「现在」)."""
    sid = open_session(acme, "hotel")["session_id"]
    _talk(acme, fake_ollama, sid, "我们大概晚上九点到酒店", "已为您备注预计21:00到店，房间会保留到次日凌晨。")
    for user, agent in ZH_FILLER[:3]:
        _talk(acme, fake_ollama, sid, user, agent)
    _talk(acme, fake_ollama, sid, "计划变了，下午四点半就能到", "好的，已将预计到店时间更新为16:30左右。")
    found = _recall(acme, "hotel", "我们现在预计几点到店？")
    assert _rank(found, "16:30") < _rank(found, "21:00")


def test_a_correction_overtakes_what_it_corrects(acme, fake_ollama):
    """No rule keys a dormitory; the customer's own correction (「说错了」) ranks above the statement it
    corrects, which stays recallable below it, after what is current."""
    sid = open_session(acme, "dorm")["session_id"]
    _talk(acme, fake_ollama, sid, "我儿子的宿舍在华中科技大学东十二舍", "好的，已记下。")
    for user, agent in ZH_FILLER[:3]:
        _talk(acme, fake_ollama, sid, user, agent)
    _talk(acme, fake_ollama, sid, "上次说错了，不是东十二舍，是西十二舍", "好的。")
    found = _recall(acme, "dorm", "我儿子的宿舍在哪？", k=10)
    assert _rank(found, "是西十二舍") < _rank(found, "华中科技大学东十二舍")
    assert _rank(found, "华中科技大学东十二舍") < 99


def test_an_old_phone_buries_its_sentence_only_for_a_question_about_the_phone(acme, fake_ollama):
    """The sentence that gave the old phone also gave the work order number: after the customer changes their
    number it is out of date for 「我现在的电话」, and still the answer to 「工单号是多少」."""
    sid = open_session(acme, "repair")["session_id"]
    _talk(
        acme,
        fake_ollama,
        sid,
        "洗衣机坏了，我电话 13810556273",
        "已为您预约维修，您的联系电话 138 1055 6273，工单号 WX24061988。",
    )
    for user, agent in ZH_FILLER:
        _talk(acme, fake_ollama, sid, user, agent)
    _talk(
        acme,
        fake_ollama,
        sid,
        "我换手机了，新号码是 13911332854，以前那个不用了",
        "好的，已将您的联系电话更新为 139 1133 2854。",
    )

    work_order = _recall(acme, "repair", "我那个维修工单号是多少？")
    assert _rank(work_order, "WX24061988") <= 1

    phone = _recall(acme, "repair", "我现在登记的电话是哪个？")
    newest = min(_rank(phone, "13911332854"), _rank(phone, "139 1133 2854"))
    assert newest < _rank(phone, "WX24061988")


def test_another_batchs_progress_does_not_make_a_finished_batch_stale(acme, fake_ollama):
    sid = open_session(acme, "importer")["session_id"]
    _talk(acme, fake_ollama, sid, "BATCH-2031 好了没？", "BATCH-2031 目前已完成 97/100，剩下3条手机号格式错误。")
    _talk(acme, fake_ollama, sid, "改好重传了", "BATCH-2031 的状态已同步更新为 100/100，成员已全部导入。")
    for user, agent in ZH_FILLER[:3]:
        _talk(acme, fake_ollama, sid, user, agent)
    _talk(acme, fake_ollama, sid, "又传了一批，任务号 BATCH-2107", "BATCH-2107 正在处理中，已完成 25/60。")

    found = _recall(acme, "importer", "BATCH-2031 最后导完了吗？")
    assert _rank(found, "100/100") <= 1
    assert _rank(found, "100/100") < _rank(found, "97/100")


def test_the_current_points_balance_answers_how_many_points_first(acme, fake_ollama):
    """Balances in Chinese numerals (「剩余积分九百六十分」) are keyed, and 「我现在有多少积分」 asks the rule stage
    for the key: the newest balance comes first, the older balances below it."""
    sid = open_session(acme, "points")["session_id"]
    _talk(acme, fake_ollama, sid, "我积分多少？", "您好，您目前积分两千三百八十分。")
    for user, agent in ZH_FILLER[:3]:
        _talk(acme, fake_ollama, sid, user, agent)
    _talk(acme, fake_ollama, sid, "换个保温杯", "已为您兑换保温杯一个，扣除2,000积分，剩余积分九百六十分。")

    found = _recall(acme, "points", "我现在有多少积分？")
    assert min(_rank(found, "960"), _rank(found, "九百六十")) == 0
    assert _rank(found, "两千三百八十") > 0


def test_units_of_one_message_share_its_moment(acme, fake_ollama):
    """Two sentences of one message are said at the same moment: for a question about the present neither
    overtakes the other, and both weigh the same for recency, whichever random id each unit drew."""
    from memory.recall.candidates import RecallHit
    from memory.recall.currency import overtaken as _overtaken
    from memory.recall.ranking import rerank_weights as _rerank_weights
    from tenants.rls import tenant_scope

    sid = open_session(acme, "arrival")["session_id"]
    first = (
        "我们一家四口今晚大概九点到酒店，因为航班七点落地，从机场打车过来大约要一个半小时，"
        "麻烦前台帮我们留一下靠窗的那间大床房，另外请准备两张儿童床，孩子们还小需要护栏。"
    )
    second = (
        "再确认一下，我们今晚九点左右到酒店，如果航班延误我会提前打电话通知前台，"
        "房间请一定保留到晚上十二点以后，押金可以先从我登记的信用卡里预授权，谢谢你们的安排。"
    )
    _talk(acme, fake_ollama, sid, first + second, "好的，已为您备注。")
    siblings = [m for m in _memories(acme, source_role="user") if m.type == "fact_reference" and "九点" in m.content]
    assert len(siblings) >= 2
    assert len({m.created_at for m in siblings}) == 1

    with tenant_scope(acme.tenant):
        assert _overtaken(acme.tenant, siblings, about_now=True) == {}
    hits = [RecallHit(memory=m, stage="vector", similarity=0.9, score=1.0) for m in siblings]
    weights = _rerank_weights("我们现在几点到酒店？", hits)
    assert len(set(weights.values())) == 1
    assert _rerank_weights("我们现在几点到酒店？", hits[::-1]) == weights


def test_a_price_that_changed_overtakes_the_old_price(acme, fake_ollama):
    """No rule keys a hotel's total price; 「总价变为…」 changes it, and the new total ranks above the old one."""
    sid = open_session(acme, "hotel-price")["session_id"]
    _talk(acme, fake_ollama, sid, "帮我订西湖边的酒店，住三晚", "已为您预订湖景大床房，共3晚，总价三千八百四十元。")
    for user, agent in ZH_FILLER[:3]:
        _talk(acme, fake_ollama, sid, user, agent)
    changed = "可以的。因为当晚房价上涨，总价变为四千零四十元，需要补差价二百元。"
    _talk(acme, fake_ollama, sid, "能不能晚一天入住", changed)
    found = _recall(acme, "hotel-price", "酒店总价是多少？", k=10)
    assert _rank(found, "四千零四十元") < _rank(found, "三千八百四十元") < 99
    # the old total is still recalled, as history: the question names what labels it (总价), so it is stale
    sid = open_session(acme, "hotel-price")["session_id"]
    response = acme.client.post(
        "/api/v1/memories/recall", {"query": "酒店总价是多少？", "k": 10}, format="json", HTTP_X_SESSION_ID=sid
    )
    old = [r for r in response.json()["results"] if "三千八百四十元" in r["memory"]["content"]]
    assert old, response.json()["results"]
    assert not old[0]["current"], old


def test_for_a_question_about_now_the_change_succeeds_the_old_value_before_later_talk(acme, fake_ollama):
    """「最后」 asks about the present: the sentence that changed the total succeeds the old total, even though
    the hotel came up again later in words as close to it."""
    sid = open_session(acme, "hotel-final")["session_id"]
    _talk(acme, fake_ollama, sid, "帮我订西湖边的酒店，住三晚", "已为您预订湖景大床房，共3晚，总价三千八百四十元。")
    for user, agent in ZH_FILLER[:2]:
        _talk(acme, fake_ollama, sid, user, agent)
    changed = "可以的，已为您改为晚一天入住，当晚房价上涨，总价变为四千零四十元，需要补差价二百元。"
    _talk(acme, fake_ollama, sid, "能不能晚一天入住", changed)
    for user, agent in ZH_FILLER[2:4]:
        _talk(acme, fake_ollama, sid, user, agent)
    later = "酒店没有按订单安排湖景房，已为您退还三晚湖景房差价共六百元，并补偿一张五百元住宿券。"
    _talk(acme, fake_ollama, sid, "酒店房间和订的不一样", later)
    found = _recall(acme, "hotel-final", "那次酒店总价最后是多少？")
    assert _rank(found, "四千零四十元") < _rank(found, "三千八百四十元")


def test_with_overtaken_last_a_corrected_statement_follows_every_current_hit(acme, fake_ollama, settings):
    """A deployment that sets ``overtaken_last`` sees a statement a correction overtook after every current hit,
    not just below the correction; without it, it stays just below (the test above)."""
    settings.MEMDESK_RECALL = {"overtaken_last": True}
    sid = open_session(acme, "dorm-last")["session_id"]
    _talk(acme, fake_ollama, sid, "我儿子的宿舍在华中科技大学东十二舍", "好的，已记下。")
    for user, agent in ZH_FILLER[:3]:
        _talk(acme, fake_ollama, sid, user, agent)
    _talk(acme, fake_ollama, sid, "上次说错了，不是东十二舍，是西十二舍", "好的。")
    asker = open_session(acme, "dorm-last")["session_id"]
    response = acme.client.post(
        "/api/v1/memories/recall", {"query": "我儿子的宿舍在哪？", "k": 10}, format="json", HTTP_X_SESSION_ID=asker
    )
    results = response.json()["results"]
    contents = [r["memory"]["content"] for r in results]
    old = _rank([r["memory"] for r in results], "华中科技大学东十二舍")
    assert old < 99, contents
    assert results[old].get("current") is False, results[old]
    assert all(r.get("current", True) is False for r in results[old:]), contents
    assert _rank([r["memory"] for r in results], "是西十二舍") < old
