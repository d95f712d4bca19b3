"""The `todo` tool: the model keeps its plan, and the reminder shows it at every request.

`todo(items)` replaces the whole plan; each item has a text and a status (`pending`,
`in_progress`, `done`). An empty list clears the plan. The plan lives on the session (`Plan`); it
is never stored on its own: a resumed session rebuilds it from the last valid `todo` call of its
history (`Plan.from_history`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lsp_agent.errors import ToolError

TodoStatus = Literal["pending", "in_progress", "done"]

STATUSES: tuple[TodoStatus, ...] = ("pending", "in_progress", "done")
"""The statuses an item may have, in the order a plan moves through them."""

MAX_ITEMS = 50
"""Longest plan: more is a backlog, not a plan, and it would crowd every request."""

MAX_TEXT = 300
"""Longest item text, in characters."""

_MARKS: dict[TodoStatus, str] = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}

# Words models use for the three statuses; anything else is refused with the list.
_SYNONYMS: dict[str, TodoStatus] = {
    "pending": "pending",
    "todo": "pending",
    "not_started": "pending",
    "in_progress": "in_progress",
    "in-progress": "in_progress",
    "inprogress": "in_progress",
    "active": "in_progress",
    "doing": "in_progress",
    "done": "done",
    "complete": "done",
    "completed": "done",
    "finished": "done",
}

_EXAMPLE = (
    '{"items": [{"text": "Reproduce the bug with a test", "status": "done"}, '
    '{"text": "Fix the parser", "status": "in_progress"}, '
    '{"text": "Run the whole test suite", "status": "pending"}]}'
)

TODO_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "todo",
        "description": (
            "Write your plan for a task of several steps: the list replaces the previous plan "
            "(send every item each time, with its status). Keep one item in_progress and mark "
            "items done as you finish them. The plan is shown to you at every step. An empty "
            "list clears it."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "description": "The whole plan, in order.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "text": {"type": "string", "description": "One step, briefly."},
                            "status": {"type": "string", "enum": list(STATUSES)},
                        },
                        "required": ["text", "status"],
                    },
                }
            },
            "required": ["items"],
        },
    },
}
"""The tool's definition in the OpenAI `tools` format."""


@dataclass(frozen=True)
class TodoItem:
    """One step of the plan."""

    text: str
    status: TodoStatus


@dataclass
class Plan:
    """The session's current plan."""

    items: tuple[TodoItem, ...] = ()

    def replace(self, arguments: Mapping[str, Any]) -> str:
        """Run the tool: take the new plan from the call's arguments; the result for the model.

        Raises `ToolError` saying what to send instead when the items are not a valid plan; the
        plan is then unchanged.
        """
        if "items" not in arguments:
            raise ToolError(
                f"todo needs `items`, the whole plan as a list; for example {_EXAMPLE}",
                reason="bad_arguments",
            )
        self.items = parse_items(arguments["items"])
        if not self.items:
            return "The plan is cleared."
        return "Plan updated:\n" + render_plan(self.items)

    @classmethod
    def from_history(cls, history: Sequence[Mapping[str, Any]]) -> Plan:
        """The plan a stored history leaves: its last valid `todo` call, or an empty plan."""
        for message in reversed(history):
            if message.get("role") != "assistant":
                continue
            for call in reversed(message.get("tool_calls") or []):
                function = call.get("function") if isinstance(call, Mapping) else None
                if not isinstance(function, Mapping) or function.get("name") != "todo":
                    continue
                try:
                    arguments = json.loads(str(function.get("arguments") or "{}"))
                    if isinstance(arguments, Mapping):
                        return cls(parse_items(arguments.get("items")))
                except (ValueError, ToolError):
                    continue
        return cls()


def parse_items(raw: object) -> tuple[TodoItem, ...]:
    """Check the `items` argument; `ToolError` with guidance when it is not a valid plan."""
    if isinstance(raw, str):
        # Some models send the list as a JSON string inside the JSON arguments.
        try:
            raw = json.loads(raw)
        except ValueError:
            raise _error("items must be a list of {text, status} objects, not text") from None
    if not isinstance(raw, list):
        raise _error(f"items must be a list of {{text, status}} objects, not {_kind(raw)}")
    if len(raw) > MAX_ITEMS:
        raise _error(
            f"the plan has {len(raw)} items; keep it to {MAX_ITEMS} or fewer by grouping steps"
        )
    items: list[TodoItem] = []
    seen: set[str] = set()
    for number, entry in enumerate(raw, start=1):
        if not isinstance(entry, Mapping):
            raise _error(f"item {number} must be an object {{text, status}}, not {_kind(entry)}")
        text = entry.get("text")
        if not isinstance(text, str) or not text.strip():
            raise _error(f"item {number} needs a non-empty `text`")
        text = " ".join(text.split())
        if len(text) > MAX_TEXT:
            raise _error(f"item {number} is {len(text)} chars long; keep each under {MAX_TEXT}")
        status = _status(entry.get("status"), number)
        if text.casefold() in seen:
            raise _error(f"item {number} repeats an earlier item ({text!r}): list each step once")
        seen.add(text.casefold())
        items.append(TodoItem(text, status))
    return tuple(items)


def render_plan(items: Sequence[TodoItem]) -> str:
    """The plan as lines: `[x]` done, `[~]` in progress, `[ ]` pending."""
    return "\n".join(f"{_MARKS[item.status]} {item.text}" for item in items)


def _status(raw: object, number: int) -> TodoStatus:
    if isinstance(raw, str):
        key = raw.strip().lower().replace(" ", "_")
        if key in _SYNONYMS:
            return _SYNONYMS[key]
    allowed = ", ".join(STATUSES)
    shown = "missing" if raw is None else repr(raw)
    raise _error(f"item {number} has status {shown}: use one of {allowed}")


def _error(problem: str) -> ToolError:
    return ToolError(
        f"todo: {problem}. Send the whole plan again, for example {_EXAMPLE}",
        reason="bad_arguments",
    )


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
