"""``/staff/invitations/<token>/``: the page an invitation e-mail links to. It shows what the link is worth, and
accepts it (POST) for the signed-in invitee, or for a new account with the password the invitee sets here;
``staff_auth.invitations`` decides everything."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.contrib.auth.forms import SetPasswordForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods

from staff_auth.invitations import InvitationError, check_acceptance, do_accept_invitation
from tenants.local_time import tenant_timezone
from tenants.models import Membership

TEMPLATE = "staff_auth/invitation.html"


@require_http_methods(["GET", "POST"])
def accept_invitation(request: HttpRequest, token: str) -> HttpResponse:
    user = request.user if request.user.is_authenticated else None
    posted = request.method == "POST"
    try:
        if posted and user is not None:
            _, membership = do_accept_invitation(token, user=user)
            return _joined(request, membership)
        invitation = check_acceptance(token, user, record=posted)
        form = None
        if user is None:
            new_account = get_user_model()(username=invitation.email, email=invitation.email)
            form = SetPasswordForm(new_account, request.POST if posted else None)
            if posted and form.is_valid():
                account, membership = do_accept_invitation(token, password=form.cleaned_data["new_password1"])
                login(request, account, backend="django.contrib.auth.backends.ModelBackend")
                return _joined(request, membership)
    except InvitationError as error:
        return render(request, TEMPLATE, {"title": gettext("Invitation"), "error": error}, status=error.status)
    zone = tenant_timezone(invitation.tenant)  # the page shows this tenant's invitation: its time zone
    context = {"title": gettext("Invitation"), "invitation": invitation, "form": form, "zone": zone}
    return render(request, TEMPLATE, {**context, "zone_name": str(zone)})


def _joined(request: HttpRequest, membership: Membership) -> HttpResponse:
    text = gettext("You are now %(role)s of %(tenant)s.")
    messages.success(request, text % {"role": membership.get_role_display(), "tenant": membership.tenant.name})
    return redirect("admin:index")
