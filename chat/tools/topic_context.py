"""The execution context on a topic switch (S10): a tool call belongs to the topic it was made in.

「只冻结订单相关记忆，同时激活推荐模块的上下文」: when the user leaves a topic, the tool call in the execution
context (``current_tool``, ``tool_args``, ``last_tool_result``; typically an unfinished one, waiting for the
user) is saved with the frozen topic (``memory.topics.freeze.attach_tool_context``) and cleared from the live
context, so the new topic's prompt does not carry it. On a return to that topic it comes back. Session variables
are the session's, not a topic's: they stay. Each change bumps ``version`` like a tool call (chat/tools/context.py).
"""

from __future__ import annotations

from django.utils import timezone

from chat.models import ExecutionContext
from conversations.access import require_session_id
from conversations.models import ChatSession
from memory.topics import TopicSwitch, attach_tool_context
from tenants.models import Tenant
from tenants.rls import tenant_scope

TOOL_FIELDS = ("current_tool", "tool_args", "last_tool_result")


@require_session_id
def do_switch_tool_context(tenant: Tenant, session: ChatSession, switch: TopicSwitch) -> ExecutionContext:
    """Freeze the live tool call with the topic ``switch`` left, restore the returning topic's (if any), and
    return the context as written."""
    with tenant_scope(tenant):
        contexts = ExecutionContext.objects.for_tenant(tenant)
        contexts.get_or_create(session=session, defaults={"tenant": tenant})
        context = contexts.select_for_update().get(session=session)
        live = {name: getattr(context, name) for name in TOOL_FIELDS}
        if live["current_tool"] and switch.frozen_as:
            attach_tool_context(tenant, session, switch.frozen_as, live)
        restored = switch.tool_context or {}
        changed = False
        for name in TOOL_FIELDS:
            value = restored.get(name)
            if getattr(context, name) != value:
                setattr(context, name, value)
                changed = True
        if changed:
            context.version += 1
            context.updated_at = timezone.now()
            context.save(update_fields=[*TOOL_FIELDS, "version", "updated_at"])
    return context
