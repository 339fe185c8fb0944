"""The two single sign-on pages: ``/oidc/authenticate/`` sends the browser to the identity provider,
``/oidc/callback/`` takes its answer. Both are mozilla-django-oidc's views; memdesk's part is where they lead
(the admin, or its login page with the reason of a refusal) and that they do not exist while single sign-on is
off (``OIDC_ENABLED``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from staff_auth.backends import refusal


class _WhenEnabled:
    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.OIDC_ENABLED:
            raise Http404("single sign-on is not configured")
        return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]


class SignInView(_WhenEnabled, OIDCAuthenticationRequestView):
    pass


class CallbackView(_WhenEnabled, OIDCAuthenticationCallbackView):
    #: No request-wide transaction (tenants.middleware): the sign-in calls the provider over the network, and
    #: ``do_sso_login`` opens its own short transaction once the answer is verified.
    self_scoped = True

    @property
    def success_url(self) -> str:
        return self.request.session.get("oidc_login_next") or reverse("admin:index")

    def login_failure(self) -> HttpResponse:
        reason = refusal(self.request)
        if reason is not None:
            text = reason.message
        elif self.request.GET.get("error"):
            text = gettext("The identity provider did not sign you in (%(error)s).") % {
                "error": self.request.GET["error"][:100]
            }
        else:
            text = gettext("Single sign-on did not complete. Start again from the sign-in page.")
        messages.error(self.request, text)
        return HttpResponseRedirect(reverse("admin:login"))
