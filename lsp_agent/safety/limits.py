"""What a sandboxed command may consume: processes, memory, file size, disk.

- **Processes**: a fork bomb must not exhaust the host's PIDs. Unprivileged, bubblewrap puts the
  command in a user namespace of its own, where the kernel counts RLIMIT_NPROC per namespace
  (Linux ≥ 5.14): the command's first shell sets the limit (`limit_prefix`) and only then runs
  the command, which cannot raise it again. Without a user namespace (the Landlock wall) the
  limit counts all of the user's processes: it is set to what the user runs already plus
  `MAX_PROCESSES`. Root is exempt from RLIMIT_NPROC, so a root server also puts each command in
  a pids cgroup of its own (cgroup v2, or v1's pids hierarchy) when it may make one; when it
  may not, root's commands have no process limit, and the probe's reason says so.
- **Memory**: a memory cgroup per command where the server may make one (the whole process tree
  counts, and the kernel's OOM killer stops it there, never in the server); else an address
  space limit (RLIMIT_AS) on each of its processes.
- **File size**: RLIMIT_FSIZE, so no single file the command writes passes `commandFileMB`.
- **Disk**: `DiskWatch` looks at the space used on the workspace's file system (and the
  command's private temporary folder's) while the command runs, and stops it once it grew by
  more than `commandDiskMB`.

`Budget.verdict` says afterwards, in one sentence, which limit stopped a command.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MAX_PROCESSES = 512
"""Processes (threads included) one command may have at a time."""
DISK_LOOK_S = 0.1
"""How often the disk watch looks at the file system while a command runs."""
_MEMORY_WORDS = ("MemoryError", "Cannot allocate memory", "out of memory", "bad_alloc",
                 "memory allocation failed", "Out of memory")  # fmt: skip
"""What programs print when an allocation fails (an address-space limit gives no other sign)."""
_FILE_WORDS = ("File size limit exceeded", "File too large")
"""What shells and programs print when RLIMIT_FSIZE stopped a write (the command may go on)."""


@dataclass(frozen=True)
class Budget:
    """What one command may consume."""

    memory_mb: int
    """Memory, in MiB (`commandMemoryMB`)."""
    file_mb: int
    """The largest file it may write, in MiB (`commandFileMB`)."""
    disk_mb: int
    """How much it may grow the disk, in MiB (`commandDiskMB`)."""

    def verdict(self, exit_code: int | None, output: str, stopped: Stopped) -> str | None:
        """The sentence saying which limit stopped the command, or None."""
        if stopped.disk:
            return (
                f"stopped: it grew the disk by more than {self.disk_mb} MiB "
                "(lspAgent.commandDiskMB); what it wrote is still there, remove what is not "
                "needed"
            )
        if stopped.memory:
            return (
                f"stopped: it used more than {self.memory_mb} MiB of memory "
                "(lspAgent.commandMemoryMB); the kernel ended it"
            )
        xfsz = getattr(signal, "SIGXFSZ", 25)  # not defined on Windows, where none is set
        big = exit_code in (-xfsz, 128 + xfsz)
        if big or any(words in output for words in _FILE_WORDS):
            return (
                f"a write was stopped at the file size limit of {self.file_mb} MiB "
                "(lspAgent.commandFileMB)"
            )
        failed = exit_code not in (0, None) and stopped.address_space
        if failed and any(word in output for word in _MEMORY_WORDS):
            return (
                f"it may have run out of memory: each of its processes may use at most "
                f"{self.memory_mb} MiB (lspAgent.commandMemoryMB)"
            )
        return None


@dataclass
class Stopped:
    """Which limit ended a command (filled in while and after it runs)."""

    disk: bool = False
    memory: bool = False
    address_space: bool = False
    """Memory was bounded per process (no cgroup): a failed allocation is the only sign."""


def limit_prefix(
    shell: str, *, processes: int | None = MAX_PROCESSES, file_mb: int | None = None,
    memory_mb: int | None = None,
) -> list[str]:  # fmt: skip
    """The argv that sets the limits inside the sandbox, then runs the argv after it: the
    process limit (when `processes`), the file size and the address space (when given)."""
    steps: list[str] = []
    if processes is not None:
        steps.append(
            f"{{ ulimit -u {processes} 2>/dev/null || ulimit -p {processes} 2>/dev/null || "
            '{ echo "lsp-agent: the process limit could not be set" >&2; exit 126; }; }'
        )
    if file_mb is not None:
        # bash counts 1024-byte blocks; a POSIX shell (dash) 512-byte ones.
        block = 1024 if os.path.basename(shell) == "bash" else 512
        steps.append(f"ulimit -f {file_mb * 1024 * 1024 // block}")
    if memory_mb is not None:
        steps.append(f"ulimit -v {memory_mb * 1024}")
    script = " && ".join([*steps, 'exec "$@"']) if steps else 'exec "$@"'
    return [shell, "-c", script, "lsp-agent-limits"]


def exempt() -> bool:
    """Whether RLIMIT_NPROC does not bind this server's commands (root is exempt)."""
    return os.getuid() == 0


def user_tasks(uid: int) -> int:
    """How many tasks (threads included) the user `uid` runs now: what RLIMIT_NPROC counts."""
    count = 0
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/status", "rb") as status:
                    fields = dict(
                        line.split(b":", 1) for line in status.read().splitlines() if b":" in line
                    )
            except OSError:
                continue
            uids = fields.get(b"Uid", b"").split()
            if uids and uids[0] == str(uid).encode():
                count += int(fields.get(b"Threads", b"1").strip() or 1)
    return count


@dataclass
class CommandCgroup:
    """One command's cgroups (root only): made before it starts, removed after it ends. A pids
    limit, and a memory limit where the memory controller is there."""

    paths: list[Path]
    """The cgroup folders; the command's first process goes into each one's `cgroup.procs`."""
    memory: Path | None = None
    """The one that holds the memory limit (v1's memory hierarchy, or the v2 group)."""
    pids: bool = False
    """Whether a pids limit is among them."""
    _events: dict[str, int] = field(default_factory=dict)

    @classmethod
    def make(cls, memory_mb: int | None = None) -> CommandCgroup | None:
        """Fresh cgroups limited to `MAX_PROCESSES` and `memory_mb`, or None where none can
        be made."""
        made: list[Path] = []
        memory: Path | None = None
        pids = False
        name = f"lsp-agent-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        for parent, kinds in _parents().items():
            _sweep(parent)
            path = parent / name
            try:
                path.mkdir()
            except OSError:
                continue
            made.append(path)
            with contextlib.suppress(OSError):
                if "pids" in kinds:
                    (path / "pids.max").write_text(f"{MAX_PROCESSES}\n")
                    pids = True
            wanted = "memory" in kinds and memory_mb is not None and memory is None
            if wanted and memory_mb is not None and _limit_memory(path, memory_mb * 1024 * 1024):
                memory = path
        if not made:
            return None
        return cls(made, memory, pids)

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` run by a shell that first moves itself into these cgroups (so that
        everything it starts is counted)."""
        script = (
            'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 126; shift; '
            'n=$((n - 1)); done; exec "$@"'
        )
        procs = [str(path / "cgroup.procs") for path in self.paths]
        return ["/bin/sh", "-c", script, "lsp-agent-cgroup", str(len(procs)), *procs, *argv]

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer ended a process of the command for its memory."""
        if self.memory is None:
            return False
        for name in ("memory.events", "memory.oom_control"):
            with contextlib.suppress(OSError, ValueError):
                for line in (self.memory / name).read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and int(value) > 0:
                        return True
        return False

    def remove(self) -> bool:
        """Kill what is left in the cgroups and remove them; False when processes killed a
        moment ago are still on their way out (then try again later)."""
        left = []
        for path in self.paths:
            if not _remove(path):
                left.append(path)
        self.paths = left
        return not left


def _remove(path: Path) -> bool:
    with contextlib.suppress(OSError):
        path.rmdir()
        return True
    kill = path / "cgroup.kill"
    if kill.exists():
        with contextlib.suppress(OSError):
            kill.write_text("1\n")
    with contextlib.suppress(OSError):
        for line in (path / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(line), signal.SIGKILL)
    with contextlib.suppress(OSError):
        path.rmdir()
        return True
    return not path.exists()


def _limit_memory(path: Path, limit: int) -> bool:
    """Set the memory limit of a fresh cgroup (v2 or v1), swap included where it can be."""
    if (path / "memory.max").exists():
        try:
            (path / "memory.max").write_text(f"{limit}\n")
        except OSError:
            return False
        with contextlib.suppress(OSError):
            (path / "memory.swap.max").write_text("0\n")
        return True
    try:
        (path / "memory.limit_in_bytes").write_text(f"{limit}\n")
    except OSError:
        return False
    with contextlib.suppress(OSError):
        (path / "memory.memsw.limit_in_bytes").write_text(f"{limit}\n")
    return True


def cgroup_parent() -> Path | None:
    """Where this process may make child cgroups with a pids limit (root only), or None."""
    for parent, kinds in _parents().items():
        if "pids" in kinds:
            return parent
    return None


def memory_cgroup() -> bool:
    """Whether each command gets a memory cgroup (else an address-space limit)."""
    return any("memory" in kinds for kinds in _parents().values())


@functools.cache
def _parents() -> dict[Path, frozenset[str]]:
    """The cgroup folders this process may make children in (root only), each with the
    controllers (`pids`, `memory`) a child gets there."""
    if not exempt():
        return {}
    found: dict[Path, frozenset[str]] = {}
    for parent, controllers in _candidates():
        probe = parent / f"lsp-agent-probe-{os.getpid()}"
        try:
            probe.mkdir()
        except OSError:
            continue
        try:
            if controllers == "v2":
                # cgroup v2: the controllers must be enabled for the children first.
                for controller in ("pids", "memory"):
                    if not (probe / f"{controller}.max").exists():
                        with contextlib.suppress(OSError):
                            (parent / "cgroup.subtree_control").write_text(f"+{controller}\n")
            markers = (
                ("pids", "pids.max"),
                ("memory", "memory.max"),
                ("memory", "memory.limit_in_bytes"),
            )
            kinds = frozenset(kind for kind, marker in markers if (probe / marker).exists())
            if kinds:
                found[parent] = found.get(parent, frozenset()) | kinds
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()
    return found


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


def _candidates() -> list[tuple[Path, str]]:
    """The cgroup folders this process lives in that may carry a pids or memory controller,
    each with `v2` or the v1 controller it is for."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            membership = handle.read().splitlines()
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            mounts = handle.read().splitlines()
    except OSError:
        return []
    found: list[tuple[Path, str]] = []
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
            kind = ""
            if fstype == "cgroup2" and hierarchy == "0" and controllers == "":
                kind = "v2"
            elif fstype == "cgroup":
                wanted = {"pids", "memory"} & set(controllers.split(",")) & set(options.split(","))
                kind = min(wanted) if wanted else ""
            if not kind:
                continue
            relative = os.path.relpath(path, mount_root) if mount_root != "/" else path
            if relative.startswith(".."):
                continue
            found.append((Path(mount_point) / relative.lstrip("/"), kind))
    return found


class DiskWatch:
    """Stops a command that grows the disk under the workspace (or its private temporary
    folder) by more than its budget: the space used on their file systems is looked at every
    `DISK_LOOK_S` while it runs (another program writing to the same disk meanwhile counts
    too)."""

    def __init__(self, folders: Sequence[Path], limit_mb: int) -> None:
        self.limit = limit_mb * 1024 * 1024
        """Bytes the command may add."""
        self._start = {device: used for device, used in self._used(folders).items()}
        self._folders = list(folders)

    async def watch(self, stop: Callable[[], None], stopped: Stopped) -> None:
        """Until cancelled: call `stop()` once the disk grew past the budget."""
        while True:
            await asyncio.sleep(DISK_LOOK_S)
            now = await asyncio.to_thread(self._used, self._folders)
            if any(now.get(dev, used) - used > self.limit for dev, used in self._start.items()):
                stopped.disk = True
                stop()
                return

    @staticmethod
    def _used(folders: Sequence[Path]) -> dict[int, int]:
        used: dict[int, int] = {}
        for folder in folders:
            with contextlib.suppress(OSError):
                device = os.stat(folder).st_dev
                info = os.statvfs(folder)
                used[device] = (info.f_blocks - info.f_bfree) * info.f_frsize
        return used


@dataclass
class Enforcer:
    """One command's limits while it runs: the disk watch, and what ended it."""

    budget: Budget
    disk: DiskWatch | None = None
    cgroup: CommandCgroup | None = None
    stopped: Stopped = field(default_factory=Stopped)

    async def watch(self, stop: Callable[[], None]) -> None:
        """Until cancelled: stop the command (`stop()`) once it passes a limit it is watched
        for (the disk; the kernel enforces the others)."""
        if self.disk is not None:
            await self.disk.watch(stop, self.stopped)
        else:
            await asyncio.Event().wait()

    def verdict(self, exit_code: int | None, output: str) -> str | None:
        """Once the command ended: the sentence saying which limit stopped it, or None."""
        if self.cgroup is not None and self.cgroup.oom_killed():
            self.stopped.memory = True
        return self.budget.verdict(exit_code, output, self.stopped)
