"""Fixtures for tools and batches: a fake tenant back end and a registered tool."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.chat.tools.backend import FakeBackend

ORDER_SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string", "minLength": 1}},
    "required": ["order_id"],
    "additionalProperties": False,
}


@pytest.fixture
def backend() -> Iterator[FakeBackend]:
    with FakeBackend() as server:
        yield server


def register(ctx: Any, url: str, *, name: str = "query_order", schema: dict | None = None, **extra: Any) -> dict:
    body = {
        "name": name,
        "description": "Look up an order by its id",
        "parameters": schema or ORDER_SCHEMA,
        "url": url,
        **extra,
    }
    response = ctx.client.post("/api/v1/tools", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()
