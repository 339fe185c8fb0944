"""The seed's MemoryUnit as a strict pydantic model, and ``check_memory_input``: validation at the edges
(API, admin, extraction) before anything reaches the store, with the contract's error codes."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from config.errors import ApiError
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


class InvalidMemory(ApiError):
    code = "invalid_memory"


def check_memory_input(**fields: Any) -> MemoryUnitIn:
    """Validate caller input; raises ``ApiError`` with a contract code."""
    try:
        return MemoryUnitIn(**{k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"]) or "body"
        if field == "content" and error["type"] == "string_too_long":
            raise ApiError(f"content must be at most {MAX_CONTENT} characters", code="content_too_long") from None
        if field == "type":
            raise ApiError(
                "type must be one of user_profile, session_state, tool_result, fact_reference, batch_operation",
                code="unknown_type",
            ) from None
        raise InvalidMemory(f"{field}: {error['msg']}") from None
