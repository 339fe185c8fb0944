"""Helpers for the tests of knowledge in the chat turn: the knowledge part of a prompt the fake Ollama received,
and a fake model that cites what it was given."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from prometheus_client import REGISTRY

_LABELLED = re.compile(r"^\[(K\d+)\] (.*)$", re.MULTILINE)


def system_text(request: dict[str, Any]) -> str:
    return request["messages"][0]["content"]


def knowledge_part(request: dict[str, Any]) -> dict[str, str]:
    """Label → passage line of the knowledge part of the system message the model was sent."""
    return dict(_LABELLED.findall(system_text(request)))


def citing(needle: str, *, extra: str = "") -> Callable[[dict[str, Any]], str]:
    """A fake model's reply: it cites the label of the passage holding ``needle`` (as a model that read it
    would), then ``extra`` (e.g. a label it invents)."""

    def reply(body: dict[str, Any]) -> str:
        labels = [label for label, line in knowledge_part(body).items() if needle in line]
        cited = "".join(f"[{label}]" for label in labels[:1])
        return f"根据我们的政策{needle}{cited}。{extra}"

    return reply


def counter(name: str, tenant: str) -> float:
    return REGISTRY.get_sample_value(f"{name}_total", {"tenant": tenant}) or 0.0
