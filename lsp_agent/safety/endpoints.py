"""Where the API key may go: only to the endpoint it was set for, or one the user approved.

A workspace can point the model endpoint elsewhere: VS Code applies a `.vscode/settings.json`
that came with a clone to every setting the extension does not scope to the machine, a
mid-session `didChangeConfiguration` can move `baseUrl`, a provider the editor names changes the
default URL. The key must not follow. So, before any request carries a key:

- a key from the environment or `~/.agents/env` goes unasked to the endpoint those sources give
  on their own (`Settings.key_endpoint`: their URL and provider, or the default);
- any other endpoint — and every endpoint for a key from the editor's settings, which the
  server cannot tell from a workspace's — needs the user's yes, asked once, showing the host;
- a yes is kept in the state folder (`Approvals`: a hash of the key and the endpoint, never the
  key itself), so the same key to the same endpoint is not asked again; a no holds for the life
  of the server.

Endpoints compare by origin: scheme, host (lower case) and port (the scheme's default filled
in), so `https://api.openai.com/v1` and `https://API.openai.com:443/v2` are one endpoint,
`http://` and `https://` two.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit

FILE_NAME = "endpoints.json"
"""The approvals' file in the state folder."""
ANSWER_SEND = "Send the key"
ANSWER_REFUSE = "Do not send it"
ANSWERS = (ANSWER_SEND, ANSWER_REFUSE)
"""The actions of the question, in this order."""

_DEFAULT_PORTS = {"http": 80, "https": 443}
_EDITOR, _DEFAULT = "editor", "default"
"""The settings' source labels (`config`): the editor's settings, none at all."""


def origin(url: str) -> str:
    """`scheme://host:port` of a URL, host in lower case, the scheme's port filled in."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    try:
        port = parts.port or _DEFAULT_PORTS.get(scheme, 0)
    except ValueError:
        port = 0
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}"


def host(url: str) -> str:
    """What the question shows of an endpoint: its host, and its port when not the default."""
    parts = urlsplit(url.strip())
    name = parts.hostname or url
    try:
        port = parts.port
    except ValueError:
        port = None
    return f"{name}:{port}" if port is not None else name


def bound(key: str | None, key_source: str, key_endpoint: str | None, base_url: str) -> bool:
    """Whether the key may go to `base_url` without asking: there is no key, or it was set (in
    the environment or the env file, `key_source`) for this very endpoint (`key_endpoint`)."""
    if key is None:
        return True
    if key_source == _DEFAULT:
        # Settings made in code with a key (an embedding program, a test), not read from any
        # source a workspace could reach: the program chose both.
        return True
    return key_endpoint is not None and origin(key_endpoint) == origin(base_url)


def question(key_source: str, url_source: str, key_endpoint: str | None, base_url: str) -> str:
    """The question asked before the key goes to an endpoint it was not set for."""
    where = "the editor's settings" if key_source == _EDITOR else key_source.removeprefix("env:")
    url_from = "the editor's settings" if url_source == _EDITOR else url_source
    if key_endpoint is not None:
        why = (
            f"The key was set for {host(key_endpoint)}; the endpoint was changed by "
            f"{url_from}, which a workspace's settings file can write."
        )
    else:
        why = (
            "The key comes from the editor's settings, and lsp-agent cannot tell your own "
            "settings from a workspace's settings file; it asks once for each endpoint."
        )
    return (
        f"lsp-agent: send your API key (from {where}) to {host(base_url)}? The model "
        f"endpoint is {base_url}. {why} If you did not set this endpoint, answer "
        f"'{ANSWER_REFUSE}': nothing is sent."
    )


class Approvals:
    """The (key, endpoint) pairs the user said yes to, in a file of the state folder (mode
    0600). Each pair is kept as a SHA-256 of the key and the origin: the file holds no key."""

    def __init__(self, path: Path) -> None:
        self.path = path
        """The JSON file: `{"approved": [hex digest, …]}`."""
        self._lock = threading.Lock()

    def approved(self, key: str, url: str) -> bool:
        """Whether the user approved sending `key` to the endpoint of `url`."""
        return _digest(key, url) in self._read()

    def approve(self, key: str, url: str) -> None:
        """Remember that the user approved sending `key` to the endpoint of `url`."""
        with self._lock:
            found = self._read()
            found.add(_digest(key, url))
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(prefix=".endpoints-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump({"approved": sorted(found)}, handle)
                os.replace(temporary, self.path)
            except OSError:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise

    def _read(self) -> set[str]:
        try:
            with self.path.open(encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return set()
        listed = data.get("approved") if isinstance(data, dict) else None
        if not isinstance(listed, list):
            return set()
        return {item for item in listed if isinstance(item, str)}


def _digest(key: str, url: str) -> str:
    return hashlib.sha256(f"lsp-agent endpoint\0{origin(url)}\0{key}".encode()).hexdigest()
