"""Tool calls that small local models write as plain text instead of `tool_calls`.

Many local models (Qwen2.5-Coder-0.5B on llama.cpp, measured) answer with a JSON object that names
a tool and its arguments: bare, in a fenced code block, or inside `<tool_call>…</tool_call>` tags.
`text_tool_call` turns such a reply into a `ToolCall` when it is exactly one object, in one of the
common shapes, naming a known tool with arguments that validate against the tool's JSON schema;
anything else (prose around it, two objects, unknown tool, wrong argument types) stays text.
`looks_like_tool_call` recognises broken imitations, for the model capability check.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from lsp_agent.messages import ToolCall

_THINK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)
_TAGGED = re.compile(
    r"^<(tool_call|function_call)>\s*(.*?)\s*(?:</\1>)?$",
    re.DOTALL,
)
_FENCED = re.compile(r"^```[A-Za-z0-9_+-]*[ \t]*\n(.*?)\n?```$", re.DOTALL)
_SHAPES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("name", ("arguments", "parameters", "args", "input")),
    ("tool", ("args", "arguments", "parameters", "input")),
    ("tool_name", ("tool_input", "arguments", "args", "input", "parameters")),
    ("function", ("arguments", "args", "parameters")),
)
"""(key holding the tool's name, keys that may hold its arguments), in the order tried."""
_IGNORED_KEYS = frozenset({"id", "type"})
_MAX_TEXT = 200_000


def text_tool_call(
    text: str, schemas: Sequence[Mapping[str, Any]], *, call_id: str
) -> ToolCall | None:
    """The tool call `text` consists of, or None when it is not exactly one valid call.

    `schemas` are the request's tools in OpenAI function format; `call_id` becomes the call's
    id (the caller makes it unique in the session). The arguments are re-serialised as JSON.
    """
    tools = _parameters_by_name(schemas)
    if not tools or len(text) > _MAX_TEXT:
        return None
    payload = _unwrap(text)
    if payload is None:
        return None
    try:
        value: Any = json.loads(payload)
    except (json.JSONDecodeError, RecursionError):
        return None
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, dict):
        return None
    if set(value) - _IGNORED_KEYS == {"tool_calls"}:
        calls = value["tool_calls"]
        if not (isinstance(calls, list) and len(calls) == 1 and isinstance(calls[0], dict)):
            return None
        value = calls[0]
    shape = _name_and_arguments(value, tools)
    if shape is None:
        return None
    name, arguments = shape
    if name not in tools or not _valid_object(arguments, tools[name]):
        return None
    return ToolCall(call_id, name, json.dumps(arguments, ensure_ascii=False))


def looks_like_tool_call(text: str, names: Sequence[str]) -> bool:
    """Whether `text` imitates a tool call (tags, or JSON naming a tool) without being one.

    Meant for replies `text_tool_call` rejected: a model that keeps writing these cannot call
    tools, and the turn should say so instead of going in circles.
    """
    if re.search(r"<\s*/?\s*(tool_call|function_call)\b", text):
        return True
    if not names:
        return False
    known = "|".join(re.escape(name) for name in names)
    return bool(
        re.search(rf'"(?:name|tool|tool_name|function)"\s*:\s*"(?:{known})"', text)
        or re.search(rf'\{{\s*"(?:{known})"\s*:\s*\{{', text)
    )


def _parameters_by_name(schemas: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    tools: dict[str, Mapping[str, Any]] = {}
    for schema in schemas:
        function = schema.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            parameters = function.get("parameters")
            tools[function["name"]] = parameters if isinstance(parameters, Mapping) else {}
    return tools


def _unwrap(text: str) -> str | None:
    """The JSON text inside the reply's wrappers (think block, tags, fence), or None."""
    body = _THINK.sub("", text, count=1).strip()
    for _ in range(3):
        tagged = _TAGGED.match(body)
        if tagged:
            body = tagged.group(2).strip()
            continue
        fenced = _FENCED.match(body)
        if fenced:
            body = fenced.group(1).strip()
            continue
        break
    if not body.startswith(("{", "[")):
        return None
    return body


def _name_and_arguments(
    value: Mapping[str, Any], tools: Mapping[str, Any]
) -> tuple[str, dict[str, Any]] | None:
    """The tool name and argument object in one of the common shapes; None if none fits."""
    function = value.get("function")
    if isinstance(function, Mapping) and set(value) - _IGNORED_KEYS == {"function"}:
        return _name_and_arguments(function, tools)
    for name_key, argument_keys in _SHAPES:
        name = value.get(name_key)
        if not isinstance(name, str):
            continue
        if set(value) - {name_key, *argument_keys, *_IGNORED_KEYS}:
            return None
        present = [key for key in argument_keys if key in value]
        if len(present) > 1:
            return None
        arguments = _object(value[present[0]]) if present else {}
        return None if arguments is None else (name.strip(), arguments)
    if len(value) == 1:
        ((name, arguments),) = value.items()
        if name in tools and isinstance(arguments, dict):
            return name, arguments
    return None


def _object(value: Any) -> dict[str, Any] | None:
    """Arguments as an object: a JSON object, or a string holding one (OpenAI's shape)."""
    if value is None:
        return {}
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def _valid_object(value: Any, schema: Mapping[str, Any]) -> bool:
    """Whether `value` satisfies an object schema: required keys, property types, extras."""
    if not isinstance(value, dict):
        return False
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required") or ()
    if any(key not in value for key in required):
        return False
    for key, item in value.items():
        if key in properties:
            if not _valid(item, properties[key]):
                return False
        elif schema.get("additionalProperties") is False:
            return False
    return True


def _valid(value: Any, schema: Any) -> bool:
    """A small JSON Schema check: `type` (one or a list), `enum`, `items`, nested objects."""
    if not isinstance(schema, Mapping):
        return True
    if "enum" in schema and value not in schema["enum"]:
        return False
    kinds = schema.get("type")
    if kinds is None:
        return True
    if isinstance(kinds, str):
        kinds = [kinds]
    for kind in kinds:
        if kind == "object" and isinstance(value, dict):
            return _valid_object(value, schema)
        if kind == "array" and isinstance(value, list):
            return all(_valid(item, schema.get("items")) for item in value)
        if _scalar_kind(value, kind):
            return True
    return False


def _scalar_kind(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "null":
        return value is None
    return False
