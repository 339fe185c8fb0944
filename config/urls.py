from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from chat import pages as chat_pages
from chat import views as chat_views
from chat.handoff import SessionHandoffView, SessionRatingView, SessionReleaseView, staff_console
from chat.imports import ConversationImportDetailView, ConversationImportView
from chat.privacy import EndUserDetailView, EndUserExportView
from config import ops
from knowledge import views as knowledge_views
from memory import views as memory_views
from memory.end_user import MeMemoriesView, MeMemoryCorrectView, MeMemoryForgetView
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
    # A person takes over (API.md "Handoff to a person"; chat/handoff/state.py).
    path("sessions/<str:session_id>/handoff", SessionHandoffView.as_view(), name="session-handoff"),
    path("sessions/<str:session_id>/release", SessionReleaseView.as_view(), name="session-release"),
    path("sessions/<str:session_id>/rating", SessionRatingView.as_view(), name="session-rating"),
    path("tools", chat_views.ToolListView.as_view(), name="tools"),
    path("tools/<str:name>", chat_views.ToolDetailView.as_view(), name="tool-detail"),
    path("memories", memory_views.MemoryListView.as_view(), name="memories"),
    path("memories/recall", memory_views.MemoryRecallView.as_view(), name="memory-recall"),
    path("memories/<str:memory_id>", memory_views.MemoryDetailView.as_view(), name="memory-detail"),
    path("memories/<str:memory_id>/expire", memory_views.MemoryExpireView.as_view(), name="memory-expire"),
    path("memories/<str:memory_id>/feedback", memory_views.MemoryFeedbackView.as_view(), name="memory-feedback"),
    # The end user's own memories: the browser's session token, not a tenant key (memory/end_user/views.py).
    path("me/memories", MeMemoriesView.as_view(), name="me-memories"),
    path("me/memories/<str:memory_id>/forget", MeMemoryForgetView.as_view(), name="me-memory-forget"),
    path("me/memories/<str:memory_id>/correct", MeMemoryCorrectView.as_view(), name="me-memory-correct"),
    path("end-users/<str:end_user_id>/export", EndUserExportView.as_view(), name="end-user-export"),
    path("end-users/<str:end_user_id>/conversations", ConversationImportView.as_view(), name="end-user-conversations"),
    path(
        "end-users/<str:end_user_id>/conversations/<str:session_id>",
        ConversationImportDetailView.as_view(),
        name="end-user-conversation",
    ),
    path("end-users/<str:end_user_id>", EndUserDetailView.as_view(), name="end-user-detail"),
    # The tenant's articles, their versions and knowledge search (API.md "Knowledge"; docs/knowledge.md).
    path("knowledge/articles", knowledge_views.ArticleListView.as_view(), name="knowledge-articles"),
    path("knowledge/articles/<str:article_id>", knowledge_views.ArticleDetailView.as_view(), name="knowledge-article"),
    path(
        "knowledge/articles/<str:article_id>/retire",
        knowledge_views.ArticleRetireView.as_view(),
        name="knowledge-article-retire",
    ),
    path("knowledge/search", knowledge_views.KnowledgeSearchView.as_view(), name="knowledge-search"),
    path("knowledge/import", knowledge_views.KnowledgeImportView.as_view(), name="knowledge-import"),
]

urlpatterns = [
    # Sessions and messages moved to the conversations app: staff's bookmarks of their admin pages still work.
    re_path(
        r"^admin/chat/(?P<model>chatsession|message)/(?P<rest>.*)$",
        RedirectView.as_view(url="/admin/conversations/%(model)s/%(rest)s", permanent=True, query_string=True),
    ),
    path("admin/", admin.site.urls),
    # Staff sign-in: /oidc/authenticate/, /oidc/callback/ (404 while single sign-on is off), /staff/invitations/….
    path("", include("staff_auth.urls")),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    # The schema's reference page (Swagger UI). The split view serves its start-up script as a file of its own
    # (?script), which the Content-Security-Policy allows from 'self'; an inline one would need the nonce.
    # Public, as the schema is: both describe the API, neither reads a tenant's data.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="schema", template_name="api/swagger_ui.html"),
        name="api-docs",
    ),
    path("chat/", chat_pages.chat_page, name="chat-page"),
    path("widget.js", chat_pages.widget_js, name="widget-js"),
    path("staff/sessions/", chat_pages.live_sessions, name="staff-live-sessions"),
    path("staff/console/", staff_console, name="staff-console"),
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("memory/health", ops.memory_health, name="memory-health"),
    path("metrics", ops.metrics_view, name="prometheus-django-metrics"),
]
