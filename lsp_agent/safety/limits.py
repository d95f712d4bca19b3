"""How many processes a sandboxed command may have: a fork bomb must not exhaust the host's PIDs.

Unprivileged, bubblewrap puts the command in a user namespace of its own, where the kernel counts
RLIMIT_NPROC per namespace (Linux ≥ 5.14): the command's first shell sets the limit
(`limit_prefix`) and only then runs the command, which cannot raise it again. Root is exempt from
RLIMIT_NPROC, so a root server also puts each command in a pids cgroup of its own (cgroup v2, or
v1's pids hierarchy) when it may make one (`PidsCgroup`); when it may not, root's commands have
no process limit, and the probe's reason says so.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import uuid
from pathlib import Path

MAX_PROCESSES = 512
"""Processes (threads included) one command may have at a time."""


def limit_prefix(shell: str) -> list[str]:
    """The argv that sets the process limit inside the sandbox, then runs the argv after it."""
    script = (
        f"ulimit -u {MAX_PROCESSES} 2>/dev/null || ulimit -p {MAX_PROCESSES} 2>/dev/null || "
        '{ echo "lsp-agent: the process limit could not be set" >&2; exit 126; }; exec "$@"'
    )
    return [shell, "-c", script, "lsp-agent-limits"]


def exempt() -> bool:
    """Whether RLIMIT_NPROC does not bind this server's commands (root is exempt)."""
    return os.getuid() == 0


class PidsCgroup:
    """One command's pids cgroup (root only): made before it starts, removed after it ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        """The cgroup folder; its `cgroup.procs` is where the command's first process goes."""

    @classmethod
    def make(cls) -> PidsCgroup | None:
        """A fresh cgroup limited to `MAX_PROCESSES`, or None where none can be made."""
        parent = cgroup_parent()
        if parent is None:
            return None
        _sweep(parent)
        path = parent / f"lsp-agent-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(f"{MAX_PROCESSES}\n")
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run by a shell that first moves itself into this cgroup (so that everything
        it starts is counted)."""
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.path / "cgroup.procs"),
                *argv]  # fmt: skip

    def remove(self) -> bool:
        """Kill what is left in the cgroup and remove it; False when processes killed a moment
        ago are still on their way out (then try again later)."""
        with contextlib.suppress(OSError):
            self.path.rmdir()
            return True
        self._kill_all()
        with contextlib.suppress(OSError):
            self.path.rmdir()
            return True
        return not self.path.exists()

    def _kill_all(self) -> None:
        kill = self.path / "cgroup.kill"
        if kill.exists():
            with contextlib.suppress(OSError):
                kill.write_text("1\n")
                return
        with contextlib.suppress(OSError):
            for line in (self.path / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError, ValueError):
                    os.kill(int(line), signal.SIGKILL)


@functools.cache
def cgroup_parent() -> Path | None:
    """Where this process may make child cgroups with a pids limit (root only), or None."""
    if not exempt():
        return None
    for parent in _candidates():
        probe = parent / f"lsp-agent-probe-{os.getpid()}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            if (probe / "pids.max").exists():
                return parent
            # cgroup v2: the controller must be enabled for the children first.
            with contextlib.suppress(OSError):
                (parent / "cgroup.subtree_control").write_text("+pids\n")
            if (probe / "pids.max").exists():
                return parent
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
    return None


def _sweep(parent: Path) -> None:
    """Remove the cgroups that servers gone since left behind (their last command's)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent):
            parts = entry.name.split("-")
            if len(parts) != 4 or parts[:2] != ["lsp", "agent"] or not parts[2].isdigit():
                continue
            try:
                os.kill(int(parts[2]), 0)
                continue  # its server lives: it removes its own
            except ProcessLookupError:
                pass
            except OSError:
                continue
            with contextlib.suppress(OSError):
                os.rmdir(entry.path)


def _candidates() -> list[Path]:
    """The cgroup folders this process lives in that may carry a pids controller."""
    try:
        membership = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    found: list[Path] = []
    for line in mounts:
        fields = line.split()
        if " - " not in line:
            continue
        after = line.split(" - ", 1)[1].split()
        if len(after) < 3 or len(fields) < 5:
            continue
        fstype, options = after[0], after[2]
        mount_root, mount_point = fields[3], fields[4]
        for entry in membership:
            hierarchy, _, rest = entry.partition(":")
            controllers, _, path = rest.partition(":")
            v2 = fstype == "cgroup2" and hierarchy == "0" and controllers == ""
            v1 = (
                fstype == "cgroup"
                and "pids" in controllers.split(",")
                and "pids" in (options.split(","))
            )
            if not (v1 or v2):
                continue
            relative = os.path.relpath(path, mount_root) if mount_root != "/" else path
            if relative.startswith(".."):
                continue
            found.append(Path(mount_point) / relative.lstrip("/"))
    return found
