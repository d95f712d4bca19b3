"""What an MCP tool answered, as text for the model.

Text blocks pass as they are, and so does the text of an embedded text resource (after a line
saying which resource it is). Images, audio and binary resources are described — their type and
size — never pasted: base64 is not something the model can read, and it would fill the window.
Links to resources are listed. Structured content is shown as JSON when no text block says the
same. The whole goes through the session's spill files like command output (`context.cap`):
the model sees the head and the tail, the rest waits in a file, at most `MAX_SPILL_BYTES` of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import mcp.types as types

from lsp_agent.context.cap import Excerpt, Spills

FEED_CHARS = 1024 * 1024
"""The spill stream takes text in parts of this size (a 50 MB answer is never encoded whole)."""


def pieces(result: types.CallToolResult) -> Iterator[str]:
    """The answer's text, block by block."""
    said = False
    for block in result.content:
        if isinstance(block, types.TextContent):
            said = True
            yield block.text
        elif isinstance(block, types.ImageContent | types.AudioContent):
            kind = "image" if isinstance(block, types.ImageContent) else "audio"
            yield (
                f"[{kind}: {block.mime_type}, {_size(_decoded_bytes(block.data))}; not shown: "
                "lsp-agent passes on text only]"
            )
        elif isinstance(block, types.ResourceLink):
            yield (
                "[resource link: "
                + _resource(block.uri, block.mime_type, block.size)
                + (f", {block.name!r}" + (f": {block.description}" if block.description else ""))
                + "]"
            )
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                said = True
                where = _resource(resource.uri, resource.mime_type, None)
                yield f"[resource {where}, {len(resource.text):,} characters:]\n{resource.text}"
            else:
                size = _decoded_bytes(resource.blob)
                where = _resource(resource.uri, resource.mime_type, size)
                yield f"[resource {where}: binary; not shown: lsp-agent passes on text only]"
        else:
            yield f"[a content block of type {getattr(block, 'type', '?')!r}, not shown]"
    if not said and result.structured_content is not None:
        yield json.dumps(result.structured_content, ensure_ascii=False, indent=1)
    elif not result.content and result.structured_content is None:
        yield "(the tool answered with nothing)"


def spill(result: types.CallToolResult, spills: Spills, limit: int, name: str) -> Excerpt:
    """The answer capped like command output: whole when it fits in `limit`, else its head and
    tail with the rest in a spill file. Writes files: call it off the event loop."""
    stream = spills.stream(limit, name)
    try:
        first = True
        for text in pieces(result):
            if not first:
                stream.feed(b"\n")
            first = False
            for start in range(0, len(text), FEED_CHARS):
                stream.feed(text[start : start + FEED_CHARS].encode("utf-8", "replace"))
    except BaseException:
        stream.close()
        raise
    return stream.finish()


def _resource(uri: str, mime_type: str | None, size: int | None) -> str:
    details = [part for part in (mime_type, _size(size) if size is not None else None) if part]
    return f"<{uri}>" + (f" ({', '.join(details)})" if details else "")


def _decoded_bytes(data: Any) -> int:
    """The size of base64 data once decoded, without decoding it."""
    text = data if isinstance(data, str) else ""
    return max(len(text) * 3 // 4 - text.count("=", max(len(text) - 2, 0)), 0)


def _size(count: int) -> str:
    if count < 1024:
        return f"{count} bytes"
    if count < 1024 * 1024:
        return f"{count / 1024:.1f} KB"
    return f"{count / (1024 * 1024):.1f} MB"
