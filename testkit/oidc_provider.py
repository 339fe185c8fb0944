"""A real OpenID Connect provider on 127.0.0.1 for the single sign-on tests.

Nothing of memdesk or of mozilla-django-oidc is mocked: the product's backend talks HTTP to this server as it
would to Keycloak or Microsoft Entra ID. The protocol is authlib's authorization server (the authorization code
grant with OpenID Connect's ``OpenIDCode`` extension, PKCE, client authentication, bearer tokens); this module
only stores codes and tokens in memory and serves it over ``http.server``:

- ``GET /authorize`` approves at once, for the one ``account`` the provider holds (no login page), and redirects
  to the client's ``redirect_uri`` with ``code`` and ``state`` — or with ``error`` when the request is invalid;
- ``POST /token`` exchanges the code for an access token and an RS256 ``id_token`` (``iss``, ``aud`` = the client
  id, ``nonce``, ``sub``, ``email``, ``preferred_username`` and the ``groups`` claim);
- ``GET /userinfo`` answers the same claims for the bearer of the access token;
- ``GET /jwks`` publishes the public key, ``GET /.well-known/openid-configuration`` the endpoints.

A test changes ``account`` between sign-ins (its groups, say), puts the groups in the id_token only
(``groups_in="id_token"``, as Microsoft Entra ID does), or has the provider hand out an id_token whose claims were
changed after signing (``tamper_with``) or a userinfo about someone else (``userinfo_changes``), which a client
must refuse.
"""

from __future__ import annotations

import base64
import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from authlib.common.security import generate_token
from authlib.consts import default_json_headers
from authlib.oauth2.rfc6749 import (
    AuthorizationCodeGrant,
    AuthorizationServer,
    ClientMixin,
    OAuth2Error,
    OAuth2Request,
    ResourceProtector,
    TokenMixin,
)
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc6750 import BearerTokenGenerator, BearerTokenValidator
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oidc.core import OpenIDCode, UserInfoEndpoint
from joserfc.jwk import RSAKey

CLIENT_ID = "memdesk-staff"
KEY_ID = "testkit-oidc-1"


@dataclass
class Account:
    """The person the provider signs in. ``groups`` is the group claim's value."""

    sub: str = "user-7f3a"
    email: str = "alice@example.com"
    preferred_username: str = "alice"
    given_name: str = "Alice"
    family_name: str = "Liddell"
    groups: list[str] = field(default_factory=list)

    def claims(self, *, with_groups: bool, groups_claim: str) -> dict[str, Any]:
        claims: dict[str, Any] = {
            "sub": self.sub,
            "email": self.email,
            "preferred_username": self.preferred_username,
            "given_name": self.given_name,
            "family_name": self.family_name,
        }
        if with_groups:
            claims[groups_claim] = list(self.groups)
        return claims


class _Client(ClientMixin):
    def __init__(self, client_id: str, client_secret: str) -> None:
        self.client_id = client_id
        self.client_secret = client_secret

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> None:
        return None

    def get_allowed_scope(self, scope: str) -> str:
        return scope

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        # Any memdesk test host (testserver, a live server's port): the callback path is what is registered.
        return urlsplit(redirect_uri).path == "/oidc/callback/"

    def check_client_secret(self, client_secret: str) -> bool:
        return hmac.compare_digest(client_secret, self.client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in ("client_secret_post", "client_secret_basic")

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == "authorization_code"


@dataclass
class _Code:
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: Account
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    auth_time: int

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope

    def get_nonce(self) -> str | None:
        return self.nonce

    def get_auth_time(self) -> int:
        return self.auth_time

    def get_acr(self) -> None:
        return None

    def get_amr(self) -> None:
        return None


class _Token(TokenMixin):
    def __init__(self, token: dict[str, Any], client: _Client, user: Account) -> None:
        self.access_token = token["access_token"]
        self.scope = token.get("scope", "")
        self.expires_at = time.time() + token.get("expires_in", 3600)
        self.client = client
        self.user = user

    def check_client(self, client: Any) -> bool:
        return client.get_client_id() == self.client.client_id

    def get_scope(self) -> str:
        return self.scope

    def get_expires_in(self) -> int:
        return int(self.expires_at - time.time())

    def is_expired(self) -> bool:
        return time.time() >= self.expires_at

    def is_revoked(self) -> bool:
        return False

    def get_user(self) -> Account:
        return self.user

    def get_client(self) -> _Client:
        return self.client


class _Request(OAuth2Request):
    def __init__(self, method: str, uri: str, headers: Any, query: dict[str, str], form: dict[str, str]) -> None:
        super().__init__(method, uri, headers=headers)
        self.payload = BasicOAuth2Payload({**query, **form})
        self._args = query
        self._form = form

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


class _Server(AuthorizationServer):
    def __init__(self, provider: OidcProvider) -> None:
        super().__init__()
        self.provider = provider
        self.register_token_generator(
            "default", BearerTokenGenerator(access_token_generator=lambda **_: generate_token(42))
        )

    def query_client(self, client_id: str) -> _Client | None:
        client = self.provider.client
        return client if client_id == client.client_id else None

    def save_token(self, token: dict[str, Any], request: OAuth2Request) -> None:
        self.provider.tokens[token["access_token"]] = _Token(token, request.client, request.user)

    def create_oauth2_request(self, request: _Request) -> _Request:
        return request

    def handle_response(self, status: int, body: Any, headers: list[tuple[str, str]]) -> tuple[int, Any, Any]:
        return status, body, headers

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        return None


class _CodeGrant(AuthorizationCodeGrant):
    def save_authorization_code(self, code: str, request: OAuth2Request) -> None:
        data = request.payload.data
        self.server.provider.codes[code] = _Code(
            code=code,
            client_id=request.client.get_client_id(),
            redirect_uri=data.get("redirect_uri", ""),
            scope=request.payload.scope or "",
            user=request.user,
            nonce=data.get("nonce"),
            code_challenge=data.get("code_challenge"),
            code_challenge_method=data.get("code_challenge_method"),
            auth_time=int(time.time()),
        )
        if data.get("nonce"):
            self.server.provider.nonces.add(data["nonce"])

    def query_authorization_code(self, code: str, client: _Client) -> _Code | None:
        item = self.server.provider.codes.get(code)
        return item if item is not None and item.client_id == client.get_client_id() else None

    def delete_authorization_code(self, authorization_code: _Code) -> None:
        self.server.provider.codes.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code: _Code) -> Account:
        return authorization_code.user


class _OpenIDCode(OpenIDCode):
    def __init__(self, provider: OidcProvider) -> None:
        super().__init__(require_nonce=True)
        self.provider = provider

    def exists_nonce(self, nonce: str, request: OAuth2Request) -> bool:
        return nonce in self.provider.nonces

    def resolve_client_private_key(self, client: _Client) -> RSAKey:
        return self.provider.key

    def get_client_algorithm(self, client: _Client) -> str:
        return "RS256"

    def get_encode_header(self, client: _Client) -> dict[str, str]:
        return {"alg": "RS256", "kid": KEY_ID}

    def get_client_claims(self, client: _Client) -> dict[str, Any]:
        return {"iss": self.provider.issuer, "aud": [client.get_client_id()]}

    def generate_user_info(self, user: Account, scope: str) -> dict[str, Any]:
        return self.provider.claims_for(user, where="id_token")

    def encode_id_token(self, token: dict[str, Any], request: OAuth2Request) -> str:
        id_token = super().encode_id_token(token, request)
        if self.provider.tamper_with:
            id_token = _with_changed_claims(id_token, self.provider.tamper_with)
        self.provider.id_tokens.append(id_token)
        return id_token


def _with_changed_claims(id_token: str, changes: dict[str, Any]) -> str:
    """The token with its payload changed and its header and signature kept: what a forger can do without the
    provider's key."""
    header, payload, signature = id_token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims.update(changes)
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{forged}.{signature}"


class _UserInfo(UserInfoEndpoint):
    def __init__(self, provider: OidcProvider, resource_protector: ResourceProtector) -> None:
        super().__init__(resource_protector=resource_protector)
        self.provider = provider

    def __call__(self, request: OAuth2Request) -> tuple[int, Any, Any]:
        # authlib's own __call__ reads the bearer token from a framework's global request; this server has none,
        # so the token is validated from the request at hand (the same ResourceProtector check).
        token = self.resource_protector.validate_request(["openid"], request)
        claims = {**self.provider.claims_for(token.get_user(), where="userinfo"), **self.provider.userinfo_changes}
        return 200, claims, default_json_headers


class _BearerTokens(BearerTokenValidator):
    def __init__(self, provider: OidcProvider) -> None:
        super().__init__()
        self.provider = provider

    def authenticate_token(self, token_string: str) -> _Token | None:
        return self.provider.tokens.get(token_string)


class OidcProvider:
    """The provider; see the module docstring. Use it as a context manager; ``django_settings()`` are the
    settings that point memdesk at it."""

    def __init__(
        self,
        *,
        account: Account | None = None,
        client_secret: str = "testkit-client-secret",  # noqa: S107 - a test provider's made-up secret
        groups_claim: str = "groups",
        groups_in: str = "both",
    ) -> None:
        assert groups_in in ("both", "id_token", "userinfo")
        self.account = account or Account()
        self.client = _Client(CLIENT_ID, client_secret)
        self.groups_claim = groups_claim
        self.groups_in = groups_in
        #: claims changed in every id_token after it is signed (None: honest tokens)
        self.tamper_with: dict[str, Any] | None = None
        #: claims the userinfo endpoint answers over the account's (a provider mixing up its users)
        self.userinfo_changes: dict[str, Any] = {}
        self.key = RSAKey.generate_key(2048, parameters={"kid": KEY_ID, "use": "sig", "alg": "RS256"})
        self.codes: dict[str, _Code] = {}
        self.tokens: dict[str, _Token] = {}
        self.nonces: set[str] = set()
        self.id_tokens: list[str] = []
        self.requests: list[tuple[str, str]] = []
        self._server = _Server(self)
        self._server.register_grant(_CodeGrant, [_OpenIDCode(self), CodeChallenge(required=True)])
        protector = ResourceProtector()
        protector.register_token_validator(_BearerTokens(self))
        self._server.register_endpoint(_UserInfo(self, protector))
        self._http: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def claims_for(self, user: Account, *, where: str) -> dict[str, Any]:
        with_groups = self.groups_in in ("both", where)
        return user.claims(with_groups=with_groups, groups_claim=self.groups_claim)

    @property
    def issuer(self) -> str:
        assert self._http is not None, "the provider is not running"
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}"

    def endpoints(self) -> dict[str, str]:
        return {
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "userinfo_endpoint": f"{self.issuer}/userinfo",
            "jwks_uri": f"{self.issuer}/jwks",
        }

    def django_settings(self) -> dict[str, Any]:
        urls = self.endpoints()
        return {
            "OIDC_ENABLED": True,
            "OIDC_RP_CLIENT_ID": self.client.client_id,
            "OIDC_RP_CLIENT_SECRET": self.client.client_secret,
            "OIDC_OP_AUTHORIZATION_ENDPOINT": urls["authorization_endpoint"],
            "OIDC_OP_TOKEN_ENDPOINT": urls["token_endpoint"],
            "OIDC_OP_USER_ENDPOINT": urls["userinfo_endpoint"],
            "OIDC_OP_JWKS_ENDPOINT": urls["jwks_uri"],
            "OIDC_RP_SIGN_ALGO": "RS256",
            "OIDC_GROUPS_CLAIM": self.groups_claim,
        }

    def __enter__(self) -> OidcProvider:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                provider._handle(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                provider._handle(self, "POST")

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                return None

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self._http is not None
        assert self._thread is not None
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        self.requests.append((method, parts.path))
        query = dict(parse_qsl(parts.query))
        form: dict[str, str] = {}
        if method == "POST":
            length = int(handler.headers.get("Content-Length") or 0)
            form = dict(parse_qsl(handler.rfile.read(length).decode()))
        request = _Request(method, f"{self.issuer}{handler.path}", handler.headers, query, form)
        route = (method, parts.path)
        if route == ("GET", "/authorize"):
            status, body, headers = self._authorize(request)
        elif route == ("POST", "/token"):
            status, body, headers = self._server.create_token_response(request)
        elif route == ("GET", "/userinfo"):
            status, body, headers = self._server.create_endpoint_response("userinfo", request)
        elif route == ("GET", "/jwks"):
            status, body, headers = 200, {"keys": [self.key.as_dict(private=False)]}, default_json_headers
        elif route == ("GET", "/.well-known/openid-configuration"):
            status, body, headers = 200, {"issuer": self.issuer, **self.endpoints()}, default_json_headers
        else:
            status, body, headers = 404, {"error": "not_found"}, default_json_headers
        payload = json.dumps(body).encode() if isinstance(body, dict) else (body or "").encode()
        handler.send_response(status)
        for name, value in headers:
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _authorize(self, request: _Request) -> tuple[int, Any, Any]:
        try:
            grant = self._server.get_consent_grant(request, end_user=self.account)
        except OAuth2Error as error:
            return self._server.handle_error_response(request, error)
        # The person approves at once: this provider has no login page.
        return self._server.create_authorization_response(request, grant_user=self.account, grant=grant)
