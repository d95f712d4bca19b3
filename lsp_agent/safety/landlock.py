"""The kernel wall where bubblewrap is not there: Landlock (Linux ≥ 5.13) and seccomp, applied
by the command's own first process before it runs the command.

`launcher(FD, ARGV)` is the argv of a fresh interpreter that reads a `Policy` (JSON) from the
inherited descriptor FD and asks to be killed with the server. Where it may (root, or a user
namespace of its own where unprivileged ones are allowed), it makes a PID namespace and forks
the command as its first process: when that process ends, the kernel ends every process the
command left behind, even one that left its session (`setsid`); the launcher waits and exits
with its status. The command's process then, in this order: sets the resource limits, drops
every capability (a root server's command keeps none, and the bounding set is emptied so that
no program regains them), sets `no_new_privs`, restricts itself with a Landlock ruleset,
installs the seccomp filter, and executes ARGV. Everything it starts inherits all of it;
nothing can lift it.

The ruleset handles the rights that change files (write, truncate, make, remove, rename,
link); reading and running stay allowed everywhere, as under bubblewrap. Writes are granted
under the private temporary folder, a few devices (`/dev/null` …), and the workspace minus its
protected paths. Landlock rules add rights to a whole folder below them and cannot take one
back for a path inside it, so the workspace is granted entry by entry (`grants`): every entry of
a folder that holds a protected path is granted on its own, except the protected one, and the
folder itself gets no right. In such folders (the workspace root among them) a command can
change the files that exist, but not make, remove or rename an entry. With Landlock ABI ≥ 4 the
command can neither connect nor bind a TCP socket; the seccomp filter refuses internet sockets
whatever the ABI (there is no network namespace around the command). With ABI ≥ 6 it cannot
signal a process outside its own, nor reach an abstract unix socket.

The launcher is this file's text, read once when the server imports it and handed to
`python -I -S -c`: the interpreter reads no file of the workspace (which may hold a copy of
lsp-agent that a command changed), no environment variable and no site packages; the module
therefore imports the standard library only, and the seccomp program comes in the policy.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import stat
import struct
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
"""Landlock's system calls: the same numbers on every architecture."""
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PDEATHSIG = 1
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAPABILITY_VERSION_3 = 0x20080522
_CAPSET = {"x86_64": 126, "aarch64": 91}

WRITE_FILE = 1 << 1
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13
TRUNCATE = 1 << 14
NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
"""Devices a command may write (they keep nothing)."""


def abi() -> int:
    """The Landlock ABI version of the running kernel; 0 when Landlock is not there."""
    if sys.platform != "linux":
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(int(version), 0)


def write_rights(version: int, *, folder: bool) -> int:
    """The rights that change files, as this ABI knows them (a file takes only its own)."""
    rights = WRITE_FILE | (TRUNCATE if version >= 3 else 0)
    if folder:
        rights |= REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK
        rights |= MAKE_FIFO | MAKE_BLOCK | MAKE_SYM | (REFER if version >= 2 else 0)
    return rights


@dataclass
class Policy:
    """What the command's first process applies to itself before running the command."""

    writable: list[str] = field(default_factory=list)
    """Folders (and files) where every write right is granted."""
    files: list[str] = field(default_factory=list)
    """Files that may be written and truncated, not removed or renamed."""
    file_bytes: int | None = None
    """RLIMIT_FSIZE."""
    address_space: int | None = None
    """RLIMIT_AS (when no memory cgroup bounds the command)."""
    processes: int | None = None
    """RLIMIT_NPROC: the user's tasks now plus the command's allowance (not for root)."""
    namespace_processes: int | None = None
    """RLIMIT_NPROC inside a user namespace of the command's own, where the kernel counts the
    namespace's processes only (not for root)."""
    seccomp: str | None = None
    """The seccomp program (hex), installed last; None where none is known."""

    def encode(self) -> bytes:
        return json.dumps(asdict(self)).encode()


def grants(root: Path, protected: Iterable[Path]) -> tuple[list[str], list[str]]:
    """The workspace's writable folders and files: everything below `root` except the
    `protected` paths, granted entry by entry in every folder that holds one (the root
    included), so that a grant never covers a protected path. Symlinks are granted nothing
    (what they point to is granted where it is)."""
    guarded = {Path(os.path.normpath(path)) for path in protected}
    split = {root}
    for path in guarded:
        split.update(parent for parent in path.parents if parent.is_relative_to(root))
    folders: list[Path] = []
    files: list[str] = []
    pending = [root]
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            path = Path(entry.path)
            if path in guarded:
                continue
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                (pending if path in split else folders).append(path)
            elif stat.S_ISREG(mode) and path not in split:
                files.append(str(path))
    return [str(path) for path in folders], files


def apply(policy: Policy, *, user_namespace: bool = False) -> None:
    """Confine this process as `policy` says (the order matters: limits and capabilities
    first, while they may still be changed; seccomp last, which refuses what came before)."""
    import resource  # POSIX only: the server imports this module on every system

    libc = ctypes.CDLL(None, use_errno=True)
    if policy.file_bytes is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (policy.file_bytes, policy.file_bytes))
    if policy.address_space is not None:
        resource.setrlimit(resource.RLIMIT_AS, (policy.address_space, policy.address_space))
    processes = policy.namespace_processes if user_namespace else policy.processes
    if processes is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    _drop_capabilities(libc)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail(libc, "no_new_privs")
    _restrict(libc, policy)
    program = bytes.fromhex(policy.seccomp) if policy.seccomp is not None else None
    if program is not None:
        code = ctypes.create_string_buffer(program, len(program))
        fprog = struct.pack("HxxxxxxP", len(program) // 8, ctypes.addressof(code))
        buffer = ctypes.create_string_buffer(fprog, len(fprog))
        if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, buffer, 0, 0) != 0:
            _fail(libc, "seccomp")


def _restrict(libc: ctypes.CDLL, policy: Policy) -> None:
    version = abi()
    if version < 1:
        raise OSError("Landlock is not available in this kernel")
    handled_fs = write_rights(version, folder=True)
    handled_net = NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0
    attr = struct.pack("QQQ", handled_fs, handled_net, scoped)
    size = 8 if version < 4 else 16 if version < 6 else 24
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        _fail(libc, "landlock_create_ruleset")
    try:
        for paths, folder in ((policy.writable, True), (policy.files, False)):
            for path in paths:
                _add_rule(libc, ruleset, path, version, folder)
        if libc.syscall(_RESTRICT_SELF, ruleset, 0) != 0:
            _fail(libc, "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: str, version: int, folder: bool) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return  # gone meanwhile: nothing to grant
    try:
        is_folder = stat.S_ISDIR(os.fstat(fd).st_mode)
        if stat.S_ISLNK(os.fstat(fd).st_mode):
            return
        rights = write_rights(version, folder=folder and is_folder)
        attr = struct.pack("=Qi", rights, fd)
        if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.c_char_p(attr), 0) != 0:
            _fail(libc, f"landlock_add_rule {path}")
    finally:
        os.close(fd)


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets: a root
    command (or one in a user namespace of its own) keeps no capability, and no program it
    runs (setuid or not) gets one back."""
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text().strip())
    except (OSError, ValueError):
        last = 63
    for capability in range(last + 1):
        libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = struct.pack("Ii", _CAPABILITY_VERSION_3, 0)
    data = bytes(24)  # two {effective, permitted, inheritable} words, all empty
    number = _CAPSET.get(platform.machine())
    done = (
        libc.syscall(number, ctypes.c_char_p(header), ctypes.c_char_p(data))
        if number is not None
        else libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(data))
    )
    if done != 0:
        _fail(libc, "capset")


def _fail(libc: ctypes.CDLL, what: str) -> None:
    error = ctypes.get_errno()
    raise OSError(error, f"{what}: {os.strerror(error)}")


_SOURCE = Path(__file__).read_text(encoding="utf-8") if "__file__" in globals() else ""
"""This module's text as the server imported it (see the module's docstring); empty in the
launcher itself, which runs from that text."""


def launcher(fd: int, argv: Sequence[str]) -> list[str]:
    """The argv that confines itself with the policy in the inherited `fd`, then runs `argv`."""
    return [sys.executable, "-I", "-S", "-c", _SOURCE, str(fd), "--", *argv]


def _pid_namespace(libc: ctypes.CDLL) -> tuple[bool, bool]:
    """Make a PID namespace for the next child: `(made, in a user namespace of its own)`. Root
    may make one; an unprivileged user needs a user namespace first, with their own uid and gid
    mapped to themselves (as bubblewrap does)."""
    if os.geteuid() == 0:
        return libc.unshare(_CLONE_NEWPID) == 0, False
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWPID) != 0:
        return False, False
    try:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    except OSError:
        return False, True  # in a user namespace, unmapped: still no PID namespace to rely on
    return True, True


def _wait(child: int) -> int:
    """The exit status of `child`, as a shell reports it (128 + the signal that ended it)."""
    while True:
        try:
            _, status = os.waitpid(child, 0)
        except InterruptedError:
            continue
        if os.WIFSIGNALED(status):
            return 128 + os.WTERMSIG(status)
        return os.WEXITSTATUS(status)


def main(argv: Sequence[str]) -> int:
    """`FD -- ARGV…`: confine this process with the policy read from FD, then run ARGV."""
    if len(argv) < 3 or argv[1] != "--":
        print("lsp-agent: usage: landlock FD -- ARGV…", file=sys.stderr)
        return 126
    fd = int(argv[0])
    with os.fdopen(fd, "rb") as handle:
        policy = Policy(**json.loads(handle.read()))
    libc = ctypes.CDLL(None, use_errno=True)
    # Killed with the server, as bubblewrap's --die-with-parent.
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    namespace, user_namespace = _pid_namespace(libc)
    if namespace:
        child = os.fork()
        if child != 0:
            return _wait(child)
        # The namespace's first process: it dies with the launcher, and when it ends the
        # kernel ends every other process of the namespace.
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    try:
        apply(policy, user_namespace=user_namespace)
    except OSError as error:
        print(f"lsp-agent: the sandbox could not be set up ({error}): not run", file=sys.stderr)
        return 126
    command = list(argv[2:])
    try:
        os.execvp(command[0], command)
    except OSError as error:
        print(f"lsp-agent: {command[0]}: {error.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
