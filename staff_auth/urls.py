"""Staff sign-in routes, included at the root by config/urls.py. The single sign-on pages answer 404 while it is
off (``OIDC_ENABLED``); the names are mozilla-django-oidc's, which its views reverse. ``/i18n/setlang/`` is
Django's language switch, which also saves a staff member's choice (``staff_auth.language``)."""

from __future__ import annotations

from django.urls import path

from staff_auth import invitation_views, language, sso_views

urlpatterns = [
    path("oidc/authenticate/", sso_views.SignInView.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", sso_views.CallbackView.as_view(), name="oidc_authentication_callback"),
    path("staff/invitations/<str:token>/", invitation_views.accept_invitation, name="staff-invitation"),
    path("i18n/setlang/", language.set_language, name="set_language"),
]
