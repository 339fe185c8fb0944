"""The widget's frames on the chat socket: ending the conversation, then rating it; typing only while a person
answers."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from conversations.models import SessionRating
from tenants.rls import tenant_scope
from tests.chat.handoff.kit import chat_socket, session_row, until
from tests.factories import open_session

pytestmark = pytest.mark.django_db(transaction=True)


def _rating(ctx, sid):
    with tenant_scope(ctx.tenant):
        return SessionRating.objects.for_tenant(ctx.tenant).filter(session_id=sid).first()


async def test_ending_the_chat_offers_a_rating_on_the_same_socket(acme):
    # given
    opened = await sync_to_async(open_session)(acme, "rater")
    communicator = await chat_socket(opened)
    # when
    await communicator.send_json_to({"type": "close"})
    closed = await communicator.receive_json_from(timeout=10)
    await communicator.send_json_to({"type": "rating", "score": 4, "comment": "还不错"})
    rated = await communicator.receive_json_from(timeout=10)
    await communicator.send_json_to({"type": "rating", "score": 9})
    refused = await communicator.receive_json_from(timeout=10)
    # then
    assert closed == {"type": "state", "state": "closed"}
    assert rated == {"type": "rated", "score": 4, "handled_by": "ai"}
    assert (refused["type"], refused["code"]) == ("error", "invalid_score")
    rating = await sync_to_async(_rating)(acme, opened["session_id"])
    assert (rating.score, rating.comment) == (4, "还不错")
    assert (await sync_to_async(session_row)(acme, opened["session_id"])).status == "closed"
    await communicator.disconnect()


async def test_a_closed_session_by_the_back_end_reaches_the_open_tab(acme):
    # given
    opened = await sync_to_async(open_session)(acme, "tab")
    communicator = await chat_socket(opened)
    # when
    await sync_to_async(acme.client.post)(f"/api/v1/sessions/{opened['session_id']}/close")
    frame, _ = await until(communicator, "state")
    # then
    assert frame == {"type": "state", "state": "closed"}
    await communicator.disconnect()


async def test_typing_while_the_ai_answers_goes_nowhere(acme):
    # given
    opened = await sync_to_async(open_session)(acme, "typist")
    communicator = await chat_socket(opened)
    # when
    await communicator.send_json_to({"type": "typing"})
    # then: no error, no frame
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()
