"""Looking for processes on the host, to prove a command left nothing running."""

from __future__ import annotations

import time
from pathlib import Path


def running(marker: str) -> list[int]:
    """Pids of live processes whose command line contains `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def gone(marker: str, within: float = 10.0, *, by_pid: bool = False) -> bool:
    """Whether no process with `marker` is left (`by_pid`: the process of that pid has ended,
    a zombie included); waits a little for the kernel to reap them (a hang guard, not a timing
    assertion)."""
    deadline = time.monotonic() + within
    while alive(int(marker)) if by_pid else running(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def alive(pid: int) -> bool:
    """Whether the process `pid` runs (not ended, not a zombie waiting to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def parent(pid: int) -> int:
    """The parent pid of `pid` (0 once it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def command_line(pid: int) -> str:
    """The command line of `pid`, its arguments joined by spaces ('' once it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")
