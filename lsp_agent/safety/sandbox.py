"""The kernel wall: every command runs in bubblewrap or under Landlock (Linux), or in seatbelt
(macOS).

Inside, the whole filesystem is read-only; the workspace is writable except the paths that run
code later (`safety.protected`: `.git`, rc files, editor folders, virtualenvs, nested
repositories, git's hooks folder …); `/tmp`, `/run` and `/dev/shm` are private and bounded in
size; the kernel's knobs under `/proc` (`/proc/sys`, `/proc/sysrq-trigger` …) are read-only, which
matters when the server runs as root; there is no network at all (a new network namespace: the
host's loopback is out of reach too); processes get a PID namespace of their own, a process limit
(`safety.limits`), and die with the server. A seccomp filter lets a command make only internet
and routing sockets (no unix socket, which a read-only mount does not stop from connecting; no
vsock, which reaches the hypervisor), refuses io_uring and the kernel keyrings. The environment
is rebuilt from an allowlist, so API keys and tokens never reach a command.

On Linux a protected path that does not exist yet still has to be guarded: a bind mount needs
something to mount on. `Sandbox.command()` makes an empty placeholder folder there for the life
of the command, mounts it read-only, and removes it when the last command of this process ends,
if it is still empty (commands see these empty folders; git does not list empty folders). A
protected path below the root could be moved away with its parent folder: every folder between
the root and it is bound onto itself, which makes it a mount point that cannot be renamed.
Seatbelt rules match paths, so it needs no such thing.

Where bubblewrap is not installed (or cannot make namespaces: no unprivileged user namespaces,
AppArmor's restriction on them), Linux ≥ 5.13 still has a wall: Landlock and the same seccomp
filter, applied by the command's first process to itself (`safety.landlock`). It needs no
package and no namespace; what it does not cover is said by `Availability.uncovered`.
`LSP_AGENT_BWRAP` names the bwrap to use; set it empty to use Landlock where bwrap is installed.

Every command also gets the limits of `safety.limits` (processes, memory, file size, disk), and
`Launch.limits` says afterwards which one stopped it.

`probe()` runs a real sandboxed `true` once per process and says which wall is in effect, and
why not when it is none.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from lsp_agent.errors import ToolError
from lsp_agent.safety import landlock, limits
from lsp_agent.safety.gitcheck import RepositoryFacts
from lsp_agent.safety.protected import PROTECTED_DIRS, PROTECTED_FILES, Guard, Scanner, guards
from lsp_agent.safety.seccomp import seccomp_fd, seccomp_filter

Kind = Literal["bwrap", "landlock", "seatbelt", "none"]

__all__ = ["PROTECTED_DIRS", "PROTECTED_FILES"]

TMP_BYTES = 1024 * 1024 * 1024
"""Size of the private `/tmp` (memory, on the host)."""
SMALL_TMPFS_BYTES = 64 * 1024 * 1024
"""Size of the private `/run` and `/dev/shm`."""
KERNEL_KNOBS = ("sys", "sysrq-trigger", "irq", "bus", "fs", "acpi")
"""Entries of `/proc` that change the host when written (as root): bound read-only."""

ENV_ALLOWLIST = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "COLORTERM",
    "NO_COLOR",
    "VIRTUAL_ENV",
)
"""Variables a command inherits (plus `LC_*`); every other one, keys and tokens included, is
dropped."""

PROBE_TIMEOUT_S = 15.0
BWRAP_ENV = "LSP_AGENT_BWRAP"
"""Names the bwrap to use; empty: use none (the Landlock wall, where the kernel has it)."""
DEFAULT_BUDGET = limits.Budget(memory_mb=4096, file_mb=1024, disk_mb=2048)
"""The limits of a command when the caller names none (the settings' defaults are these but
for the memory, which depends on the machine)."""

BWRAP_UNCOVERED = (
    "reads: a command reads whatever you can read (asked when it reads outside the workspace "
    "or a secret); writes inside the workspace by commands you allow skip the preview; files "
    "outside the protected list that other programs run later (a Makefile, tests) can be "
    "changed by such commands"
)
LANDLOCK_UNCOVERED = (
    BWRAP_UNCOVERED + "; and, without bubblewrap: no private /tmp (a private temporary folder "
    "is given as TMPDIR, /tmp itself is read-only), no new file or folder at the workspace root "
    "or in a folder that holds a protected path (existing files there can be changed), no "
    "loopback inside the sandbox, no chmod"
)
NO_PID_NAMESPACE = (
    "; no PID namespace could be made here (neither root nor unprivileged user namespaces): "
    "a command sees your other processes (though it cannot read their memory or "
    "environment), and a process it starts in a session of its own (setsid) can outlive it"
)

SIGNALS_UNCONFINED = (
    "; and this kernel's Landlock (ABI below 6) does not confine signals: a command can signal "
    "(stop, kill) your other processes that run as the same user"
)

_SEATBELT = "/usr/bin/sandbox-exec"


@dataclass(frozen=True)
class Availability:
    """Which sandbox runs commands here, and a sentence saying why (or why there is none)."""

    kind: Kind
    reason: str
    uncovered: str = ""
    """What this wall does not stop, in one sentence (for doctor and status)."""

    @property
    def sandboxed(self) -> bool:
        return self.kind != "none"


def command_env(
    environ: Mapping[str, str] | None = None, *, tmpdir: str = "/tmp"
) -> dict[str, str]:
    """The environment of a command: the allowlisted variables, and nothing secret."""
    source = os.environ if environ is None else environ
    env = {
        key: value
        for key, value in source.items()
        if key in ENV_ALLOWLIST or (key.startswith("LC_") and key.isascii())
    }
    env.setdefault("PATH", os.defpath)
    env["TMPDIR"] = tmpdir
    # Commands run without a terminal: a pager would wait for a key that never comes.
    env["PAGER"] = "cat"
    env["GIT_PAGER"] = "cat"
    # The workspace is a mount point inside the sandbox: let git find a repository above it.
    env["GIT_DISCOVERY_ACROSS_FILESYSTEM"] = "1"
    env["LSP_AGENT_SANDBOX"] = "1"
    return env


def shell() -> str:
    """The shell that runs the model's command strings."""
    for candidate in ("/bin/bash", "/usr/bin/bash", "/bin/sh"):
        if os.path.exists(candidate):
            return candidate
    return shutil.which("bash") or shutil.which("sh") or "/bin/sh"


def bwrap_args(
    root: Path,
    *,
    read_only: Sequence[Path] = (),
    readable: Sequence[Path] = (),
    above: Sequence[Path] = (),
    run_links: Mapping[str, str] | None = None,
    pinned: Sequence[Path] = (),
    sized: bool = True,
) -> list[str]:
    """bubblewrap's options for a sandbox over the workspace `root` (pure: no file is touched).

    `read_only` are paths inside the workspace mounted read-only over the writable workspace
    (they must exist); `readable` are folders outside it to show read-only even under the
    private `/tmp` (the spill folder); `above` are folders holding the workspace to show
    read-only under the private `/tmp` (the git repository the workspace is a folder of);
    `run_links` are symlinks of `/run` to keep (NixOS keeps its system in `/run/current-system`);
    `pinned` are folders of the workspace bound onto themselves, so that they cannot be renamed
    (they hold a protected path); `sized` bounds the private tmpfs mounts (bwrap ≥ 0.7).
    """

    def tmpfs(path: str, size: int) -> list[str]:
        return ["--size", str(size), "--tmpfs", path] if sized else ["--tmpfs", path]

    args = [
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        *tmpfs("/dev/shm", SMALL_TMPFS_BYTES),
        # Root may write the fresh /dev (a tmpfs in memory): nothing needs to.
        "--remount-ro", "/dev",
        "--proc", "/proc",
    ]  # fmt: skip
    for knob in KERNEL_KNOBS:
        if os.path.exists(f"/proc/{knob}"):
            args += ["--ro-bind", f"/proc/{knob}", f"/proc/{knob}"]
    args += [
        *tmpfs("/tmp", TMP_BYTES),
        # Sockets of other programs (docker, dbus, agents) live in /run: a read-only mount does
        # not stop connecting to a socket, hiding it does.
        *tmpfs("/run", SMALL_TMPFS_BYTES),
    ]
    for name, target in sorted((run_links or {}).items()):
        args += ["--symlink", target, f"/run/{name}"]
    for path in above:
        args += ["--ro-bind", str(path), str(path)]
    args += ["--bind", str(root), str(root)]
    for path in pinned:
        args += ["--bind", str(path), str(path)]
    for path in read_only:
        args += ["--ro-bind", str(path), str(path)]
    for path in readable:
        args += ["--ro-bind", str(path), str(path)]
    args += [
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        # No --new-session: its setsid() would take the sandbox out of the process group that
        # a timeout or a cancel kills, and a kill landing while bwrap sets up would then leave
        # the command running. The terminal it guards against (TIOCSTI) is out of reach anyway:
        # the command starts in a new session of its own (no controlling terminal), with
        # /dev/null as stdin and pipes as output.
        "--die-with-parent",
        "--cap-drop", "ALL",
        "--chdir", str(root),
    ]  # fmt: skip
    return args


def seatbelt_profile(root: Path, *, tmp: Path, found: Sequence[Path] = ()) -> str:
    """The sandbox-exec profile: deny by default; read anything; write only in the workspace
    (minus the protected paths, at any depth for the folders, and the protected paths `found`
    by looking) and a private temp folder; no network. `root` and `tmp` must be real paths
    (macOS' /tmp is /private/tmp)."""
    quoted_root = _sb_string(str(root))
    prefix = re.escape(str(root))
    guarded = [f'(subpath "{_sb_string(str(root / name))}")' for name in PROTECTED_DIRS]
    guarded += [f'(literal "{_sb_string(str(root / name))}")' for name in PROTECTED_FILES]
    guarded += [f'(subpath "{_sb_string(str(path))}")' for path in found]
    nested = "|".join(re.escape(name) for name in PROTECTED_DIRS)
    guarded.append(f'(regex #"^{_sb_regex(prefix)}/(.*/)?({nested})(/.*)?$")')
    not_guarded = "\n".join(f"      (require-not {rule})" for rule in guarded)
    return f"""(version 1)
(deny default)
(allow process-exec process-fork process-info* signal (target same-sandbox))
(allow file-read*)
(allow sysctl-read)
(allow mach-lookup)
(allow ipc-posix-shm* ipc-posix-sem)
(allow pseudo-tty)
(deny network*)
(allow file-write*
  (require-all
    (subpath "{quoted_root}")
{not_guarded}))
(allow file-write* (subpath "{_sb_string(str(tmp))}"))
(allow file-write-data
  (literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty")
  (literal "/dev/stdout") (literal "/dev/stderr"))
"""


@dataclass(frozen=True)
class Launch:
    """How to start a sandboxed command: its argv, and the descriptors it must inherit."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables to set on top of `command_env()` (a private temporary folder)."""
    enforcer: limits.Enforcer | None = None
    """The command's resource limits: watch them while it runs, then ask which stopped it."""


class Sandbox:
    """Runs commands of one workspace inside the wall this machine offers."""

    def __init__(self, root: Path, availability: Availability | None = None) -> None:
        self.root = root.resolve()
        """The workspace: the only writable place (minus the protected paths)."""
        self._availability = availability
        self.scanner = Scanner(self.root)
        """The workspace's folders as last seen (nested repositories, virtualenvs, secrets)."""
        self.repository = RepositoryFacts(self.root)
        """Whether the workspace's git history holds a secret (asked once per state)."""
        self._running = 0
        """Commands of this process inside the sandbox right now."""
        self._placeholders: list[Path] = []
        """Empty folders made as mount points, removed (deepest first) when no command runs."""
        self._stale_cgroups: list[limits.CommandCgroup] = []
        """Cgroups of ended commands whose last processes were still exiting: removed later."""
        self._lock = threading.Lock()
        """Guards the two above: commands are prepared in worker threads."""

    @property
    def availability(self) -> Availability:
        """The probed sandbox (the probe runs once per process)."""
        if self._availability is None:
            self._availability = probe()
        return self._availability

    @contextlib.asynccontextmanager
    async def running(
        self, argv: Sequence[str], *, spill_dir: Path, budget: limits.Budget = DEFAULT_BUDGET
    ) -> AsyncIterator[Launch]:
        """`command()` with its preparation and clean-up (a walk of the workspace, placeholders,
        a cgroup) in a worker thread, off the event loop."""
        stack = contextlib.ExitStack()
        preparing = asyncio.ensure_future(
            asyncio.to_thread(
                lambda: stack.enter_context(self.command(argv, spill_dir=spill_dir, budget=budget))
            )
        )
        try:
            launch = await asyncio.shield(preparing)
        except asyncio.CancelledError:
            # Cancelled while the thread prepares: let it finish, then undo what it made
            # (placeholders, a cgroup), or they would stay.
            with contextlib.suppress(Exception):
                await preparing
                await asyncio.to_thread(stack.close)
            raise
        try:
            yield launch
        finally:
            await asyncio.to_thread(stack.close)

    @contextlib.contextmanager
    def command(
        self, argv: Sequence[str], *, spill_dir: Path, budget: limits.Budget = DEFAULT_BUDGET
    ) -> Iterator[Launch]:
        """How to run `argv` in the sandbox, within `budget`, valid until the context ends.

        Raises `ToolError` when the workspace cannot be protected (a protected path is a
        symlink: a command could replace the link itself). With no sandbox, `argv` unchanged.
        """
        kind = self.availability.kind
        if kind == "none":
            yield Launch(list(argv))
            return
        if kind == "landlock":
            with self._landlocked(argv, budget) as launch:
                yield launch
            return
        if kind == "seatbelt":
            with tempfile.TemporaryDirectory(prefix="lsp-agent-tmp-") as tmp:
                private = Path(tmp).resolve()
                found = [g.path for g in guards(self.root, self.scanner) if g.path.exists()]
                profile = seatbelt_profile(self.root, tmp=private, found=found)
                yield Launch([_SEATBELT, "-p", profile, *argv], env={"TMPDIR": str(private)})
            return
        with self._lock:
            self._running += 1
        cgroup: limits.CommandCgroup | None = None
        try:
            read_only, pinned = self._protected_paths()
            args = bwrap_args(
                self.root,
                read_only=read_only,
                readable=[spill_dir, *self._own_install()],
                above=self._repository_above(),
                run_links=_run_links(),
                pinned=pinned,
                sized=_bwrap_sizes(),
            )
            cgroup = limits.CommandCgroup.make(budget.memory_mb) if limits.exempt() else None
            per_process = cgroup is None or cgroup.memory is None
            enforcer = limits.Enforcer(
                budget,
                limits.DiskWatch([self.root], budget.disk_mb),
                cgroup,
                limits.Stopped(address_space=per_process),
            )
            with seccomp_fd() as fd:
                seccomp = ["--seccomp", str(fd)] if fd is not None else []
                prefix = limits.limit_prefix(
                    shell(),
                    file_mb=budget.file_mb,
                    memory_mb=budget.memory_mb if per_process else None,
                )
                outer = [_bwrap() or "bwrap", *args, *seccomp, *prefix, *argv]
                yield Launch(
                    cgroup.wrap(outer) if cgroup is not None else outer,
                    (fd,) if fd is not None else (),
                    enforcer=enforcer,
                )
        finally:
            with self._lock:
                stale, self._stale_cgroups = self._stale_cgroups, []
            left = [old for old in [*stale, cgroup] if old is not None and not old.remove()]
            with self._lock:
                self._stale_cgroups.extend(left)
                self._running -= 1
                if self._running == 0:
                    self._remove_placeholders()

    @contextlib.contextmanager
    def _landlocked(self, argv: Sequence[str], budget: limits.Budget) -> Iterator[Launch]:
        """How to run `argv` under Landlock: a private temporary folder, the workspace granted
        entry by entry around its protected paths, the limits, the launcher."""
        protected = [guard.path for guard in guards(self.root, self.scanner)]
        writable, files = landlock.grants(self.root, protected)
        cgroup = limits.CommandCgroup.make(budget.memory_mb) if limits.exempt() else None
        per_process = cgroup is None or cgroup.memory is None
        with tempfile.TemporaryDirectory(prefix="lsp-agent-tmp-") as tmp:
            private = str(Path(tmp).resolve())
            program = seccomp_filter(platform.machine(), landlock=True)
            policy = landlock.Policy(
                writable=[private, *writable],
                files=[*files, *(d for d in landlock.DEVICES if os.path.exists(d))],
                file_bytes=budget.file_mb * 1024 * 1024,
                address_space=budget.memory_mb * 1024 * 1024 if per_process else None,
                # Without a user namespace RLIMIT_NPROC counts every process of the user.
                processes=None
                if limits.exempt()
                else limits.user_tasks(os.getuid()) + limits.MAX_PROCESSES,
                namespace_processes=None if limits.exempt() else limits.MAX_PROCESSES,
                seccomp=program.hex() if program is not None else None,
            )
            enforcer = limits.Enforcer(
                budget,
                limits.DiskWatch([self.root, Path(private)], budget.disk_mb),
                cgroup,
                limits.Stopped(address_space=per_process),
            )
            fd = os.memfd_create("lsp-agent-policy", 0)  # inherited by the launcher
            try:
                os.write(fd, policy.encode())
                os.lseek(fd, 0, os.SEEK_SET)
                outer = landlock.launcher(fd, argv)
                yield Launch(
                    cgroup.wrap(outer) if cgroup is not None else outer,
                    (fd,),
                    env={"TMPDIR": private},
                    enforcer=enforcer,
                )
            finally:
                os.close(fd)
                if cgroup is not None and not cgroup.remove():
                    with self._lock:
                        self._stale_cgroups.append(cgroup)

    def _protected_paths(self) -> tuple[list[Path], list[Path]]:
        """The protected paths to mount read-only (placeholders made for missing ones), and the
        folders to pin so that no protected path can be moved away with its parent."""
        paths: list[Path] = []
        for guard in guards(self.root, self.scanner):
            self._refuse_symlink(guard)
            missing = not guard.path.exists()
            if missing and (guard.must_exist or not self._make_placeholder(guard.path)):
                continue
            paths.append(guard.path)
        pinned: set[Path] = set()
        for path in paths:
            for parent in path.parents:
                if parent == self.root or not parent.is_relative_to(self.root):
                    break
                pinned.add(parent)
        return paths, sorted(pinned, key=lambda p: (len(p.parts), str(p)))

    def _refuse_symlink(self, guard: Guard) -> None:
        """A protected path, or a folder on the way to it, that is a symlink cannot be kept:
        a command could replace the link itself."""
        current = self.root
        for part in guard.path.relative_to(self.root).parts:
            current = current / part
            if current.is_symlink():
                name = current.relative_to(self.root)
                kind = "folder" if guard.folder or current != guard.path else "file"
                raise ToolError(
                    f"not run: {name} in the workspace is a symlink, and the sandbox cannot stop "
                    "a command from replacing it; ask the user to run this command, or to make "
                    f"{name} a regular {kind}",
                    reason="sandbox",
                )

    def _own_install(self) -> list[Path]:
        """lsp-agent's own Python environment, when the private /tmp or /run would hide it: the
        tools it puts on PATH (`rg`) and the interpreter tests run must stay reachable."""
        shown: list[Path] = []
        for prefix in {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}:
            hidden = any(prefix.is_relative_to(p) for p in (Path("/tmp"), Path("/run")))
            if hidden and not prefix.is_relative_to(self.root) and prefix.is_dir():
                shown.append(prefix)
        return sorted(shown)

    def _repository_above(self) -> list[Path]:
        """The git repository the workspace is a folder of, when the private /tmp or /run would
        hide it (elsewhere the read-only root shows it already)."""
        for parent in self.root.parents:
            if (parent / ".git").exists():
                hidden = any(parent.is_relative_to(p) for p in (Path("/tmp"), Path("/run")))
                return [parent] if hidden and parent not in (Path("/tmp"), Path("/run")) else []
        return []

    def _make_placeholder(self, path: Path) -> bool:
        # A folder, even where a file is expected: git shows no empty folder in its status,
        # and neither a shell nor git runs a folder. Missing parents are made too (a submodule
        # not checked out), and removed with it.
        missing = [path]
        missing += [p for p in path.parents if p.is_relative_to(self.root) and not p.exists()]
        made: list[Path] = []
        for folder in reversed(missing):
            try:
                folder.mkdir()
            except FileExistsError:
                continue  # made meanwhile (by the user, or by us for another command)
            except OSError:
                # The workspace is not writable by us: not by a command either.
                break
            made.append(folder)
        with self._lock:
            self._placeholders.extend(made)
        return path.is_dir() and not path.is_symlink()

    def _remove_placeholders(self) -> None:
        # Only when no command of ours runs: unlinking a mount point of a live sandbox would
        # detach its read-only mount. A placeholder someone wrote into is theirs now: kept.
        made, self._placeholders = self._placeholders, []
        for path in sorted(set(made), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                if path.is_symlink():
                    continue
                path.rmdir()


@functools.cache
def probe() -> Availability:
    """Which sandbox works on this machine, found by running a real sandboxed `true`: bwrap
    first, then Landlock; on macOS seatbelt.

    Cached for the life of the process: the answer does not change while it runs.
    """
    system = platform.system()
    if system == "Darwin":
        return _probe_seatbelt()
    if system != "Linux":
        return Availability("none", f"no sandbox for {system}: commands run unsandboxed")
    bwrap = _bwrap()
    if bwrap is None:
        why = (
            f"{BWRAP_ENV} names no bwrap"
            if os.environ.get(BWRAP_ENV) is not None
            else "bwrap is not installed (install the bubblewrap package)"
        )
        return _probe_landlock(why)
    found = _probe_bwrap(bwrap)
    return found if found.sandboxed else _probe_landlock(found.reason.removesuffix(UNSANDBOXED))


UNSANDBOXED = ": commands run unsandboxed"


def _probe_bwrap(bwrap: str) -> Availability:
    # The same mounts as a real command, over a folder that exists already (nothing to clean up
    # if the process is stopped meanwhile).
    root = Path(tempfile.gettempdir()).resolve()
    args = bwrap_args(root, readable=[root], sized=_bwrap_sizes())
    with seccomp_fd() as fd:
        seccomp = ["--seccomp", str(fd)] if fd is not None else []
        limit = limits.limit_prefix("/bin/sh")
        argv = [bwrap, *args, *seccomp, *limit, "/bin/sh", "-c", "exit 0"]
        result = _run_probe(argv, (fd,) if fd is not None else ())
    if isinstance(result, str):
        return Availability("none", f"bwrap could not start ({result}){UNSANDBOXED}")
    if result.returncode != 0:
        detail = _first_line(result.stderr) or f"exit code {result.returncode}"
        hint = ""
        if "namespace" in detail.lower() or "permission" in detail.lower():
            hint = (
                "; user namespaces are not permitted here (see kernel.unprivileged_userns_clone"
                " or AppArmor's apparmor_restrict_unprivileged_userns)"
            )
        return Availability(
            "none", f"bwrap cannot make a sandbox here: {detail}{hint}{UNSANDBOXED}"
        )
    version = _first_line(_run_text([bwrap, "--version"])) or "bwrap"
    return Availability(
        "bwrap",
        f"{version}: read-only filesystem, writable workspace (protected paths read-only), "
        f"no network, private /tmp, own PID namespace, {_processes()}, {_memory()}",
        BWRAP_UNCOVERED,
    )


@functools.cache
def probe_landlock(why_not_bwrap: str = "") -> Availability:
    """The Landlock wall, found by running a real confined `true` (cached); `why_not_bwrap`
    says why bubblewrap is not the wall (empty: it was not asked)."""
    return _probe_landlock(why_not_bwrap)


def _probe_landlock(why_not_bwrap: str) -> Availability:
    version = landlock.abi()
    prefix = f"{why_not_bwrap}; " if why_not_bwrap else ""
    if version < 1:
        return Availability(
            "none",
            f"{prefix}and this kernel has no Landlock (Linux 5.13 or later, with landlock "
            f"among its security modules){UNSANDBOXED}",
        )
    with tempfile.TemporaryDirectory(prefix="lsp-agent-probe-") as tmp:
        box = Sandbox(Path(tmp), Availability("landlock", "probe"))
        with box.command(["/bin/sh", "-c", "echo $$"], spill_dir=Path(tmp)) as launch:
            result = _run_probe(launch.argv, launch.pass_fds)
    if isinstance(result, str) or result.returncode != 0:
        detail = result if isinstance(result, str) else _first_line(result.stderr)
        return Availability("none", f"{prefix}and Landlock could not start ({detail}){UNSANDBOXED}")
    own_pids = result.stdout.strip() == "1"  # the command is the first of its PID namespace
    network = (
        "no TCP connection or bind, no internet socket"
        if version >= 4
        else "no internet socket (seccomp)"
    )
    signals = (
        "no signal to a process outside the command" if version >= 6 else "signals not confined"
    )
    pids = "own PID namespace, " if own_pids else ""
    return Availability(
        "landlock",
        f"{prefix}Landlock ABI {version} and seccomp: writes only in the workspace (protected "
        f"paths excluded) and a private temporary folder, {network}, {signals}, no "
        f"capability, {pids}{_processes()}, {_memory()}",
        landlock_uncovered(version, own_pids),
    )


def landlock_uncovered(version: int, own_pids: bool) -> str:
    """What the Landlock wall of ABI `version` does not stop, with or without a PID namespace."""
    if own_pids:
        return LANDLOCK_UNCOVERED  # the namespace keeps its signals in, whatever the ABI
    return LANDLOCK_UNCOVERED + NO_PID_NAMESPACE + ("" if version >= 6 else SIGNALS_UNCONFINED)


def _processes() -> str:
    if not limits.exempt():
        return f"at most {limits.MAX_PROCESSES} processes"
    if limits.cgroup_parent() is not None:
        return f"at most {limits.MAX_PROCESSES} processes (a pids cgroup: running as root)"
    return "NO process limit (running as root, and no pids cgroup can be made here)"


def _memory() -> str:
    if limits.memory_cgroup():
        return "memory bounded per command (a memory cgroup)"
    return "memory bounded per process (an address-space limit)"


def _probe_seatbelt() -> Availability:
    if not os.path.exists(_SEATBELT):
        return Availability("none", "sandbox-exec is missing: commands run unsandboxed")
    with tempfile.TemporaryDirectory(prefix="lsp-agent-probe-") as tmp:
        root = Path(tmp).resolve()
        profile = seatbelt_profile(root, tmp=root)
        result = _run_probe([_SEATBELT, "-p", profile, "/usr/bin/true"])
    if isinstance(result, str) or result.returncode != 0:
        detail = result if isinstance(result, str) else _first_line(result.stderr)
        return Availability(
            "none", f"sandbox-exec cannot run here: {detail}; commands run unsandboxed"
        )
    return Availability(
        "seatbelt",
        "sandbox-exec: writes only in the workspace (protected paths excluded), no network",
    )


def _run_probe(
    argv: list[str], pass_fds: tuple[int, ...] = ()
) -> subprocess.CompletedProcess[str] | str:
    try:
        return subprocess.run(
            argv,
            pass_fds=pass_fds,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
            env=command_env(),
        )
    except (OSError, subprocess.SubprocessError) as error:
        return str(error)


def _run_text(argv: list[str]) -> str:
    result = _run_probe(argv)
    return result if isinstance(result, str) else result.stdout or result.stderr


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0].strip() if text.strip() else ""


def _bwrap() -> str | None:
    """The bwrap to use: the one `LSP_AGENT_BWRAP` names (none when it is empty), else the
    one on PATH."""
    named = os.environ.get(BWRAP_ENV)
    if named is None:
        return shutil.which("bwrap")
    if not named.strip() or named.strip().lower() == "none":
        return None
    return shutil.which(named.strip()) or None


@functools.cache
def _bwrap_sizes() -> bool:
    """Whether this bwrap takes `--size` for a tmpfs (0.7 and later)."""
    return "--size" in _run_text([_bwrap() or "bwrap", "--help"])


def _run_links() -> dict[str, str]:
    """Symlinks directly under /run, to recreate inside the private /run."""
    links: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/run"):
            if entry.is_symlink():
                with contextlib.suppress(OSError):
                    links[entry.name] = os.readlink(entry.path)
    return links


def _sb_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _sb_regex(pattern: str) -> str:
    # Inside #"…" only a double quote needs escaping for the profile reader.
    return pattern.replace('"', '\\"')
