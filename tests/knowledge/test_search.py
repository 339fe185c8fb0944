"""Knowledge search ranks the passage a question names first (Chinese and English), serves an article with a
segment only to that segment, and answers the contract's fields."""

from __future__ import annotations

from knowledge import KnowledgeHit, search_knowledge
from tests.knowledge.conftest import write_article

ZH_POLICY = """# 售后服务

## 退货
收到商品后7天内可以无理由退货，商品需保持完好，吊牌齐全。

## 退款
退款审核通过后，款项将在3个工作日内原路退回您的支付账户。

## 换货
如商品存在质量问题，可在15天内申请换货，运费由我们承担。

## 发票
电子发票会在订单完成后24小时内发送到您的邮箱。
"""

EN_POLICY = """# Help centre

## Shipping
Standard delivery takes 3 to 5 business days. Express delivery arrives the next day.

## Warranty
Every laptop carries a two year warranty covering hardware faults.

## Password reset
To reset your password, open Settings, choose Security and click Reset password.

## Gift cards
Gift cards never expire and can be used on any order.
"""


def test_a_chinese_question_finds_the_passage_it_names_first(acme):
    write_article(acme, ZH_POLICY, title="售后政策")
    write_article(acme, "会员每消费一元积一分，积分可以兑换优惠券。", title="会员积分")
    for question, expected in (
        ("退款多久能到账？", "退款审核通过后"),
        ("发票什么时候发到邮箱", "电子发票"),
        ("质量问题可以换货吗", "换货"),
        ("积分怎么兑换", "积分可以兑换优惠券"),
    ):
        hits = search_knowledge(acme.tenant, question)
        assert hits, question
        assert expected in hits[0].text, (question, [h.text for h in hits])


def test_an_english_question_finds_the_passage_it_names_first(globex):
    write_article(globex, EN_POLICY, title="Help centre")
    for question, expected in (
        ("How do I reset my password?", "reset your password"),
        ("how long is the laptop warranty", "two year warranty"),
        ("when will express delivery arrive", "Express delivery"),
        ("do gift cards expire", "Gift cards never expire"),
    ):
        hits = search_knowledge(globex.tenant, question)
        assert hits, question
        assert expected in hits[0].text, (question, [h.text for h in hits])


def test_the_api_answers_the_contracts_fields_best_first(globex):
    article = write_article(globex, EN_POLICY, title="Help centre", url="https://help.example.com/centre")
    response = globex.client.post("/api/v1/knowledge/search", {"query": "reset password", "k": 2}, format="json")
    assert response.status_code == 200
    results = response.json()["results"]
    assert 1 <= len(results) <= 2
    assert set(results[0]) == {"article_id", "version", "title", "url", "passage_id", "text", "score"}
    assert (results[0]["article_id"], results[0]["version"], results[0]["url"]) == (
        str(article.pk),
        1,
        "https://help.example.com/centre",
    )
    assert 0 < results[-1]["score"] <= results[0]["score"] <= 1
    # the passage id is short and the same on every search
    again = globex.client.post("/api/v1/knowledge/search", {"query": "reset password", "k": 2}, format="json")
    assert again.json()["results"][0]["passage_id"] == results[0]["passage_id"]
    assert len(results[0]["passage_id"]) <= 16


def test_an_article_with_a_segment_is_served_only_to_that_segment(globex):
    # given a general article and one for VIP customers only
    write_article(globex, "Standard support answers within two days.", title="Support")
    write_article(globex, "VIP support answers within one hour by phone.", title="VIP support", segment="vip")
    # then a search without a segment never sees the VIP article, a VIP search sees both
    assert all("VIP" not in hit.text for hit in search_knowledge(globex.tenant, "support answers within"))
    vip = [hit.text for hit in search_knowledge(globex.tenant, "VIP support phone", segment="vip")]
    assert vip[0] == "VIP support answers within one hour by phone."
    assert all("VIP" not in hit.text for hit in search_knowledge(globex.tenant, "support", segment="enterprise"))


def test_a_question_about_nothing_written_finds_little(globex):
    write_article(globex, EN_POLICY, title="Help centre")
    assert search_knowledge(globex.tenant, "zebra migration patterns savannah") == []


def test_hits_are_typed_and_cite_their_passage(globex):
    write_article(globex, EN_POLICY, title="Help centre")
    hit = search_knowledge(globex.tenant, "gift cards", k=1)[0]
    assert isinstance(hit, KnowledgeHit)
    assert hit.heading_path == ("Help centre", "Gift cards")
    assert hit.citation() == {k: v for k, v in hit.as_dict().items() if k not in ("text", "score")}


def _venue(name: str, phone: str, nearby: list[str]) -> str:
    return (
        f"# {name}\n\n{name}是北京的一处景点。\n\n## 地址与电话\n\n"
        f"地址：北京市海淀区新建宫门路19号。\n电话：{phone}。\n\n## 周边\n\n周边景点：{'、'.join(nearby)}。\n"
    )


def test_a_question_naming_an_article_gets_its_section_above_other_articles_mentioning_the_name(acme):
    # given the venue's own page, whose contact section never repeats its name, and five other pages whose
    # "nearby" lists mention it (the name in their own words)
    write_article(acme, _venue("颐和园", "010-62881144", ["圆明园", "北京大学"]), title="颐和园")
    for i, name in enumerate(("圆明园", "北京大学", "香山公园", "玉渊潭", "北海公园")):
        write_article(acme, _venue(name, f"010-6000000{i}", ["颐和园", "故宫"]), title=name)
    # when a customer asks for its phone and what is near it
    hits = search_knowledge(acme.tenant, "颐和园的电话是多少，周边有什么景点？", k=5)
    # then the venue's own contact section, which holds the number, is among the passages, and ranks above
    # every other page's list that merely mentions the name
    texts = [hit.text for hit in hits]
    assert any("010-62881144" in text for text in texts), texts
    own = next(i for i, hit in enumerate(hits) if "010-62881144" in hit.text)
    assert all(hit.title == "颐和园" for hit in hits[: own + 1]), [(h.title, h.text) for h in hits]


def test_an_english_question_naming_an_article_gets_its_section(globex):
    for name, phone in (("Pizza Hut City Centre", "01223323737"), ("Pizza Express", "01223324033")):
        write_article(
            globex,
            f"# {name}\n\n{name} is a restaurant.\n\n## Address and phone\n\nRegent Street. Phone {phone}.\n\n"
            "## Nearby\n\nPizza Hut City Centre, the Cambridge Museum.\n",
            title=name,
        )
    hits = search_knowledge(globex.tenant, "what is the phone number of pizza hut city centre?", k=3)
    assert "01223323737" in hits[0].text, [(h.title, h.text) for h in hits]
