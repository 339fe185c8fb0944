"""The seed's MemoryUnit as a strict pydantic model: validation at the edges
(API, admin, extraction) before anything reaches the store."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memory.models import DEFAULT_EXPIRES_IN, MAX_CONTENT, MAX_SCORE, MIN_SCORE, START_SCORE

MemoryTypeName = Literal["user_profile", "session_state", "tool_result", "fact_reference", "batch_operation"]

#: Ten years: longer lifetimes are almost certainly a unit mistake.
MAX_EXPIRES_IN = 10 * 365 * 86400


class Lifespan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    created_at: datetime
    expires_in: int = Field(DEFAULT_EXPIRES_IN, ge=1, le=MAX_EXPIRES_IN)
    relevance_score: float = Field(START_SCORE, ge=MIN_SCORE, le=MAX_SCORE)


class MemoryUnitIn(BaseModel):
    """What a caller may write."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    type: MemoryTypeName
    content: str = Field(min_length=1, max_length=MAX_CONTENT)
    key: str | None = Field(None, min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.:-]+$")
    data: dict[str, Any] = Field(default_factory=dict)
    expires_in: int = Field(DEFAULT_EXPIRES_IN, ge=1, le=MAX_EXPIRES_IN)

    @field_validator("content")
    @classmethod
    def _no_control_chars(cls, value: str) -> str:
        if any(ord(ch) < 32 and ch not in "\n\t" for ch in value):
            raise ValueError("content must not contain control characters")
        return value
