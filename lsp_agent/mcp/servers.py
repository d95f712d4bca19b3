"""The MCP servers configured for a workspace, read from where users already keep them.

Three places in the common `mcpServers` shape, strongest first: the editor's
`lspAgent.mcpServers` setting (user level only), `~/.agents/mcp.json`, and the workspace's own
`.mcp.json`. A server is `{command, args?, env?, cwd?}` (stdio) or `{url, headers?}` (streamable
HTTP); `startTimeout` and `timeout` (seconds) bound its start and each call; `disabled: true`
leaves it out. A value of `args`, `env`, `url` or `headers` may name an environment variable,
`${NAME}` or `${env:NAME}`, instead of holding a secret: it is looked up in the environment,
then in `~/.agents/env`, when the server starts.

The workspace's file comes with the repository, so it is read as data only, as the server reads
every file of the workspace by itself (`safety/reading.py`): a regular file inside the workspace
(a symbolic link out of it, a FIFO or a device is refused), at most `MAX_FILE_BYTES`. Its servers
are started only once the user confirmed them (`approvals.py`); a name the user configured
themselves always means the user's server.

Plain blocking code: `configured()` reads files, so the server calls it in a thread.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lsp_agent.config import read_env_file
from lsp_agent.safety.reading import Read, Refused, read_confined, read_regular

USER_SETTING = "lspAgent.mcpServers"
USER_FILE = "~/.agents/mcp.json"
WORKSPACE_FILE = ".mcp.json"
"""Where a server was configured: the labels `status`, `doctor` and questions show."""

MAX_FILE_BYTES = 256 * 1024
"""A configuration file larger than this is not read (a real one is a few hundred bytes)."""

DEFAULT_START_TIMEOUT = 30.0
"""Seconds a server has to start and list its tools."""
DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds a tool call may take before the model is told it got no answer."""

MAX_KEY_CHARS = 20
"""The longest server name in a tool name (`mcp__<server>__<tool>` fits the providers' 64)."""

_VARIABLE = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")
"""`${NAME}` or `${env:NAME}` in a value: the environment variable's value."""


@dataclass(frozen=True)
class ServerSpec:
    """One configured server, checked: how to reach it and where it was configured."""

    name: str
    """The name the user gave it."""
    key: str
    """The name in its tools' names (`mcp__<key>__<tool>`): letters, digits, `-` and `_`,
    never `__`."""
    source: str
    """`USER_SETTING`, `USER_FILE` or `WORKSPACE_FILE`."""
    command: str | None = None
    """The program of a stdio server; None for an HTTP one."""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables added to the server's environment, as written (variables not yet looked up)."""
    cwd: Path | None = None
    """Where a stdio server runs (the workspace's root by default)."""
    url: str | None = None
    """The endpoint of a streamable HTTP server; None for a stdio one."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """HTTP headers, as written (variables not yet looked up)."""
    start_timeout: float = DEFAULT_START_TIMEOUT
    call_timeout: float = DEFAULT_CALL_TIMEOUT

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    @property
    def from_workspace(self) -> bool:
        """Configured by the workspace's `.mcp.json`: started only once the user confirmed it."""
        return self.source == WORKSPACE_FILE

    def shown(self) -> str:
        """The command line (stdio) or the URL (HTTP), as a question or `status` shows it."""
        if self.command is not None:
            return shlex.join([self.command, *self.args])
        assert self.url is not None
        return self.url

    def variables(self) -> list[str]:
        """The environment variables its values name, in order, once each."""
        values = [*self.args, *self.env.values(), *self.headers.values(), self.url or ""]
        found = [name for value in values for name in _VARIABLE.findall(value)]
        return list(dict.fromkeys(found))

    def fingerprint(self) -> str:
        """What the user confirms: every part of how the server is started, hashed (a change
        to any of them is a new server to confirm)."""
        described = {
            "command": self.command,
            "args": list(self.args),
            "env": dict(self.env),
            "cwd": str(self.cwd) if self.cwd is not None else None,
            "url": self.url,
            "headers": dict(self.headers),
        }
        canonical = json.dumps(described, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def describe(self) -> dict[str, Any]:
        """For `status` and `doctor`: where it runs, never what its variables hold."""
        described: dict[str, Any] = {
            "server": self.name,
            "source": self.source,
            "transport": self.transport,
        }
        if self.command is not None:
            described["command"] = self.shown()
            if self.env:
                described["env"] = sorted(self.env)
        else:
            described["url"] = self.url
            if self.headers:
                described["headers"] = sorted(self.headers)
        return described


@dataclass(frozen=True)
class Configured:
    """The servers in effect for a workspace, and what was wrong with the rest."""

    servers: tuple[ServerSpec, ...] = ()
    problems: tuple[str, ...] = ()
    """One sentence per file or entry left out, for the log, `status` and `doctor`."""


class MissingVariable(Exception):
    """A value names an environment variable that is set nowhere."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def configured(root: Path, setting: Mapping[str, Any] | None, home: Path | None) -> Configured:
    """The servers of the three places, the user's names first; reads files (off the loop)."""
    problems: list[str] = []
    servers: dict[str, ServerSpec] = {}
    keys: dict[str, str] = {}
    user_file = home / ".agents" / "mcp.json" if home is not None else None
    sources: list[tuple[str, Mapping[str, Any] | None]] = [(USER_SETTING, setting)]
    sources.append((USER_FILE, _read_user_file(user_file, problems)))
    sources.append((WORKSPACE_FILE, _read_workspace_file(root, problems)))
    for source, entries in sources:
        for name, entry in (entries or {}).items():
            if name in servers:
                if source == WORKSPACE_FILE:
                    problems.append(
                        f"{WORKSPACE_FILE} names a server {name!r}, which you configured "
                        f"yourself ({servers[name].source}): yours is used"
                    )
                continue
            spec = _server(str(name), entry, source, root, problems)
            if spec is None:
                continue
            if spec.key in keys:
                problems.append(
                    f"MCP server {name!r} ({source}) is left out: its tools would be named like "
                    f"those of {keys[spec.key]!r} (mcp__{spec.key}__…)"
                )
                continue
            keys[spec.key] = spec.name
            servers[spec.name] = spec
    return Configured(tuple(servers.values()), tuple(problems))


def server_key(name: str) -> str:
    """A server's name as its tools' names carry it: other characters become `_`, no `__`."""
    key = re.sub(r"[^A-Za-z0-9_-]", "_", name)
    key = re.sub(r"_{2,}", "_", key).strip("_")
    return key[:MAX_KEY_CHARS].rstrip("_")


def expand(value: str, lookup: Callable[[str], str | None]) -> str:
    """`value` with each `${NAME}` replaced by the variable's value; `MissingVariable` when
    one is set nowhere."""

    def replace(match: re.Match[str]) -> str:
        found = lookup(match.group(1))
        if found is None:
            raise MissingVariable(match.group(1))
        return found

    return _VARIABLE.sub(replace, value)


def variable_lookup(home: Path | None) -> Callable[[str], str | None]:
    """Where `${NAME}` is looked up: the environment, then `~/.agents/env` (read now)."""
    file_vars: dict[str, str] = {}
    if home is not None:
        file_vars, _ = read_env_file(home / ".agents" / "env")

    def lookup(name: str) -> str | None:
        value = os.environ.get(name)
        return value if value is not None else file_vars.get(name)

    return lookup


def _read_user_file(path: Path | None, problems: list[str]) -> Mapping[str, Any] | None:
    """`~/.agents/mcp.json`: the user's own file (a symbolic link is followed), a regular
    file of at most `MAX_FILE_BYTES`."""
    if path is None:
        return None
    try:
        found = read_regular(path, MAX_FILE_BYTES)
    except FileNotFoundError:
        return None
    except Refused as refused:
        problems.append(str(refused).replace(str(path), USER_FILE))
        return None
    return _entries(found, USER_FILE, problems)


def _read_workspace_file(root: Path, problems: list[str]) -> Mapping[str, Any] | None:
    """The workspace's `.mcp.json` as data: a regular file inside the workspace, never
    followed out of it, never a FIFO that would block the read, at most `MAX_FILE_BYTES`."""
    try:
        found = read_confined(root, root / WORKSPACE_FILE, MAX_FILE_BYTES, name=WORKSPACE_FILE)
    except FileNotFoundError:
        return None
    except Refused as refused:
        problems.append(str(refused))
        return None
    return _entries(found, WORKSPACE_FILE, problems)


def _entries(found: Read, source: str, problems: list[str]) -> Mapping[str, Any] | None:
    """The `mcpServers` object of a configuration file's bytes."""
    if found.cut:
        problems.append(f"{source} is larger than {MAX_FILE_BYTES // 1024} KB: not read")
        return None
    try:
        document = json.loads(found.data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        problems.append(f"{source} is not valid JSON ({error}): ignored")
        return None
    entries = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        problems.append(f'{source} has no "mcpServers" object: ignored')
        return None
    return entries


def _server(
    name: str, entry: object, source: str, root: Path, problems: list[str]
) -> ServerSpec | None:
    """One entry, checked; None (with a sentence in `problems`) when it cannot be used."""
    where = f"MCP server {name!r} ({source})"
    if not isinstance(entry, Mapping):
        problems.append(f"{where} is left out: expected an object")
        return None
    if entry.get("disabled") is True:
        return None
    key = server_key(name)
    if not key:
        problems.append(f"{where} is left out: its name has no letter or digit to use")
        return None
    kind = entry.get("type", entry.get("transport"))
    if kind == "sse":
        problems.append(
            f"{where} is left out: it uses the old SSE transport; lsp-agent speaks streamable "
            "HTTP (give its /mcp URL) and stdio"
        )
        return None
    try:
        start_timeout = _seconds(entry, "startTimeout", DEFAULT_START_TIMEOUT)
        call_timeout = _seconds(entry, "timeout", DEFAULT_CALL_TIMEOUT)
        if entry.get("url") is not None:
            return ServerSpec(
                name,
                key,
                source,
                url=_url(entry["url"]),
                headers=_strings(entry, "headers"),
                start_timeout=start_timeout,
                call_timeout=call_timeout,
            )
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ValueError('it needs "command" (a program to run) or "url" (an HTTP server)')
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError('"args" must be a list of strings')
        return ServerSpec(
            name,
            key,
            source,
            command=_home_path(command.strip()),
            args=tuple(args),
            env=_strings(entry, "env"),
            cwd=_cwd(entry.get("cwd"), root),
            start_timeout=start_timeout,
            call_timeout=call_timeout,
        )
    except ValueError as error:
        problems.append(f"{where} is left out: {error}")
        return None


def _seconds(entry: Mapping[str, Any], key: str, default: float) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 86_400:
        raise ValueError(f'"{key}" must be a number of seconds')
    return float(value)


def _url(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError('"url" must be a string')
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError('"url" must be an http:// or https:// URL')
    return value.strip()


def _strings(entry: Mapping[str, Any], key: str) -> dict[str, str]:
    value = entry.get(key, {})
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f'"{key}" must be an object of strings')
    return dict(value)


def _cwd(value: object, root: Path) -> Path:
    if value is None:
        return root
    if not isinstance(value, str) or not value.strip():
        raise ValueError('"cwd" must be a path')
    path = Path(_home_path(value.strip()))
    return path if path.is_absolute() else root / path


def _home_path(value: str) -> str:
    """`~/x` as the user's home; anything else as written."""
    if value == "~" or value.startswith("~/"):
        return os.path.expanduser(value)
    return value
