"""Tenant tools: the registry (API.md "Tools"): a tool's name, schema, URL and timeout checked; register, list,
get, delete; a tool as the model is offered it. The signed call to the tenant's URL is ``chat.tools.call``.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlparse

from django.db import IntegrityError, transaction
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from chat.models import Tool
from config.errors import ApiError, NotFound
from tenants.models import Tenant
from tenants.rls import tenant_scope

NAME_RE = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")
MIN_TIMEOUT_S, MAX_TIMEOUT_S, DEFAULT_TIMEOUT_S = 1, 60, 10
#: A schema this big is a mistake, and every turn sends it to the model.
MAX_SCHEMA_BYTES = 16 * 1024


class ToolNotFound(NotFound):
    code = "tool_not_found"


class ToolExists(ApiError):
    status = 409
    code = "tool_exists"


# --- validation ------------------------------------------------------------------


def check_name(value: Any) -> str | None:
    """The problem with a tool name, or None."""
    if not isinstance(value, str) or not NAME_RE.match(value):
        return "name must match ^[a-zA-Z_][a-zA-Z0-9_]{0,63}$ (a letter or _, then up to 63 letters, digits or _)"
    return None


def check_parameters(value: Any) -> str | None:
    """The problem with a tool's ``parameters``, or None: it must be a valid
    JSON Schema (draft 2020-12) describing an object, as Ollama's function
    calling expects."""
    if not isinstance(value, dict):
        return "parameters must be a JSON Schema object"
    if len(json.dumps(value, ensure_ascii=False).encode()) > MAX_SCHEMA_BYTES:
        return f"parameters must be at most {MAX_SCHEMA_BYTES} bytes of JSON"
    try:
        Draft202012Validator.check_schema(value)
    except SchemaError as exc:
        path = "/".join(str(p) for p in exc.path) or "(root)"
        return f"parameters is not a valid JSON Schema at {path}: {exc.message}"
    if value.get("type") != "object":
        return 'parameters must describe the arguments object: {"type": "object", "properties": {...}}'
    return None


def check_url(value: Any) -> str | None:
    """The problem with a tool's URL, or None: absolute http(s), a host, a
    port from 1 to 65535, no whitespace or control characters. ``urlparse``
    raises on some malformed URLs (an unclosed ``[`` IPv6 host, a port out of
    range), so those are caught here rather than at the first call."""
    if not isinstance(value, str) or len(value) > 2000:
        return "url must be a string of at most 2000 characters"
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        return "url must not contain whitespace or control characters"
    try:
        parsed = urlparse(value)
        port = parsed.port
    except ValueError as exc:
        return f"url is malformed ({exc})"
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return "url must be an absolute http:// or https:// URL"
    if port == 0:
        return "url port must be from 1 to 65535"
    return None


def check_timeout(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_TIMEOUT_S <= value <= MAX_TIMEOUT_S:
        return f"timeout_s must be a whole number of seconds from {MIN_TIMEOUT_S} to {MAX_TIMEOUT_S}"
    return None


def validate_arguments(schema: dict[str, Any], arguments: Any) -> str | None:
    """The first reason ``arguments`` do not satisfy ``schema``, or None."""
    try:
        error = next(iter(Draft202012Validator(schema).iter_errors(arguments)), None)
    except Exception as exc:  # noqa: BLE001 - an unresolvable $ref and the like: the schema cannot vouch for them
        return f"the arguments cannot be checked against the tool's schema: {type(exc).__name__}"
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


# --- the registry ----------------------------------------------------------------


def do_register_tool(
    tenant: Tenant, *, name: str, description: str, parameters: dict[str, Any], url: str, timeout_s: int
) -> Tool:
    """Register a tool (input already checked by the view's serializer).
    A second tool with the same name → 409 ``tool_exists``."""
    with tenant_scope(tenant):
        tools = Tool.objects.for_tenant(tenant)
        if tools.filter(name=name).exists():
            raise ToolExists(f"A tool named {name!r} already exists; delete it first to replace it.")
        try:
            with transaction.atomic():
                return tools.create(
                    tenant=tenant, name=name, description=description, parameters=parameters, url=url,
                    timeout_s=timeout_s,
                )  # fmt: skip
        except IntegrityError:  # a concurrent registration of the same name won
            raise ToolExists(f"A tool named {name!r} already exists; delete it first to replace it.") from None


def list_tools(tenant: Tenant) -> list[Tool]:
    with tenant_scope(tenant):
        return list(Tool.objects.for_tenant(tenant).order_by("name"))


def get_tool(tenant: Tenant, name: str) -> Tool | None:
    with tenant_scope(tenant):
        return Tool.objects.for_tenant(tenant).filter(name=name).first()


def do_delete_tool(tenant: Tenant, name: str) -> None:
    with tenant_scope(tenant):
        deleted, _ = Tool.objects.for_tenant(tenant).filter(name=name).delete()
    if not deleted:
        raise ToolNotFound(f"No tool named {name!r}.")


def serialize_tool(tool: Tool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "url": tool.url,
        "timeout_s": tool.timeout_s,
        "created_at": tool.created_at.isoformat().replace("+00:00", "Z"),
    }


def ollama_tools(tools: list[Tool]) -> list[dict[str, Any]]:
    """The ``tools`` field of an Ollama chat request. The URL and timeout are
    memdesk's business, never the model's."""
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


# --- the call --------------------------------------------------------------------
