"""Marking outside text (README, Safety): file contents, command output and search hits.

Such text is wrapped `<untrusted source="…">…</untrusted>` before the model reads it, and the
system prompt says that what is inside is data, never instructions. A closing tag inside the text
is removed, so the text cannot end the wrapper early and pass off what follows as ours. This is a
hint to the model, not a wall: the permissions and the sandbox are what hold.
"""

from __future__ import annotations

import re

TAG = "untrusted"

# Any spelling that a lenient reader could take for the closing tag: `</untrusted>`,
# `</UNTRUSTED >`, `< / untrusted` (cut before its `>` at the end of a chunk).
_CLOSING = re.compile(r"<\s*/\s*untrusted\b[^>]*>?", re.IGNORECASE)


def neutralise(text: str) -> str:
    """`text` with every closing `untrusted` tag removed (repeatedly: removal can join one)."""
    while True:
        cleaned = _CLOSING.sub("", text)
        if cleaned == text:
            return cleaned
        text = cleaned


def mark_untrusted(text: str, source: str) -> str:
    """`text` wrapped as outside data from `source` (e.g. `read_file src/app.py`, `bash`)."""
    body = neutralise(text)
    if body and not body.endswith("\n"):
        body += "\n"
    return f'<{TAG} source="{_attribute(source)}">\n{body}</{TAG}>'


def _attribute(value: str) -> str:
    value = " ".join(value.split())
    value = value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    return neutralise(value.replace(">", "&gt;"))[:200]
