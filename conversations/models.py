"""The conversation record every layer above shares: sessions and their messages.

They sit below ``memory`` and ``chat`` (docs/architecture.md): memories point at their session and source
message, the chat runtime writes turns into them. The tables keep the names they had when they lived in
the ``chat`` app (``chat_chatsession``, ``chat_message``): moving the models moved no data.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from tenants.models import EndUser, Tenant
from tenants.scoping import TenantOwned


def _default_expiry():  # noqa: ANN202 - Django default callable
    return timezone.now() + timedelta(seconds=settings.SESSION_TOKEN_TTL_S)


class ChatSession(TenantOwned):
    class Status(models.TextChoices):
        OPEN = "open", _("Open")
        CLOSED = "closed", _("Closed")

    class State(models.TextChoices):
        AI = "ai", _("The AI answers")
        WAITING_FOR_HUMAN = "waiting_for_human", _("Waiting for a person")
        WITH_HUMAN = "with_human", _("A person answers")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="sessions")
    end_user = models.ForeignKey(EndUser, on_delete=models.CASCADE, related_name="sessions")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_activity_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(default=_default_expiry)
    closed_at = models.DateTimeField(null=True, blank=True)
    topic = models.CharField(max_length=200, blank=True, default="")
    context_reset_pending = models.BooleanField(
        default=False, help_text=_("A topic switch was detected; the next prompt carries <|context_reset|>.")
    )
    #: The topic the session is on and the topics it left, frozen (memory/topics/freeze.py documents the shape).
    topic_state = models.JSONField(default=dict, blank=True, db_default=models.Value({}, models.JSONField()))
    empty_recall_streak = models.PositiveIntegerField(
        default=0, help_text=_("Consecutive turns where neither the rule nor the vector stage found anything.")
    )
    amnesia_alerted = models.BooleanField(
        default=False, help_text=_("An amnesia alert fired during the current empty-recall streak.")
    )
    #: Who answers (API.md § Handoff to a person): the AI, nobody yet (waiting in the staff queue), or a
    #: staff member (``assigned_to``). A closed session is ``status`` closed, whatever its state was.
    state = models.CharField(max_length=20, choices=State.choices, default=State.AI, db_default=State.AI)
    handoff_trigger = models.CharField(max_length=20, blank=True, default="", db_default="")
    handoff_reason = models.CharField(max_length=300, blank=True, default="", db_default="")
    handoff_at = models.DateTimeField(null=True, blank=True)
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: A staff member has answered in this session at least once (a rating's ``handled_by``).
    staff_involved = models.BooleanField(default=False, db_default=False)

    class Meta(TenantOwned.Meta):
        db_table = "chat_chatsession"
        indexes = [
            models.Index(fields=["tenant", "end_user", "-created_at"], name="session_by_user"),
            # The staff queue: a tenant's sessions waiting for a person, oldest first.
            models.Index(
                fields=["tenant", "handoff_at"], name="session_waiting", condition=models.Q(state="waiting_for_human")
            ),
        ]

    def __str__(self) -> str:
        return str(self.id)

    @property
    def session_id(self) -> uuid.UUID:
        return self.id

    def is_live(self, now=None) -> bool:  # noqa: ANN001
        now = now or timezone.now()
        return self.status == self.Status.OPEN and self.expires_at > now


class Message(TenantOwned):
    class Role(models.TextChoices):
        USER = "user", _("User")
        ASSISTANT = "assistant", _("Assistant")
        TOOL = "tool", _("Tool")
        STAFF = "staff", _("Staff")

    class Status(models.TextChoices):
        COMPLETE = "complete", _("Complete")
        PARTIAL = "partial", _("Partial (stream interrupted)")
        FAILED = "failed", _("Failed")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=10, choices=Role.choices)
    text = models.TextField()
    client_msg_id = models.CharField(max_length=100, null=True, blank=True)
    reply_to = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.COMPLETE)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    seq = models.PositiveIntegerField(default=0, editable=False, help_text=_("Order within the session."))
    #: When the message's conversation units were written (memory.conversation.units); NULL until then, so a
    #: process that died between the reply and the write leaves the message for ``index_pending``.
    memory_indexed_at = models.DateTimeField(null=True, blank=True, editable=False)
    #: Until when a running turn answers this user message (a message with a ``client_msg_id`` only): a
    #: retry with that id meanwhile waits for the turn's reply instead of calling the model a second time.
    #: The running turn renews it; a turn that failed clears it, one whose process died lets it lapse.
    turn_lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    #: The staff member who wrote a ``staff`` message.
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta(TenantOwned.Meta):
        db_table = "chat_message"
        ordering = ["seq"]
        indexes = [
            models.Index(fields=["session", "seq"], name="message_by_session"),
            # The per-tenant rate limit reads the tenant's user messages of the last minute.
            models.Index(fields=["tenant", "created_at"], name="message_user_recent", condition=models.Q(role="user")),
            # Retention deletes a tenant's messages older than N days (chat.privacy.retention).
            models.Index(fields=["tenant", "created_at"], name="message_by_time"),
            # The messages still to index (memory.conversation.units.index_pending): few at any time.
            models.Index(
                fields=["tenant", "created_at"],
                name="message_unindexed",
                condition=models.Q(memory_indexed_at__isnull=True, role__in=["user", "assistant"]),
            ),  # fmt: skip
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "client_msg_id"],
                condition=models.Q(client_msg_id__isnull=False),
                name="uniq_client_msg_id",
            )
        ]

    def __str__(self) -> str:
        return f"{self.role}: {self.text[:40]}"


class StaffAccess(TenantOwned):
    """A staff member read an end user's data (a conversation, their memories): who, what, when. Owners list these
    to answer "who looked at my data". Goes with the end user on erasure."""

    class What(models.TextChoices):
        CONVERSATION = "conversation", _("Conversation")
        MEMORIES = "memories", _("Memories")
        MEMORY = "memory", _("Memory")
        EXPORT = "export", _("Export")

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    end_user = models.ForeignKey(EndUser, on_delete=models.CASCADE, related_name="+")
    # A session deleted later (retention, by hand) leaves the record of who read it.
    session = models.ForeignKey(ChatSession, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    what = models.CharField(max_length=12, choices=What.choices)
    path = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta(TenantOwned.Meta):
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "staff accesses"
        indexes = [models.Index(fields=["tenant", "created_at"], name="staff_access_by_time")]

    def __str__(self) -> str:
        return f"{self.user} read {self.what} at {self.created_at:%Y-%m-%d %H:%M:%S}"


class SessionRating(TenantOwned):
    """The end user's satisfaction with a conversation (API.md: ``POST …/rating``); a second rating replaces
    the first. ``handled_by`` and ``staff`` say who answered: the AI, a staff member, or both."""

    class HandledBy(models.TextChoices):
        # "Ai" is the label Django derived when the field was made; the English catalogue writes it "AI".
        AI = "ai", _("Ai")
        STAFF = "staff", _("Staff")
        BOTH = "both", _("Both")

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    session = models.OneToOneField(ChatSession, on_delete=models.CASCADE, related_name="rating")
    score = models.PositiveSmallIntegerField()
    comment = models.TextField(blank=True, default="")
    handled_by = models.CharField(max_length=5, choices=HandledBy.choices)
    staff = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta(TenantOwned.Meta):
        ordering = ["-updated_at", "-id"]
        constraints = [models.CheckConstraint(condition=models.Q(score__gte=1, score__lte=5), name="rating_score_1_5")]

    def __str__(self) -> str:
        return f"{self.score}/5 ({self.handled_by})"


class ImportedConversation(TenantOwned):
    """A past conversation a tenant imported (API.md "Past conversations (import)"): its own id in the tenant's
    old help desk, the closed session that holds its messages at their own times, and how far the background
    job has turned them into memory. One per ``external_id`` and end user: a repeated import finds this row."""

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        INDEXING = "indexing", _("Indexing")
        DONE = "done", _("Done")
        FAILED = "failed", _("Failed")

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    end_user = models.ForeignKey(EndUser, on_delete=models.CASCADE, related_name="+")
    session = models.OneToOneField(ChatSession, on_delete=models.CASCADE, related_name="imported")
    external_id = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    messages = models.PositiveIntegerField()
    #: The ``seq`` of the last message the job has turned into memory (-1: none yet): a job that failed or
    #: was stopped half-way resumes after it.
    done_seq = models.IntegerField(default=-1)
    error = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta(TenantOwned.Meta):
        constraints = [
            models.UniqueConstraint(fields=["tenant", "end_user", "external_id"], name="uniq_imported_conversation")
        ]
        indexes = [models.Index(fields=["tenant", "status"], name="imported_by_status")]

    def __str__(self) -> str:
        return f"{self.external_id} ({self.status})"
