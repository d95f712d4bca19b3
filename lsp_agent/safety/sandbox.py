"""The kernel wall (DESIGN §6.2): every command runs in bubblewrap (Linux) or seatbelt (macOS).

Inside, the whole filesystem is read-only; the workspace is writable except the paths that run
code later (`.git`, rc files, editor folders: `PROTECTED_DIRS`, `PROTECTED_FILES`); `/tmp` and
`/run` are private; there is no network at all (a new network namespace: the host's loopback is out
of reach too); processes get a PID namespace of their own and die with the server. The environment
is rebuilt from an allowlist, so API keys and tokens never reach a command.

On Linux a protected path that does not exist yet still has to be guarded: a bind mount needs
something to mount on. `Sandbox.command()` makes an empty placeholder folder there for the life
of the command, mounts it read-only, and removes it when the last command of this process ends,
if it is still empty (commands see these empty folders; git does not list empty folders).
Seatbelt rules match paths, so it needs no such thing.

`probe()` runs a real sandboxed `true` once per process and says which wall is in effect, and
why not when it is none.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from lsp_agent.errors import ToolError

Kind = Literal["bwrap", "seatbelt", "none"]

PROTECTED_DIRS = (".git", ".vscode", ".idea")
"""Folders of the workspace no command may write: git's hooks and config, editor tasks."""
PROTECTED_FILES = (
    ".gitmodules",
    ".gitconfig",
    ".envrc",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
)
"""Files of the workspace that something runs later (shells, git, direnv): read-only inside."""

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

_SEATBELT = "/usr/bin/sandbox-exec"


@dataclass(frozen=True)
class Availability:
    """Which sandbox runs commands here, and a sentence saying why (or why there is none)."""

    kind: Kind
    reason: str

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
) -> list[str]:
    """bubblewrap's options for a sandbox over the workspace `root` (pure: no file is touched).

    `read_only` are paths inside the workspace mounted read-only over the writable workspace
    (they must exist); `readable` are folders outside it to show read-only even under the
    private `/tmp` (the spill folder); `above` are folders holding the workspace to show
    read-only under the private `/tmp` (the git repository the workspace is a folder of);
    `run_links` are symlinks of `/run` to keep (NixOS keeps its system in `/run/current-system`).
    """
    args = [
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        # Sockets of other programs (docker, dbus, agents) live in /run: a read-only mount does
        # not stop connecting to a socket, hiding it does.
        "--tmpfs", "/run",
    ]  # fmt: skip
    for name, target in sorted((run_links or {}).items()):
        args += ["--symlink", target, f"/run/{name}"]
    for path in above:
        args += ["--ro-bind", str(path), str(path)]
    args += ["--bind", str(root), str(root)]
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


def seatbelt_profile(root: Path, *, tmp: Path) -> str:
    """The sandbox-exec profile: deny by default; read anything; write only in the workspace
    (minus the protected paths, at any depth for the folders) and a private temp folder; no
    network. `root` and `tmp` must be real paths (macOS' /tmp is /private/tmp)."""
    quoted_root = _sb_string(str(root))
    prefix = re.escape(str(root))
    guarded = [f'(subpath "{_sb_string(str(root / name))}")' for name in PROTECTED_DIRS]
    guarded += [f'(literal "{_sb_string(str(root / name))}")' for name in PROTECTED_FILES]
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
    """Variables to set on top of `command_env()` (seatbelt's private temp folder)."""


class Sandbox:
    """Runs commands of one workspace inside the wall this machine offers."""

    def __init__(self, root: Path, availability: Availability | None = None) -> None:
        self.root = root.resolve()
        """The workspace: the only writable place (minus the protected paths)."""
        self._availability = availability
        self._running = 0
        """Commands of this process inside the sandbox right now."""
        self._placeholders: set[Path] = set()
        """Empty files and folders made as mount points, removed when no command runs."""

    @property
    def availability(self) -> Availability:
        """The probed sandbox (the probe runs once per process)."""
        if self._availability is None:
            self._availability = probe()
        return self._availability

    @contextlib.contextmanager
    def command(self, argv: Sequence[str], *, spill_dir: Path) -> Iterator[Launch]:
        """How to run `argv` in the sandbox, valid until the context ends.

        Raises `ToolError` when the workspace cannot be protected (a protected path is a
        symlink: a command could replace the link itself). With no sandbox, `argv` unchanged.
        """
        kind = self.availability.kind
        if kind == "none":
            yield Launch(list(argv))
            return
        if kind == "seatbelt":
            with tempfile.TemporaryDirectory(prefix="lsp-agent-tmp-") as tmp:
                private = Path(tmp).resolve()
                profile = seatbelt_profile(self.root, tmp=private)
                yield Launch([_SEATBELT, "-p", profile, *argv], env={"TMPDIR": str(private)})
            return
        self._running += 1
        try:
            read_only = self._protected_paths()
            args = bwrap_args(
                self.root,
                read_only=read_only,
                readable=[spill_dir, *self._own_install()],
                above=self._repository_above(),
                run_links=_run_links(),
            )
            with _seccomp_fd() as fd:
                seccomp = ["--seccomp", str(fd)] if fd is not None else []
                yield Launch([_bwrap(), *args, *seccomp, *argv], (fd,) if fd is not None else ())
        finally:
            self._running -= 1
            if self._running == 0:
                self._remove_placeholders()

    def _protected_paths(self) -> list[Path]:
        """The protected paths to mount read-only, making placeholders for missing ones."""
        paths: list[Path] = []
        names = [(name, True) for name in PROTECTED_DIRS]
        names += [(name, False) for name in PROTECTED_FILES]
        for name, is_dir in names:
            path = self.root / name
            if path.is_symlink():
                raise ToolError(
                    f"not run: {name} in the workspace is a symlink, and the sandbox cannot stop "
                    "a command from replacing it; ask the user to run this command, or to make "
                    f"{name} a regular {'folder' if is_dir else 'file'}",
                    reason="sandbox",
                )
            if not path.exists() and not self._make_placeholder(path):
                continue
            paths.append(path)
        paths.extend(self._git_dir_inside())
        return paths

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

    def _git_dir_inside(self) -> list[Path]:
        """The real git folder when `.git` is a file pointing inside the workspace."""
        dot_git = self.root / ".git"
        if not dot_git.is_file():
            return []
        try:
            first = dot_git.read_text(encoding="utf-8", errors="replace").splitlines()[0]
        except (OSError, IndexError):
            return []
        if not first.startswith("gitdir:"):
            return []
        target = (self.root / first.removeprefix("gitdir:").strip()).resolve()
        if target.is_relative_to(self.root) and target.exists() and target != self.root:
            return [target]
        return []

    def _make_placeholder(self, path: Path) -> bool:
        # A folder, even where a file is expected: git shows no empty folder in its status,
        # and neither a shell nor git runs a folder.
        try:
            path.mkdir()
        except FileExistsError:
            return True  # made meanwhile (by the user, or by us for another command)
        except OSError:
            # The workspace is not writable by us: not by a command either.
            return False
        self._placeholders.add(path)
        return True

    def _remove_placeholders(self) -> None:
        # Only when no command of ours runs: unlinking a mount point of a live sandbox would
        # detach its read-only mount. A placeholder someone wrote into is theirs now: kept.
        for path in list(self._placeholders):
            self._placeholders.discard(path)
            with contextlib.suppress(OSError):
                if path.is_symlink():
                    continue
                path.rmdir()


@functools.cache
def probe() -> Availability:
    """Which sandbox works on this machine, found by running a real sandboxed `true`.

    Cached for the life of the process: the answer does not change while it runs.
    """
    system = platform.system()
    if system == "Darwin":
        return _probe_seatbelt()
    if system != "Linux":
        return Availability("none", f"no sandbox for {system}: commands run unsandboxed")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Availability(
            "none",
            "bwrap is not installed (install the bubblewrap package): commands run unsandboxed",
        )
    # The same mounts as a real command, over a folder that exists already (nothing to clean up
    # if the process is stopped meanwhile).
    root = Path(tempfile.gettempdir()).resolve()
    args = bwrap_args(root, readable=[root])
    with _seccomp_fd() as fd:
        seccomp = ["--seccomp", str(fd)] if fd is not None else []
        argv = [bwrap, *args, *seccomp, "/bin/sh", "-c", "exit 0"]
        result = _run_probe(argv, (fd,) if fd is not None else ())
    if isinstance(result, str):
        return Availability("none", f"bwrap could not start ({result}): commands run unsandboxed")
    if result.returncode != 0:
        detail = _first_line(result.stderr) or f"exit code {result.returncode}"
        hint = ""
        if "namespace" in detail.lower() or "permission" in detail.lower():
            hint = (
                "; user namespaces are not permitted here (see kernel.unprivileged_userns_clone"
                " or AppArmor's apparmor_restrict_unprivileged_userns)"
            )
        return Availability(
            "none", f"bwrap cannot make a sandbox here: {detail}{hint}; commands run unsandboxed"
        )
    version = _first_line(_run_text([bwrap, "--version"])) or "bwrap"
    return Availability(
        "bwrap",
        f"{version}: read-only filesystem, writable workspace (protected paths read-only), "
        "no network, private /tmp, own PID namespace",
    )


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


# seccomp: a read-only mount does not stop connect() to a unix socket file (an ssh or gpg agent,
# a docker socket in a home folder), so making AF_UNIX sockets is refused outright. socketpair()
# still works (it reaches nothing), and io_uring, which could make sockets behind seccomp's back,
# is refused too.
_SECCOMP_ALLOW = 0x7FFF0000
_SECCOMP_ERRNO = 0x00050000
_EACCES = 13
_AF_UNIX = 1
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_AND_K = 0x54
_BPF_RET_K = 0x06
# machine → (audit arch, syscall number mask, socket, io_uring_setup)
_SYSCALLS = {
    "x86_64": (0xC000003E, 0xBFFFFFFF, 41, 425),  # the mask folds x32 numbers onto x86_64's
    "aarch64": (0xC00000B7, 0xFFFFFFFF, 198, 425),
}


def seccomp_filter(machine: str) -> bytes | None:
    """The classic-BPF seccomp program bwrap installs, for `platform.machine()`; None on
    machines whose syscall numbers are not known here (no filter there)."""
    known = _SYSCALLS.get(machine)
    if known is None or sys.byteorder != "little":
        return None
    arch, mask, socket_nr, io_uring_nr = known
    deny = _SECCOMP_ERRNO | _EACCES
    program = [
        (_BPF_LD_W_ABS, 0, 0, 4),  # 0: arch
        (_BPF_JEQ_K, 0, 8, arch),  # 1: another ABI (32-bit programs) → 10: refused
        (_BPF_LD_W_ABS, 0, 0, 0),  # 2: syscall number
        (_BPF_AND_K, 0, 0, mask),  # 3
        (_BPF_JEQ_K, 5, 0, io_uring_nr),  # 4: io_uring_setup → 10: refused
        (_BPF_JEQ_K, 0, 3, socket_nr),  # 5: not socket() → 9: allowed
        (_BPF_LD_W_ABS, 0, 0, 16),  # 6: first argument, low word: the family
        (_BPF_JEQ_K, 2, 0, _AF_UNIX),  # 7: AF_UNIX → 10: refused
        (_BPF_RET_K, 0, 0, _SECCOMP_ALLOW),  # 8
        (_BPF_RET_K, 0, 0, _SECCOMP_ALLOW),  # 9
        (_BPF_RET_K, 0, 0, deny),  # 10
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)


@contextlib.contextmanager
def _seccomp_fd() -> Iterator[int | None]:
    """A descriptor holding the seccomp program, for bwrap's `--seccomp FD`."""
    program = seccomp_filter(platform.machine())
    if program is None or not hasattr(os, "memfd_create"):
        yield None
        return
    fd = os.memfd_create("lsp-agent-seccomp", 0)  # not close-on-exec: bwrap reads it
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0].strip() if text.strip() else ""


def _bwrap() -> str:
    return shutil.which("bwrap") or "bwrap"


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
