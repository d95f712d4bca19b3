"""The one way the server runs git: a scrubbed environment, and options that run nothing.

A repository's config can name programs that git runs as a side effect: `core.fsmonitor`, hooks,
a pager, textconv, external diff and clean/smudge filters. A command the agent ran (or anything
else that wrote `.git/config`) could plant one, and the server runs git outside the sandbox, as
the user. So every git the server starts — the change tracker's (`changes/git.py`), the
permission checks' (`safety/gitcheck.py`) — starts here, with:

- an environment built from an allowlist: no `GIT_*` of the user's (`GIT_DIR`, `GIT_EXTERNAL_DIFF`,
  `GIT_CONFIG_PARAMETERS`, …), no API key, `GIT_CONFIG_NOSYSTEM`, no pager, no prompt, no
  optional locks (the user's own git never waits on ours);
- `SAFE_CONFIG`: fsmonitor off, hooks pointed at `/dev/null`, `cat` as pager, no transport
  allowed (a partial clone would otherwise fetch a missing blob), no credential helper, no
  signature checks (gpg);
- settings whose keys come from the repository (a filter driver's name is whatever the
  repository wrote: `a=b`, quotes, spaces, dots, any script) are passed through
  `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`, where git takes the key whole:
  `-c key=value` is split by git at the first `=`, so `-c filter.a=b.clean=` would set
  `filter.a` and leave the driver `a=b` in place.

Every run has a time limit (`TIMEOUT_S`): a repository's config can include a FIFO, which git
would wait on for ever.

Subprocesses are made in a worker thread, never with asyncio's subprocess transport: CPython
3.11's can hang for ever when a creation is cancelled midway. A cancelled run kills its process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SAFE_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.quotePath=false",
    "core.untrackedCache=keep",
    "core.askPass=",
    "credential.helper=",
    "protocol.allow=never",
    "gc.auto=0",
    "maintenance.auto=false",
    "diff.noprefix=false",
    "log.showSignature=false",
)
"""`-c` options given to every git: none of these can be turned back on by the repository."""


_ENV_KEEP = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "GIT_CEILING_DIRECTORIES",
    "SYSTEMROOT",
    "COMSPEC",
    "PATHEXT",
    "USERPROFILE",
    "APPDATA",
    "LOCALAPPDATA",
)
"""What git needs of the server's environment: finding itself, the user's global config (the
user's own, trusted), the repository's boundary. Everything else, keys included, stays out."""


def environment() -> dict[str, str]:
    """The environment of every git the server runs."""
    env = {name: os.environ[name] for name in _ENV_KEEP if name in os.environ}
    env.update(
        {
            "LC_ALL": "C",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_LITERAL_PATHSPECS": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
            "PAGER": "cat",
            "GIT_NO_LAZY_FETCH": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_FLUSH": "1",
        }
    )
    return env


TIMEOUT_S = 120.0
"""The longest any git of the server may take (a full `git status` of a very large repository
takes seconds); past it the process is killed and the run counts as failed."""


def command(*args: str) -> list[str]:
    """The argv of `git args…` with the safe options in front."""
    options: list[str] = ["git", "--no-pager"]
    for setting in SAFE_CONFIG:
        options += ["-c", setting]
    return [*options, *args]


def config_environment(config: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Settings passed whole, keys as they are (no `=` splitting): git's `GIT_CONFIG_COUNT`."""
    env = {"GIT_CONFIG_COUNT": str(len(config))}
    for index, (key, value) in enumerate(config):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env if config else {}


@dataclass(frozen=True)
class Completed:
    """What a git run left: its exit code and standard output."""

    code: int
    """The exit code; 127 when git could not be started."""
    out: bytes
    """Standard output (standard error is discarded)."""


async def run(
    cwd: Path, *args: str, config: Sequence[tuple[str, str]] = (), timeout: float = TIMEOUT_S
) -> Completed:
    """Run `git args…` in `cwd`, with `config` on top of the safe settings (keys taken whole);
    never leaves a process behind, even when cancelled. A run past `timeout` seconds is killed
    and answers code 124."""
    loop = asyncio.get_running_loop()
    argv = command(*args)
    made = loop.run_in_executor(None, _start, argv, cwd, config_environment(config))
    try:
        process = await asyncio.shield(made)
    except asyncio.CancelledError:
        made.add_done_callback(_kill_when_made)
        raise
    if process is None:
        return Completed(127, b"")
    finished = loop.run_in_executor(None, _communicate, process)
    try:
        out = await asyncio.wait_for(asyncio.shield(finished), timeout)
    except TimeoutError:
        _kill(process)
        await finished
        return Completed(124, b"")
    except asyncio.CancelledError:
        _kill(process)  # the worker's communicate() then returns, and reaps it
        raise
    return Completed(process.returncode if process.returncode is not None else 1, out)


def _start(
    argv: list[str], cwd: Path, overrides: dict[str, str] | None = None
) -> subprocess.Popen[bytes] | None:
    try:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env={**environment(), **(overrides or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=sys.platform != "win32",
        )
    except OSError:
        return None


def _communicate(process: subprocess.Popen[bytes]) -> bytes:
    try:
        out, _ = process.communicate()
    except (OSError, ValueError):
        _kill(process)
        return b""
    return out


def _kill_when_made(made: asyncio.Future[subprocess.Popen[bytes] | None]) -> None:
    """The run was cancelled while its process was being made: end the process now."""
    if made.cancelled() or made.exception() is not None:
        return
    process = made.result()
    if process is not None:
        _kill(process)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=1)
        if process.stdout is not None:
            process.stdout.close()


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        process.kill()


def run_sync(
    cwd: Path, *args: str, timeout: float, pathspec_magic: bool = False
) -> Completed | None:
    """Run `git args…` in `cwd` on this thread (a worker's); None when it could not finish
    within `timeout` seconds (its process is killed). Pathspecs are literal unless
    `pathspec_magic` (`:(glob,icase)…` patterns)."""
    process = _start(command(*args), cwd, {"GIT_LITERAL_PATHSPECS": "0"} if pathspec_magic else {})
    if process is None:
        return Completed(127, b"")
    try:
        out, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(process)
        with contextlib.suppress(subprocess.TimeoutExpired, OSError, ValueError):
            process.communicate(timeout=1)
        return None
    return Completed(process.returncode if process.returncode is not None else 1, out)
