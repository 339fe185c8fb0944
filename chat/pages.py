"""Browser pages: the chat page, the widget loader and the staff live view."""

from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.utils import timezone
from django.views.decorators.http import require_GET

from conversations.models import ChatSession
from conversations.staff_access import StaffRead, What, record_request_reads
from memory.models import MemoryUnit
from memory.store import scope_q, valid_q
from tenants.admin_base import member_tenant_ids
from tenants.local_time import tenant_timezone


@require_GET
def chat_page(request: HttpRequest) -> HttpResponse:
    """The chat page; the session id and token come from the link the
    tenant's back end built from ``POST /api/v1/sessions``."""
    lang = "en" if request.GET.get("lang", "").startswith("en") else "zh"
    context = {"session_id": request.GET.get("session_id", ""), "token": request.GET.get("token", ""), "lang": lang}
    response = render(request, "chat/page.html", context)
    response["Referrer-Policy"] = "no-referrer"  # the token is in the URL
    return response


@require_GET
def widget_js(request: HttpRequest) -> HttpResponse:
    base = f"{request.scheme}://{request.get_host()}"
    response = render(
        request, "chat/widget.js", {"base": base, "chat_js": static("memdesk/chat.js")},
        content_type="application/javascript; charset=utf-8",
    )  # fmt: skip
    response["Access-Control-Allow-Origin"] = "*"
    response["Cache-Control"] = "public, max-age=300"
    return response


@staff_member_required
@require_GET
def live_sessions(request: HttpRequest) -> HttpResponse:
    """A tenant's open sessions with the memories each can recall now. The
    middleware's RLS scope already limits rows to the staff user's tenants;
    the explicit filter says so in the ORM too. Each session shown is a
    recorded read of its end user's memories (``conversations.staff_access``)."""
    now = timezone.now()
    sessions = ChatSession.all_objects.filter(status=ChatSession.Status.OPEN, expires_at__gt=now)
    if not request.user.is_superuser:
        sessions = sessions.filter(tenant_id__in=member_tenant_ids(request.user))
    rows = []
    for session in sessions.select_related("tenant", "end_user").order_by("-last_activity_at")[:100]:
        memories = (
            MemoryUnit.objects.for_tenant(session.tenant_id)
            .filter(scope_q(session), valid_q(now))
            .order_by("type", "-relevance_score")[:30]
        )
        zone = tenant_timezone(session.tenant)  # each session is one tenant's: its times in that tenant's zone
        rows.append({"session": session, "memories": list(memories), "zone": zone, "zone_name": str(zone)})
    shown = [row["session"] for row in rows]
    record_request_reads(request, [StaffRead(s.tenant_id, s.end_user_id, What.MEMORIES, s.pk) for s in shown])
    return render(request, "chat/live_sessions.html", {"rows": rows})
