"""MemoryUnit — a typed, compressed, expiring memory — and its audit trail.

Lifespan (seed S4/S5): a memory is valid at ``as_of`` when
``created_at <= as_of < expires_at`` (the rule's one home is ``memory.store.read``). Replacing a keyed memory does not
overwrite it: the old row's ``expires_at`` is cut to the moment of
replacement, ``superseded_at``/``superseded_by`` point at the new row, and a
recall ``as_of`` a past moment still sees what was true then.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models.functions import Coalesce
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from pgvector.django import VectorField

from conversations.models import ChatSession, Message
from memory.text.masking import mask_text
from tenants.models import EndUser, Tenant
from tenants.scoping import TenantOwned

EMBEDDING_DIM = 384
MAX_CONTENT = 150
MIN_SCORE, MAX_SCORE, START_SCORE = 0.1, 2.0, 1.0
DEFAULT_EXPIRES_IN = 86400
_NIL_UUID = uuid.UUID(int=0)


class MemoryType(models.TextChoices):
    USER_PROFILE = "user_profile", _("User profile")
    SESSION_STATE = "session_state", _("Session state")
    TOOL_RESULT = "tool_result", _("Tool result")
    FACT_REFERENCE = "fact_reference", _("Fact reference")
    BATCH_OPERATION = "batch_operation", _("Batch operation")


#: Types that belong to one session; the others belong to the end user.
SESSION_TYPES = frozenset({MemoryType.SESSION_STATE.value, MemoryType.BATCH_OPERATION.value})


class MemoryUnit(TenantOwned):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    end_user = models.ForeignKey(EndUser, on_delete=models.CASCADE, related_name="memories")
    session = models.ForeignKey(
        ChatSession, null=True, blank=True, on_delete=models.CASCADE, related_name="memories",
        help_text=_("Set only for session-scoped types (session_state, batch_operation)."),
    )  # fmt: skip
    type = models.CharField(max_length=20, choices=MemoryType.choices)
    key = models.CharField(max_length=100, null=True, blank=True)
    content = models.CharField(max_length=MAX_CONTENT)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    updated_at = models.DateTimeField(default=timezone.now)
    relevance_score = models.FloatField(default=START_SCORE)
    use_count = models.PositiveIntegerField(default=0)
    ignore_count = models.PositiveIntegerField(default=0)
    mislead_count = models.PositiveIntegerField(default=0)
    confirm_count = models.PositiveIntegerField(default=0)
    recall_count = models.PositiveIntegerField(default=0)
    source_message = models.ForeignKey(Message, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    source_role = models.CharField(max_length=10, blank=True, default="")
    superseded_at = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    embedding = VectorField(dimensions=EMBEDDING_DIM, null=True, blank=True)
    embedding_model = models.CharField(max_length=60, blank=True, default="")
    search_text = models.TextField(blank=True, default="")
    #: Segmented words of the conversation the memory came from (its source message and the one before it),
    #: indexed at a lower weight than its own text: "What did you paint?" / "A sunset over the lake" — the
    #: answer's memory is found by "paint" (docs/memory.md, measured on LoCoMo in bench/RESULTS.md).
    search_context = models.TextField(blank=True, default="", db_default="")
    #: Segmented words of the turns around a conversation unit beyond its own message and the one it answers
    #: (the exchanges before them in the session: the route, venue or day a booking reference was for),
    #: indexed at a third level, for finding only (docs/memory.md, "Found by what it was about").
    search_around = models.TextField(blank=True, default="", db_default="")
    search_vector = SearchVectorField(null=True)

    class Meta(TenantOwned.Meta):
        indexes = [
            # Recall scans one end user's (or one session's) rows exactly; see docs/memory.md.
            models.Index(fields=["tenant", "end_user", "expires_at"], name="mem_scope_user"),
            # The recent window of recall's legs: an end user's newest rows first, the rows no longer valid
            # passed over in the index (docs/memory.md, "Long histories").
            models.Index(fields=["tenant", "end_user", "-created_at", "expires_at"], name="mem_user_window"),
            # Keyed lookups of one end user (the rule stage and the current values behind stale units), past
            # a key's superseded values in the index.
            models.Index(fields=["tenant", "end_user", "key", "expires_at"], name="mem_user_key_valid"),
            models.Index(fields=["session", "expires_at"], name="mem_scope_session"),
            models.Index(fields=["tenant", "expires_at"], name="mem_tenant_expiry"),
            GinIndex(fields=["search_vector"], name="mem_search_vector"),
        ]
        constraints = [
            # One live memory per key and scope: the guard behind the upsert.
            models.UniqueConstraint(
                "tenant",
                "end_user",
                "type",
                "key",
                Coalesce("session", models.Value(_NIL_UUID, output_field=models.UUIDField())),
                condition=models.Q(key__isnull=False, superseded_at__isnull=True),
                name="mem_one_live_per_key",
            ),
            models.CheckConstraint(
                condition=models.Q(relevance_score__gte=MIN_SCORE, relevance_score__lte=MAX_SCORE),
                name="mem_score_range",
            ),
            models.CheckConstraint(condition=models.Q(expires_at__gte=models.F("created_at")), name="mem_expiry_after"),
        ]
        # Without it, an agent sees phone numbers, e-mail and identity numbers masked in the admin (memory/admin.py).
        permissions = [("view_unmasked_memoryunit", "Can view memories' phone numbers, e-mail and IDs unmasked")]

    def __str__(self) -> str:
        # Masked: the admin's titles, breadcrumbs and checkboxes show it to staff who may not see a phone whole.
        return f"[{self.type}] {mask_text(self.content)[:60]}"

    @property
    def expires_in(self) -> int:
        return int((self.expires_at - self.created_at).total_seconds())


class MemoryEvent(TenantOwned):
    """Audit trail: one row per change or use of a memory; outlives the memory."""

    class Kind(models.TextChoices):
        CREATE = "create", _("Create")
        REPLACE = "replace", _("Replace")
        EDIT = "edit", _("Edit")
        USE = "use", _("Use")
        IGNORE = "ignore", _("Ignore")
        MISLEAD = "mislead", _("Mislead")
        CONFIRM = "confirm", _("Confirm")
        EXPIRE = "expire", _("Expire")
        EXTEND = "extend", _("Extend")
        RESTORE = "restore", _("Restore")
        DELETE = "delete", _("Delete")

    class Actor(models.TextChoices):
        # The labels Django derived when the field was made ("Tenant Api"); the English catalogue tidies them.
        SYSTEM = "system", _("System")
        END_USER = "end_user", _("End User")
        TENANT_API = "tenant_api", _("Tenant Api")
        STAFF = "staff", _("Staff")

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    end_user = models.ForeignKey(EndUser, on_delete=models.CASCADE, related_name="+")
    memory_id = models.UUIDField(db_index=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    actor = models.CharField(max_length=12, choices=Actor.choices)
    actor_user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    note = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta(TenantOwned.Meta):
        ordering = ["created_at", "id"]
        # Retention deletes a tenant's events older than M days (memory.store.retention).
        indexes = [models.Index(fields=["tenant", "created_at"], name="memoryevent_by_time")]

    def __str__(self) -> str:
        return f"{self.kind} by {self.actor} at {self.created_at:%Y-%m-%d %H:%M:%S}"


class AmnesiaAlert(TenantOwned):
    """Seed S8: three consecutive turns in a session where neither the rule
    nor the vector stage found anything, and the reply admits it
    (「我不太记得」, "I don't remember", …)."""

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="+")
    message = models.ForeignKey(Message, null=True, on_delete=models.SET_NULL, related_name="+")
    phrase = models.CharField(max_length=100)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta(TenantOwned.Meta):
        indexes = [models.Index(fields=["tenant", "created_at"], name="amnesia_by_tenant")]

    def __str__(self) -> str:
        return f"amnesia in {self.session_id} at {self.created_at:%Y-%m-%d %H:%M}"


class MemoryHealth(TenantOwned):
    """A tenant's memory-health figures (S8) as the worker's periodic job last computed them
    (``memory.tasks``). ``GET /metrics`` reads these rows and never computes or cleans up itself: a scrape
    from any process serves the same figures, and an unauthenticated read writes nothing."""

    tenant = models.OneToOneField(Tenant, primary_key=True, on_delete=models.CASCADE, related_name="+")
    computed_at = models.DateTimeField()
    freshness_ratio = models.FloatField()
    hit_rate = models.FloatField()
    #: Memories meant to be current (not superseded), and those of them valid at ``computed_at``.
    current = models.PositiveIntegerField()
    valid = models.PositiveIntegerField()
    #: Superseded versions kept as history (not counted in freshness).
    superseded = models.PositiveIntegerField()
    amnesia_alerts = models.PositiveIntegerField()
    status = models.CharField(max_length=10)

    def __str__(self) -> str:
        return f"{self.tenant_id}: {self.status} at {self.computed_at:%Y-%m-%d %H:%M}"
