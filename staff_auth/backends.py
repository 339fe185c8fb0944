"""mozilla-django-oidc's authentication backend, narrowed to memdesk's staff sign-in.

The library runs the code flow: it exchanges the code at the token endpoint, checks the id_token's signature
against the provider's JWKS and its nonce, and reads the userinfo endpoint. This subclass adds what memdesk
needs on top:

- it acts only on the callback of the sign-in it started (``/oidc/callback/``), never on the admin's password
  form (which would otherwise hand a ``?code=`` of the attacker's choosing to the token endpoint);
- the id_token must be addressed to us (``aud`` holds ``OIDC_RP_CLIENT_ID``; the library skips that check),
  and the userinfo must describe the same ``sub`` as the id_token (OpenID Connect Core 5.3.2);
- users are found and made by ``staff_auth.sso.do_sso_login`` (by ``iss`` and ``sub``, never by e-mail), which
  also brings their memberships in line with the group claim;
- every failure is a refusal with a reason the callback page shows (``refusal``), not a 400 or a 500.

Django tells the refusal to django-axes like a wrong password (``user_login_failed``): refused sign-ins count
toward the client address's lockout, and a locked-out address cannot sign in this way either.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import jwt
import requests
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest
from django.urls import reverse
from django.utils.translation import gettext
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from staff_auth.sso import SsoRefused, do_sso_login

logger = logging.getLogger(__name__)

_REFUSAL = "staff_auth_refusal"


def refusal(request: HttpRequest) -> SsoRefused | None:
    """Why this request's sign-in was refused, if it was."""
    return getattr(request, _REFUSAL, None)


def _refuse(request: HttpRequest, reason: SsoRefused) -> None:
    setattr(request, _REFUSAL, reason)


def _unverified() -> SsoRefused:
    return SsoRefused(
        "unverified_answer",
        gettext(
            "The identity provider's answer could not be verified, so you are not signed in. Try again; if it "
            "keeps failing, tell your administrator."
        ),
    )


class StaffOIDCBackend(OIDCAuthenticationBackend):
    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        if request is None or "password" in kwargs or request.path != reverse("oidc_authentication_callback"):
            return None
        try:
            return super().authenticate(request, **kwargs)
        except SsoRefused as refused:
            _refuse(request, refused)
        except (SuspiciousOperation, jwt.InvalidTokenError, requests.RequestException, ValueError, KeyError) as exc:
            # A bad signature, a wrong nonce or audience, an expired token, a provider that answers an error or
            # not at all: the answer cannot be trusted, whatever the reason; the log says which.
            logger.warning("single sign-on refused: %s: %s", type(exc).__name__, exc)
            _refuse(request, _unverified())
        return None

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        payload = super().verify_token(token, **kwargs)
        audience = payload.get("aud")
        audiences = [audience] if isinstance(audience, str) else list(audience or [])
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("the id_token is not addressed to this client (aud)")
        return payload

    def get_or_create_user(self, access_token: str, id_token: str, payload: Mapping[str, Any]) -> Any:
        user_info = self.get_userinfo(access_token, id_token, payload)
        if user_info.get("sub") != payload.get("sub"):
            # Raised as a refusal: the library would swallow a SuspiciousOperation from here without a reason.
            logger.warning("single sign-on refused: the userinfo's sub differs from the id_token's")
            raise _unverified()
        # Some providers put the groups in the id_token only (Microsoft Entra ID), others in the userinfo too:
        # both are the provider's word, the userinfo's wins where both have a claim.
        return do_sso_login(issuer=str(payload.get("iss", "")), claims={**payload, **user_info})
