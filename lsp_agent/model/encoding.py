"""Request bodies as they go on the wire."""

from __future__ import annotations

import json
from typing import Any


def outgoing(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as sent: an assistant's null content becomes "" (llama-cpp-python 500s)."""
    return [
        {**message, "content": ""}
        if message.get("role") == "assistant" and message.get("content") is None
        else message
        for message in messages
    ]


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
