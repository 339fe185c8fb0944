"""Signed, expiring session tokens for end users' browsers.

A token binds one tenant and one session; it is a Django ``TimestampSigner``
signature (HMAC with SECRET_KEY), so nothing is stored server-side.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.conf import settings
from django.core import signing

_SALT = "memdesk.session-token.v1"


@dataclass(frozen=True)
class TokenClaims:
    tenant_id: uuid.UUID
    session_id: uuid.UUID


class InvalidToken(Exception):
    pass


def issue_token(tenant_id: uuid.UUID, session_id: uuid.UUID) -> str:
    return signing.dumps({"t": str(tenant_id), "s": str(session_id)}, salt=_SALT, compress=False)


def read_token(token: str, *, max_age: int | None = None) -> TokenClaims:
    """Claims of a valid, unexpired token; ``InvalidToken`` otherwise."""
    if not token:
        raise InvalidToken("token missing")
    try:
        data = signing.loads(token, salt=_SALT, max_age=max_age or settings.SESSION_TOKEN_TTL_S)
        return TokenClaims(tenant_id=uuid.UUID(data["t"]), session_id=uuid.UUID(data["s"]))
    except signing.SignatureExpired:
        raise InvalidToken("token expired") from None
    except (signing.BadSignature, KeyError, ValueError, TypeError):
        raise InvalidToken("token invalid") from None
