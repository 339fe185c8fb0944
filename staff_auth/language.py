"""The language of the admin and the staff pages: the staff member's saved choice, then the browser's.

Django's ``LocaleMiddleware`` picks the language of every request from the language cookie, then the
browser's ``Accept-Language`` (``settings.LANGUAGES``: English and Simplified Chinese).
:class:`StaffLanguageMiddleware`, after authentication, puts a signed-in staff member's saved choice
(``StaffPreference.language``) before both, so it follows them from browser to browser. :func:`set_language` is
Django's ``/i18n/setlang/`` (the admin header's switcher posts to it): it sets the cookie and, for staff, saves
the choice. Only staff pages read this: the end user's chat page and widget have their own language parameter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone, translation
from django.views import i18n
from django.views.decorators.http import require_POST

from staff_auth.models import StaffPreference


def check_language(code: Any) -> str | None:
    """``code`` as one of ``settings.LANGUAGES`` (``zh-Hans`` → ``zh-hans``), or None when it is none of them."""
    if not isinstance(code, str) or not code:
        return None
    try:
        return translation.get_supported_language_variant(code)
    except LookupError:
        return None


def saved_language(user: Any) -> str | None:
    """The staff member's saved language, if they chose one that is still offered."""
    stored = StaffPreference.objects.filter(user_id=user.pk).values_list("language", flat=True).first()
    return check_language(stored)


def do_save_language(user: Any, code: str) -> StaffPreference:
    """Saves ``code`` (already checked) as ``user``'s language; the last choice wins."""
    preference, _ = StaffPreference.objects.update_or_create(
        user=user, defaults={"language": code, "updated_at": timezone.now()}
    )
    return preference


def _is_staff(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and user.is_active and user.is_staff)


class StaffLanguageMiddleware:
    """After ``AuthenticationMiddleware``: a signed-in staff member's saved language, over what
    ``LocaleMiddleware`` chose. A request without a session cookie (an API call, a probe) reads nothing."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if _is_staff(request):
            language = saved_language(request.user)
            if language is not None:
                translation.activate(language)
                request.LANGUAGE_CODE = language
        return self.get_response(request)


@require_POST
def set_language(request: HttpRequest) -> HttpResponse:
    """Django's ``set_language`` (the cookie, the redirect to ``next``), and the choice saved for staff."""
    response = i18n.set_language(request)
    language = check_language(request.POST.get("language"))
    if language is not None and _is_staff(request):
        do_save_language(request.user, language)
    return response
