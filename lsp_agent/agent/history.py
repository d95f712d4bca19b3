"""A session's conversation as a UI shows it, read back from its transcript (`lspAgent.history`).

The transcript keeps everything (messages, and events the turn recorded as it went); this turns it
into displayable items, in order, so that a chat view can show a past session after any restart:

- `prompt` (`text`, `selection?`, `mode?`: `ask` for a question asked in ask mode), `answer`
  (`text`: the model's Markdown), `tool` (`name`, `args`, `ok`, `summary`, `result`: the text the
  model got, shortened; `hunks` for an applied edit: what became of each hunk, as the
  `toolResult` event says), `question` (`name`, `text`, `answer`, `state`), `edit` (`path`,
  `applied`, and for an applied one `undoable`), `compaction` (`strategy`, `before`, `after`),
  `undo` (`turn`, `files`, `turns?` for a rewind), `rewind` (`to`: the turn whose prompt the
  conversation went back to, `turns`: the turns it went back over, `prompt`), `usage`
  (`inputTokens`, `cachedTokens`, `outputTokens`, `calls`: what the turn's model calls used,
  summed; just before the turn's `status`), `status` (`status`, `error?`).

Every item carries the `turn` it belongs to; the items of a turn a rewind went back over carry
`rewound: true` as well (the model no longer sees them; the user still can). Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

RESULT_CHARS = 4000
"""How much of a tool's result an item carries (the transcript keeps it whole)."""


def conversation(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The displayable items of a session, from its transcript records."""
    items: list[dict[str, Any]] = []
    prompted: set[int] = set()
    tools: dict[str, dict[str, Any]] = {}
    used: dict[int, dict[str, Any]] = {}
    for record in records:
        kind, turn = record.get("type"), record.get("turn", 0)
        if kind == "message":
            _message(record, turn, items, prompted, tools)
        elif kind == "event" and record.get("kind") == "usage":
            # Older transcripts did not say the turn: it is the last one prompted.
            _add_usage(used, record.get("turn", max(prompted, default=0)), record)
        elif kind == "event":
            _event(record, turn, items, prompted, tools)
        elif kind == "turn":
            if turn in used:
                items.append(used.pop(turn))
            status = {"type": "status", "turn": turn, "status": record.get("status")}
            if record.get("error"):
                status["error"] = record["error"]
            items.append(status)
    items.extend(used.values())  # a turn still running
    return items


def _add_usage(used: dict[int, dict[str, Any]], turn: int, record: Mapping[str, Any]) -> None:
    item = used.setdefault(
        turn,
        {
            "type": "usage",
            "turn": turn,
            "inputTokens": 0,
            "cachedTokens": 0,
            "outputTokens": 0,
            "calls": 0,
        },
    )
    item["inputTokens"] += _count(record.get("prompt_tokens"))
    item["cachedTokens"] += _count(record.get("cached_tokens"))
    item["outputTokens"] += _count(record.get("completion_tokens"))
    item["calls"] += 1


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _message(
    record: Mapping[str, Any],
    turn: int,
    items: list[dict[str, Any]],
    prompted: set[int],
    tools: dict[str, dict[str, Any]],
) -> None:
    message = record.get("message")
    if not isinstance(message, Mapping):
        return
    role, content = message.get("role"), message.get("content")
    if role == "user" and isinstance(content, str) and turn not in prompted:
        # A transcript written before prompts were recorded: the user message is the prompt.
        prompted.add(turn)
        items.append({"type": "prompt", "turn": turn, "text": content})
    elif role == "assistant":
        if isinstance(content, str) and content.strip():
            items.append({"type": "answer", "turn": turn, "text": content})
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, Mapping) else {}
            item = {
                "type": "tool",
                "turn": turn,
                "id": call.get("id"),
                "name": function.get("name"),
                "args": _arguments(function.get("arguments")),
            }
            tools[str(call.get("id"))] = item
            items.append(item)
    elif role == "tool":
        called = tools.get(str(message.get("tool_call_id")))
        if called is not None and isinstance(content, str):
            called["result"] = content[:RESULT_CHARS]


def _event(
    record: Mapping[str, Any],
    turn: int,
    items: list[dict[str, Any]],
    prompted: set[int],
    tools: dict[str, dict[str, Any]],
) -> None:
    kind = record.get("kind")
    if kind == "prompt":
        prompted.add(turn)
        item = {"type": "prompt", "turn": turn, "text": record.get("prompt", "")}
        if record.get("selection"):
            item["selection"] = record["selection"]
        if record.get("mode"):
            item["mode"] = record["mode"]
        items.append(item)
    elif kind == "tool":
        called = tools.get(str(record.get("id")))
        if called is not None:
            called.update(ok=record.get("ok"), summary=record.get("summary"))
            if record.get("permission"):
                called["permission"] = record["permission"]
            if record.get("hunks"):
                called["hunks"] = record["hunks"]
    elif kind == "codebase":
        # `#codebase`: the search made before the first model call, shown as the search it is.
        items.append(
            {
                "type": "tool",
                "turn": turn,
                "name": "search",
                "args": {"codebase": True, "terms": record.get("terms", [])},
                "ok": record.get("ok"),
                "summary": record.get("summary"),
                "result": record.get("result", ""),
            }
        )
    elif kind == "applied":
        items.append(
            {
                "type": "edit",
                "turn": turn,
                "path": record.get("path"),
                "applied": True,
                "undoable": record.get("before") is not None or record.get("after") is not None,
            }
        )
    elif kind == "question" and record.get("state") != "open":
        items.append(
            {
                "type": "question",
                "turn": turn,
                "name": record.get("name"),
                "text": record.get("text"),
                "state": record.get("state"),
                "answer": record.get("answer"),
            }
        )
    elif kind == "compaction":
        items.append(
            {
                "type": "compaction",
                "turn": turn,
                "strategy": record.get("strategy"),
                "before": record.get("before"),
                "after": record.get("after"),
            }
        )
    elif kind == "undo":
        item = {
            "type": "undo",
            "turn": turn,
            "undid": record.get("undid"),
            "files": record.get("files"),
        }
        if record.get("turns"):
            item["turns"] = record["turns"]  # a rewind: every turn it undid
        items.append(item)
    elif kind == "rewind" and isinstance(record.get("to"), int):
        _rewind(record, turn, items)


def _rewind(record: Mapping[str, Any], turn: int, items: list[dict[str, Any]]) -> None:
    """Mark what the conversation went back over; the rewind itself is an item too."""
    for earlier in items:
        # What the files went through stays a fact: only the conversation went back.
        if earlier["turn"] >= record["to"] and earlier["type"] not in ("undo", "rewind"):
            earlier["rewound"] = True
    items.append(
        {
            "type": "rewind",
            "turn": turn,
            "to": record["to"],
            "turns": record.get("turns") or [],
            "prompt": record.get("prompt") or "",
        }
    )


def _arguments(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw
