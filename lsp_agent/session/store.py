"""The sessions of one workspace on disk: where they live, making, finding and listing them.

A session lives in `<state dir>/sessions/<workspace key>/<session id>.jsonl` (its transcript:
`transcript.py`).

All of this is plain blocking code. `append` is cheap enough to call anywhere; `list`, `latest` and
`messages` read files and belong in a thread (`asyncio.to_thread`) when called from the server.
"""

from __future__ import annotations

import builtins
import hashlib
import logging
import os
import re
import secrets
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path

import platformdirs

from lsp_agent import __version__
from lsp_agent.errors import UserError
from lsp_agent.session.transcript import (
    MIN_SECRET_LENGTH,
    SessionInfo,
    Summary,
    Transcript,
    iso,
    open_append,
    summarize,
)

STATE_DIR_ENV = "LSP_AGENT_STATE_DIR"
"""Environment variable that replaces the platform's state directory for lsp-agent."""


_SESSION_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}")
# Records are written with `type` first and, for messages, `role` second, so a prompt line can be
# recognised from its first bytes without parsing the (possibly large) rest of the line.

_log = logging.getLogger(__name__)


class UnknownSessionError(UserError, KeyError):
    """No transcript with that id exists for this workspace."""

    def __str__(self) -> str:
        # KeyError would quote the sentence; the user should read it as written.
        return str(self.args[0]) if self.args else ""


class InvalidSessionIdError(UserError, ValueError):
    """The text is not a session id (and could not be used as a file name safely)."""


def state_dir(base_dir: Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """lsp-agent's state directory: `base_dir`, else `$LSP_AGENT_STATE_DIR`, else the platform's."""
    if base_dir is not None:
        return base_dir
    override = (os.environ if environ is None else environ).get(STATE_DIR_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    return platformdirs.user_state_path("lsp-agent")


def workspace_key(root: Path) -> str:
    """A short, stable, readable directory name for a workspace: `<basename>-<hash>`."""
    resolved = root.resolve()
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", resolved.name)[:40].strip("._") or "root"
    digest = hashlib.sha256(os.fsencode(resolved)).hexdigest()[:12]
    return f"{name}-{digest}"


def check_session_id(session_id: object) -> str:
    """The id itself when it has the form we create; `InvalidSessionIdError` otherwise."""
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise InvalidSessionIdError(
            f"not a session id: {session_id!r} (ids look like 20261130-164501-ab12cd; "
            "`lsp-agent sessions` lists them)"
        )
    return session_id


class SessionStore:
    """The sessions of one workspace."""

    def __init__(
        self,
        workspace_root: Path,
        base_dir: Path | None = None,
        *,
        secrets: Iterable[str] = (),
    ) -> None:
        self.workspace_root = workspace_root.resolve()
        """The workspace these sessions belong to."""
        self.state_root = state_dir(base_dir)
        """lsp-agent's state folder (what else the server keeps is beside the sessions)."""
        self.directory = self.state_root / "sessions" / workspace_key(self.workspace_root)
        """Where this workspace's transcripts are; created on the first `create`."""
        self.secrets: set[str] = set()
        """Values never written to any transcript of this store (see `Transcript.redact`)."""
        for secret in secrets:
            self.redact(secret)
        self._open: dict[str, Transcript] = {}
        self._summaries: dict[Path, Summary] = {}
        self._lock = threading.Lock()

    def redact(self, secret: str) -> None:
        """Never write `secret` to any transcript of this store, open or future."""
        if len(secret) >= MIN_SECRET_LENGTH:
            self.secrets.add(secret)

    def create(self) -> Transcript:
        """A new session with its header written."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for _ in range(20):
            started = datetime.now(UTC)
            session_id = f"{started:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
            path = self.directory / f"{session_id}.jsonl"
            try:
                handle = open_append(path, exclusive=True)
            except FileExistsError:
                continue
            transcript = Transcript(path, session_id, self.secrets)
            transcript._adopt(handle)
            transcript.append(
                {
                    "type": "session",
                    "ts": iso(started),
                    "session": session_id,
                    "workspace": str(self.workspace_root),
                    "started": iso(started),
                    "version": __version__,
                }
            )
            with self._lock:
                self._open[session_id] = transcript
            return transcript
        raise RuntimeError(f"could not pick an unused session id in {self.directory}")

    def open(self, session_id: str) -> Transcript:
        """The session with that id (the same object while this store has it open).

        Raises `InvalidSessionIdError` (a ValueError) for text that is not an id and
        `UnknownSessionError` (a KeyError) when there is no such session in this workspace.
        """
        check_session_id(session_id)
        with self._lock:
            if session_id in self._open:
                return self._open[session_id]
            path = self.directory / f"{session_id}.jsonl"
            if not path.is_file():
                raise UnknownSessionError(
                    f"no session {session_id} in workspace {self.workspace_root}: "
                    "`lsp-agent sessions` lists them"
                )
            transcript = Transcript(path, session_id, self.secrets)
            self._open[session_id] = transcript
            return transcript

    def list(self) -> builtins.list[SessionInfo]:
        """Every session of the workspace, newest first.

        Reads each file's header and streams the rest looking only at line prefixes; what was
        read is remembered, so a later call reads only what was appended since.
        """
        try:
            paths = [
                path
                for path in self.directory.iterdir()
                if path.suffix == ".jsonl" and _SESSION_ID.fullmatch(path.stem)
            ]
        except FileNotFoundError:
            return []
        infos: list[SessionInfo] = []
        with self._lock:
            known = self._summaries
            self._summaries = {}
            for path in paths:
                try:
                    summary = summarize(path, known.get(path))
                except OSError:
                    continue  # deleted while we listed
                self._summaries[path] = summary
                infos.append(summary.info(path.stem))
        infos.sort(key=lambda info: (info.started, info.session), reverse=True)
        return infos

    def latest(self) -> Transcript | None:
        """The most recently started session, or None when the workspace has none."""
        infos = self.list()
        return self.open(infos[0].session) if infos else None

    def close(self) -> None:
        """Close every transcript this store opened."""
        with self._lock:
            transcripts = builtins.list(self._open.values())
            self._open.clear()
        for transcript in transcripts:
            transcript.close()
