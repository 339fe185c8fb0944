"""``{% sso_sign_in_url next as url %}``: where the admin login page's single sign-on button leads, or "" while
single sign-on is off (then the page shows no button)."""

from __future__ import annotations

from urllib.parse import urlencode

from django import template
from django.conf import settings
from django.urls import reverse

register = template.Library()


@register.simple_tag
def sso_sign_in_url(next_url: str = "") -> str:
    if not settings.OIDC_ENABLED:
        return ""
    url = reverse("oidc_authentication_init")
    return f"{url}?{urlencode({'next': next_url})}" if next_url else url
