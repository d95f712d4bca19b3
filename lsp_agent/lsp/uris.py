"""File URIs as editors send them, turned into paths."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

_DRIVE = re.compile(r"^/[A-Za-z]:")
"""A Windows drive in a URI's path: `file:///C:/src`."""


def to_fs_path(uri: str) -> str | None:
    """The path of a `file:` URI (percent-decoded), or None for any other URI.

    `file://host/share/x` is the UNC path `//host/share/x`; a drive letter is lower-cased, as
    VS Code spells it.
    """
    try:
        parts = urlsplit(uri)
    except ValueError:
        return None
    if parts.scheme.lower() != "file":
        return None
    path = unquote(parts.path)
    if parts.netloc and parts.netloc.lower() != "localhost" and path:
        return f"//{unquote(parts.netloc)}{path}"
    if _DRIVE.match(path):
        return path[1].lower() + path[2:]
    return path or None
