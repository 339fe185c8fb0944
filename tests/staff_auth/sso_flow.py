"""The browser's round trip of a single sign-on, with Django's test client on memdesk's side and plain HTTP on the
provider's: memdesk's /oidc/authenticate/ → the provider's /authorize → memdesk's /oidc/callback/."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import httpx
from django.test import Client


def sign_in(client: Client, next_url: str = "/admin/"):
    """Follows the redirects as a browser would; returns memdesk's answer to the callback."""
    start = client.get("/oidc/authenticate/", {"next": next_url})
    assert start.status_code == 302, start.content
    at_provider = httpx.get(start["Location"], follow_redirects=False, timeout=10)
    assert at_provider.status_code == 302, at_provider.text
    back = urlsplit(at_provider.headers["location"])
    assert back.path == "/oidc/callback/", at_provider.headers["location"]
    return client.get(back.path, dict(parse_qsl(back.query)))


def messages_on(client: Client, response) -> str:
    """The page a refused sign-in redirects to, with its messages."""
    assert response.status_code == 302
    return client.get(response["Location"]).content.decode()
