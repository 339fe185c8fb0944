"""Tenants, their staff, API keys and end users."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from tenants.scoping import TenantOwned

API_KEY_PREFIX = "mdk_live_"


def _new_signing_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


class Tenant(models.Model):
    """A customer of memdesk. Not itself tenant-scoped: it is the scope."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    slug = models.SlugField(
        max_length=50,
        unique=True,
        validators=[RegexValidator(r"^[a-z0-9][a-z0-9-]*$", "lowercase letters, digits and dashes")],
    )
    name = models.CharField(max_length=200)
    agent_role = models.TextField(
        blank=True,
        default="",
        help_text=_("Role text for the agent's system prompt; empty uses memdesk's default role."),
    )
    allowed_origins = models.JSONField(
        default=list,
        blank=True,
        help_text=_('Origins allowed to embed the chat widget, e.g. ["https://shop.example.com"].'),
    )
    language = models.CharField(max_length=10, default="zh", choices=[("zh", "中文"), ("en", "English")])
    settings = models.JSONField(default=dict, blank=True)
    signing_secret = models.CharField(max_length=100, default=_new_signing_secret, editable=False)
    send_legacy_signature = models.BooleanField(
        default=True,
        help_text=_(
            "Also send the body-only X-Memdesk-Signature header on tool calls. Turn it off once your back end "
            "checks X-Memdesk-Signature-V2, which carries a timestamp and so cannot be replayed."
        ),
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_cleanup_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text=_("When the automatic memory cleanup last ran.")
    )

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner", _("Owner")
        ADMIN = "admin", _("Admin")
        AGENT = "agent", _("Agent")

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.AGENT)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    #: When the staff member's console last said they are online (handoff: "nobody online" after a wait).
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "tenant"], name="uniq_membership")]

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant} ({self.role})"


def hash_api_key(plain: str) -> str:
    """HMAC-SHA256 of the key with SECRET_KEY: the plain key is never stored."""
    return hmac.new(settings.SECRET_KEY.encode(), plain.encode(), hashlib.sha256).hexdigest()


class ApiKey(TenantOwned):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, default="default")
    prefix = models.CharField(max_length=24, editable=False, db_index=True)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @classmethod
    def issue(cls, tenant: Tenant, name: str = "default") -> tuple[ApiKey, str]:
        """Create a key; returns the row and the plain key, shown once."""
        key = cls(tenant=tenant, name=name)
        plain = key.new_secret()
        key.save(force_insert=True)
        return key, plain

    def new_secret(self) -> str:
        """The one place keys are made: a fresh secret for this key, its visible ``prefix`` and its HMAC set
        (nothing saved). Returns the plain key, to be shown once; only its HMAC is stored."""
        plain = API_KEY_PREFIX + secrets.token_urlsafe(32)
        self.prefix = plain[: len(API_KEY_PREFIX) + 6]
        self.key_hash = hash_api_key(plain)
        return plain

    @classmethod
    def authenticate(cls, plain: str) -> ApiKey | None:
        """The live key matching ``plain``; the lookup is by HMAC, then
        compared in constant time."""
        if not plain.startswith(API_KEY_PREFIX):
            return None
        digest = hash_api_key(plain)
        key = (
            cls.objects.unscoped(reason="authentication: the key names its tenant")
            .select_related("tenant")
            .filter(key_hash=digest, revoked_at__isnull=True)
            .first()
        )
        if key is None or not hmac.compare_digest(key.key_hash, digest):
            return None
        return key


class EndUser(TenantOwned):
    """A tenant's customer, known by the tenant's own id for them."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="end_users")
    external_id = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    memory_enabled = models.BooleanField(
        default=True,
        help_text=_(
            'The end user\'s own switch (tenant setting end_user_memory = "end_user_choice"): when off, nothing '
            "new is remembered about them and recall returns nothing."
        ),
    )

    class Meta(TenantOwned.Meta):
        constraints = [models.UniqueConstraint(fields=["tenant", "external_id"], name="uniq_end_user")]

    def __str__(self) -> str:
        return self.external_id


def end_user_digest(tenant: Tenant, external_id: str) -> str:
    """A keyed, one-way digest of a tenant's id for an end user: lets the erasure record answer "was this person
    erased, when, by whom" without keeping the id itself."""
    plain = f"{tenant.pk}:{external_id}"
    return hmac.new(settings.SECRET_KEY.encode(), plain.encode(), hashlib.sha256).hexdigest()


class Erasure(TenantOwned):
    """Tombstone of an end user's erasure: who asked, when, and how many rows of each kind went. No content and no
    id in clear: ``end_user_digest`` is :func:`end_user_digest` of the tenant's id for them."""

    class Actor(models.TextChoices):
        TENANT_API = "tenant_api"
        STAFF = "staff"
        OPERATOR = "operator"
        RETENTION = "retention"

    id = models.BigAutoField(primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    end_user_digest = models.CharField(max_length=64, db_index=True)
    actor = models.CharField(max_length=12, choices=Actor.choices)
    actor_user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    counts = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta(TenantOwned.Meta):
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"erasure by {self.actor} at {self.created_at:%Y-%m-%d %H:%M:%S}"
