"""The chat runtime's own records: a session's execution context, the tenant's tools and batches."""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from conversations.models import ChatSession
from tenants.models import Tenant
from tenants.scoping import TenantOwned


class ExecutionContext(TenantOwned):
    """The runtime's structured execution context of one session (seed S1).

    Never chat text: it enters the prompt only as JSON inside
    ``<|execution_context|>``. ``version`` makes every update a
    compare-and-set, so two turns of one session cannot interleave (S16).
    """

    session = models.OneToOneField(ChatSession, on_delete=models.CASCADE, primary_key=True, related_name="context")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    current_tool = models.CharField(max_length=100, null=True, blank=True)
    tool_args = models.JSONField(null=True, blank=True)
    last_tool_result = models.JSONField(null=True, blank=True)
    session_variables = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"context of {self.session_id}"

    def as_dict(self) -> dict:
        return {
            "current_tool": self.current_tool,
            "tool_args": self.tool_args,
            "last_tool_result": self.last_tool_result,
            "session_variables": self.session_variables,
        }


class Tool(TenantOwned):
    """An action a tenant's agent may take (API.md "Tools"): the model calls it
    by ``name`` with arguments valid against ``parameters`` (a JSON Schema
    object), and memdesk POSTs the call, signed, to the tenant's ``url``."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=64)
    description = models.TextField()
    parameters = models.JSONField(default=dict)
    url = models.URLField(max_length=2000)
    timeout_s = models.PositiveSmallIntegerField(default=10)
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta(TenantOwned.Meta):
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="uniq_tool_name")]

    def __str__(self) -> str:
        return self.name


class Batch(TenantOwned):
    """A batch operation (seed S12): one tool called once per item, one item
    at a time, by the background worker.

    ``next_index`` is the checkpoint: items before it are finished (succeeded
    or failed) and are never called again. It moves forward in the same
    transaction that updates the counters and the session's
    ``batch_operation`` memory, so a worker killed at any point resumes at
    the first unfinished item.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        RUNNING = "running", _("Running")
        DONE = "done", _("Done")

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="batches")
    tool_name = models.CharField(max_length=64)
    items = models.JSONField(default=list)
    total = models.PositiveIntegerField()
    next_index = models.PositiveIntegerField(default=0)
    completed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    last_success_id = models.JSONField(null=True, blank=True)
    failures = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    job_id = models.BigIntegerField(null=True, blank=True, help_text=_("The procrastinate job running this batch."))
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta(TenantOwned.Meta):
        indexes = [models.Index(fields=["session", "-created_at"], name="batch_by_session")]

    def __str__(self) -> str:
        return f"batch {self.pk} ({self.tool_name}, {self.next_index}/{self.total})"
