"""The agent answers from the tenant's articles: the passages reach the prompt with labels, the model is told to
cite them, and the reply carries the citations it made of passages it was given — through REST and the WebSocket,
stored with the reply; a label the model invents is dropped and counted; another tenant's articles never reach
the prompt."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from config.asgi import application
from conversations.models import Message
from knowledge.models import Citation
from tenants.rls import tenant_scope
from tests.factories import open_session
from tests.knowledge.chat_kit import citing, counter, knowledge_part, system_text
from tests.knowledge.conftest import write_article
from tests.knowledge.test_search import EN_POLICY, ZH_POLICY

# The turn runs its database steps on other threads (and the knowledge search on one of its own): real transactions.
pytestmark = pytest.mark.django_db(transaction=True)

REFUND = "退款审核通过后"


def _send(ctx, sid, text, client_msg_id=None):
    body = {"text": text, **({"client_msg_id": client_msg_id} if client_msg_id else {})}
    return ctx.client.post(f"/api/v1/sessions/{sid}/messages", body, format="json")


@pytest.fixture
def policy(acme):
    return write_article(acme, ZH_POLICY, title="售后政策", url="https://help.acme.cn/after-sales")


def test_a_reply_cites_the_passage_it_was_given_over_rest(acme, policy, fake_ollama):
    # given a model that cites the refund passage's label
    fake_ollama.script(citing(REFUND))
    sid = open_session(acme, "u1")["session_id"]
    # when the customer asks about refunds
    response = _send(acme, sid, "退款多久能到账？")
    # then the prompt carried the refund passage under a label, with the instruction to cite
    assert response.status_code == 200, response.content
    request = fake_ollama.chat_requests[-1]
    passages = knowledge_part(request)
    assert any(REFUND in line for line in passages.values())
    assert list(passages)[0] == "K1"
    assert "[K1]" in system_text(request)  # the cite instruction's example
    # and the reply's citations name the article version and the passage
    body = response.json()
    label = next(label for label, line in passages.items() if REFUND in line)
    assert f"[{label}]" in body["reply"]
    assert len(body["citations"]) == 1
    citation = body["citations"][0]
    assert set(citation) == {"article_id", "version", "title", "url", "passage_id"}
    assert (citation["article_id"], citation["version"], citation["title"], citation["url"]) == (
        str(policy.pk), 1, "售后政策", "https://help.acme.cn/after-sales"
    )  # fmt: skip
    # and staff can see which reply cited which version
    with tenant_scope(acme.tenant):
        rows = list(Citation.objects.for_tenant(acme.tenant).select_related("version"))
    assert [(str(r.message_id), r.version.article_id, r.version.number, r.passage_id, r.label) for r in rows] == [
        (body["reply_id"], policy.pk, 1, citation["passage_id"], label)
    ]


def test_an_invented_label_is_dropped_and_counted(acme, policy, fake_ollama):
    # given a model that cites the refund passage and a label it was never given
    before = counter("memdesk_knowledge_invented_citations", "acme")
    fake_ollama.script(citing(REFUND, extra="另外请参考 [K9] 和【K12】。"))
    sid = open_session(acme, "u1")["session_id"]
    # when
    body = _send(acme, sid, "退款多久能到账？").json()
    # then only the real passage is a citation; the two invented labels are counted
    assert [c["title"] for c in body["citations"]] == ["售后政策"]
    assert counter("memdesk_knowledge_invented_citations", "acme") - before == 2
    with tenant_scope(acme.tenant):
        assert Citation.objects.for_tenant(acme.tenant).count() == 1


def test_a_retried_message_returns_the_same_citations(acme, policy, fake_ollama):
    fake_ollama.script(citing(REFUND))
    sid = open_session(acme, "u1")["session_id"]
    first = _send(acme, sid, "退款多久能到账？", "same").json()
    again = _send(acme, sid, "退款多久能到账？", "same").json()
    assert again["citations"] == first["citations"] != []
    assert len(fake_ollama.chat_requests) == 1


def test_a_reply_without_labels_cites_nothing(acme, policy, fake_ollama):
    fake_ollama.script("3个工作日内到账。")
    sid = open_session(acme, "u1")["session_id"]
    body = _send(acme, sid, "退款多久能到账？").json()
    assert body["citations"] == []


async def test_the_done_frame_carries_the_citations(acme, policy, fake_ollama):
    # given
    fake_ollama.script(citing(REFUND))
    opened = await sync_to_async(open_session)(acme, "ws-user")
    path = f"/ws/chat/?session_id={opened['session_id']}&token={opened['token']}"
    communicator = WebsocketCommunicator(application, path, headers=[(b"host", b"testserver")])
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    # when
    await communicator.send_json_to({"type": "message", "text": "退款多久能到账？", "client_msg_id": "c1"})
    frames = []
    while not frames or frames[-1]["type"] not in ("done", "error"):
        frames.append(await communicator.receive_json_from(timeout=20))
    await communicator.disconnect()
    # then
    done = frames[-1]
    assert done["type"] == "done", done
    assert [(c["article_id"], c["version"], c["title"]) for c in done["citations"]] == [(str(policy.pk), 1, "售后政策")]

    def stored_citations():
        with tenant_scope(acme.tenant):
            reply = Message.objects.for_tenant(acme.tenant).get(pk=done["reply_id"])
            return reply.data["citations"]

    assert await sync_to_async(stored_citations)() == done["citations"]


def test_another_tenants_articles_never_reach_the_prompt(acme, globex, fake_ollama):
    # given globex's help centre, and acme with an article of its own
    write_article(globex, EN_POLICY, title="Help centre")
    write_article(acme, ZH_POLICY, title="售后政策")
    sid = open_session(acme, "u1")["session_id"]
    # when acme's customer asks what only globex's articles answer, in globex's words
    fake_ollama.script("[K1][K2][K3]")
    body = _send(acme, sid, "How do I reset my password? Do gift cards expire?").json()
    # then nothing of globex's is in the prompt or cited
    request = fake_ollama.chat_requests[-1]
    assert "password" not in system_text(request).lower()
    assert "Gift cards never expire" not in system_text(request)
    assert all(c["title"] != "Help centre" for c in body["citations"])


def test_a_tenant_without_articles_gets_no_knowledge_part(acme, fake_ollama):
    sid = open_session(acme, "u1")["session_id"]
    _send(acme, sid, "退款多久能到账？")
    assert "【知识库】" not in system_text(fake_ollama.chat_requests[-1])


def test_an_article_for_a_segment_reaches_only_that_segments_sessions(globex, fake_ollama):
    # given a VIP-only article
    write_article(globex, "VIP support answers within one hour by phone.", title="VIP support", segment="vip")
    write_article(globex, "Standard support answers within two days by e-mail.", title="Support")
    vip = open_session(globex, "v1", metadata={"segment": "vip"})["session_id"]
    plain = open_session(globex, "p1")["session_id"]
    # when both ask
    _send(globex, vip, "How fast does support answer?")
    vip_prompt = system_text(fake_ollama.chat_requests[-1])
    _send(globex, plain, "How fast does support answer?")
    plain_prompt = system_text(fake_ollama.chat_requests[-1])
    # and the VIP customer asks again (a later turn of a tenant with articles starts its search as the turn begins)
    _send(globex, vip, "Does VIP support answer by phone?")
    vip_again = system_text(fake_ollama.chat_requests[-1])
    # then each turn's prompt holds the articles of its own audience only
    assert "within one hour" in vip_prompt
    assert "within one hour" not in plain_prompt
    assert "within two days" in plain_prompt
    assert "within one hour" in vip_again


def test_the_history_lists_each_replys_citations(acme, policy, fake_ollama):
    # given a reply that cited the refund passage, and one that cited nothing
    fake_ollama.script(citing(REFUND))
    opened = open_session(acme, "u1")
    sid = opened["session_id"]
    cited = _send(acme, sid, "退款多久能到账？").json()
    fake_ollama.script(lambda body: "好的。")
    _send(acme, sid, "谢谢")
    # when the page reloads its history over REST
    listed = acme.client.get(f"/api/v1/sessions/{sid}/messages").json()["messages"]
    # then the first reply carries the citations its turn answered, the second an empty list, the user's none
    replies = [m for m in listed if m["role"] == "assistant"]
    assert [r["citations"] for r in replies] == [cited["citations"], []]
    assert all("citations" not in m for m in listed if m["role"] == "user")
    assert cited["citations"][0]["title"] == "售后政策"


async def test_the_sockets_history_frame_lists_each_replys_citations(acme, policy, fake_ollama):
    # given a reply that cited the refund passage
    fake_ollama.script(citing(REFUND))
    opened = await sync_to_async(open_session)(acme, "ws-history")
    cited = (await sync_to_async(_send)(acme, opened["session_id"], "退款多久能到账？")).json()
    # when the page reconnects and asks for its history
    path = f"/ws/chat/?session_id={opened['session_id']}&token={opened['token']}"
    communicator = WebsocketCommunicator(application, path, headers=[(b"host", b"testserver")])
    connected, _ = await communicator.connect(timeout=10)
    assert connected
    await communicator.send_json_to({"type": "history", "limit": 50})
    frame = await communicator.receive_json_from(timeout=10)
    while frame["type"] != "history":
        frame = await communicator.receive_json_from(timeout=10)
    await communicator.disconnect()
    # then the reply in it carries the same citations as when it was answered
    reply = next(m for m in frame["messages"] if m["role"] == "assistant")
    assert reply["citations"] == cited["citations"]
    assert len(reply["citations"]) == 1
