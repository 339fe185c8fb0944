from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from chat import pages as chat_pages
from chat import views as chat_views
from config import ops
from memory import views as memory_views
from tenants.throttles import SessionCreateThrottle

handler400 = "config.errors.handler400"
handler404 = "config.errors.handler404"
handler500 = "config.errors.handler500"

api_v1 = [
    path("sessions", chat_views.SessionListView.as_view(throttle_classes=[SessionCreateThrottle]), name="sessions"),
    path("sessions/<str:session_id>", chat_views.SessionDetailView.as_view(), name="session-detail"),
    path("sessions/<str:session_id>/close", chat_views.SessionCloseView.as_view(), name="session-close"),
    path("sessions/<str:session_id>/messages", chat_views.SessionMessagesView.as_view(), name="session-messages"),
    path("sessions/<str:session_id>/context", chat_views.SessionContextView.as_view(), name="session-context"),
    path("sessions/<str:session_id>/batches", chat_views.BatchListView.as_view(), name="session-batches"),
    path("sessions/<str:session_id>/batches/<str:task_id>", chat_views.BatchDetailView.as_view(), name="session-batch"),
    path("tools", chat_views.ToolListView.as_view(), name="tools"),
    path("tools/<str:name>", chat_views.ToolDetailView.as_view(), name="tool-detail"),
    path("memories", memory_views.MemoryListView.as_view(), name="memories"),
    path("memories/recall", memory_views.MemoryRecallView.as_view(), name="memory-recall"),
    path("memories/<str:memory_id>", memory_views.MemoryDetailView.as_view(), name="memory-detail"),
    path("memories/<str:memory_id>/expire", memory_views.MemoryExpireView.as_view(), name="memory-expire"),
    path("memories/<str:memory_id>/feedback", memory_views.MemoryFeedbackView.as_view(), name="memory-feedback"),
]

urlpatterns = [
    # Sessions and messages moved to the conversations app: staff's bookmarks of their admin pages still work.
    re_path(
        r"^admin/chat/(?P<model>chatsession|message)/(?P<rest>.*)$",
        RedirectView.as_view(url="/admin/conversations/%(model)s/%(rest)s", permanent=True, query_string=True),
    ),
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("chat/", chat_pages.chat_page, name="chat-page"),
    path("widget.js", chat_pages.widget_js, name="widget-js"),
    path("staff/sessions/", chat_pages.live_sessions, name="staff-live-sessions"),
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("memory/health", ops.memory_health, name="memory-health"),
    path("metrics", ops.metrics_view, name="prometheus-django-metrics"),
]
