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


def gone(marker: str, within: float = 10.0) -> bool:
    """Whether no process with `marker` is left; waits a little for the kernel to reap them
    (a hang guard, not a timing assertion)."""
    deadline = time.monotonic() + within
    while running(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
