"""A long history: recall reads an end user's newest memories (the window) and, beyond them, only the rows
holding a word that is rare in the window — through the full-text index, which row-level security lets
PostgreSQL use because full-text matching is marked leakproof (config.embedded_pg)."""

from __future__ import annotations

import pytest
from django.db import connection

from memory.recall.pipeline import recall
from memory.store import write as store
from tenants.rls import POLICY_NAME, POLICY_USING, tenant_scope

FILLER = [
    "用户询问了退货政策，客服说明七天无理由退货",
    "用户询问了运费，客服说明满九十九元包邮",
    "用户询问了发票，客服说明可开电子发票",
    "用户询问了门店地址，客服给了杭州门店的位置",
    "用户询问了会员权益，客服介绍了积分规则",
    "用户询问了售后电话，客服给了热线号码",
]


def _write(ctx, session, content: str) -> None:
    store.do_write_memory(ctx.tenant, session, type="fact_reference", key=None, content=content)


def test_a_rare_word_said_before_the_window_is_still_found(acme, acme_session, settings):
    settings.MEMDESK_RECALL = {"vector_window": 4}
    _write(acme, acme_session, "保修卡编号 WX99887766 已登记在用户名下")
    for content in FILLER:
        _write(acme, acme_session, content)

    result = recall(acme.tenant, acme_session, "保修卡编号 WX99887766 是哪张", k=3)

    assert result.hits[0].memory.content == "保修卡编号 WX99887766 已登记在用户名下"


def test_a_word_common_in_the_window_is_not_searched_beyond_it(acme, acme_session, settings):
    """「客服」 is in every recent memory: BM25 gives it almost no weight, and looking for it in the whole
    history would read every row. The old memory holding only that word is left to the window it fell out of."""
    settings.MEMDESK_RECALL = {"vector_window": 4, "rare_share": 0.5, "w_vector": 0.0}
    _write(acme, acme_session, "客服")
    for content in FILLER:
        _write(acme, acme_session, content)

    result = recall(acme.tenant, acme_session, "客服", k=10)

    assert "客服" not in [h.memory.content for h in result.hits]
    assert result.hits  # the window's memories with the word


def test_full_text_matching_can_use_its_index_under_row_level_security(acme, acme_session):
    _write(acme, acme_session, "保修卡编号 WX99887766 已登记在用户名下")
    with tenant_scope(acme.tenant), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a tiny table: make the index the only cheap way
        cursor.execute(
            "EXPLAIN SELECT id FROM memory_memoryunit WHERE search_vector @@ plainto_tsquery('english', %s)",
            ["wx99887766"],
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "mem_search_vector" in plan, plan


def test_every_tenant_table_policy_compares_tenant_ids_as_uuids(db):
    """The policy the planner can estimate (tenants.rls.POLICY_USING) on every table: one left comparing text
    would hide nothing more, but its plans would read whole tenants."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename, qual FROM pg_policies WHERE policyname = %s", [POLICY_NAME])
        policies = dict(cursor.fetchall())
    assert len(policies) >= 10
    stale = {table: qual for table, qual in policies.items() if "::uuid[]" not in qual or "::text = ANY" in qual}
    assert not stale, (stale, POLICY_USING)


@pytest.mark.parametrize("ids", ["", None])
def test_an_empty_or_unset_tenant_list_still_sees_nothing(acme, acme_session, ids):
    _write(acme, acme_session, "保修卡编号 WX99887766 已登记在用户名下")
    with connection.cursor() as cursor:
        if ids is not None:
            cursor.execute("SELECT set_config('app.tenant_ids', %s, false)", [ids])
        cursor.execute("SELECT count(*) FROM memory_memoryunit")
        count = cursor.fetchone()[0]
        cursor.execute("RESET app.tenant_ids")
    assert count == 0
