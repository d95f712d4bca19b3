"""The seccomp filter bwrap installs under every command (Linux).

A read-only mount does not stop connect() to a unix socket file (an ssh or gpg
agent, a docker socket in a home folder), so socket() may make only internet sockets and
netlink routing sockets (NETLINK_ROUTE: getaddrinfo and `ip` use it, and it sees only the
sandbox's own network namespace). Everything else is refused: AF_UNIX, AF_VSOCK (it reaches
the hypervisor or the host of a virtual machine, and no network namespace stops it), the other
netlink families (audit, uevents, …), packet sockets. socketpair() still works (it reaches
nothing). io_uring, which could make sockets behind seccomp's back, and the kernel keyrings
(root's keyring is shared by the whole host) are refused too, as are 32-bit programs, whose
system call numbers differ.

Under the Landlock wall (`landlock=True`) there is no network namespace and no read-only mount:

- an internet socket would reach the host's network and loopback: refused too (netlink routing
  sockets stay: they read the host's routes, and changing them takes a capability the command
  does not have);
- Landlock does not confine a file's metadata, and every file is readable: `chmod`, `chown`,
  extended attributes and setting times by path are refused everywhere (a root command could
  otherwise make `/etc/shadow` world-readable); setting times through an open descriptor stays
  (`touch` of a file the command could open for writing: `utimensat` with no path);
- Landlock before ABI 3 (Linux 6.2) does not confine `truncate(2)` by path: a command could
  empty any file the user can write. It is refused everywhere, whatever the ABI (tools truncate
  through a descriptor they opened, `ftruncate`, which Landlock's write rights govern).
"""

from __future__ import annotations

import contextlib
import os
import platform
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass

_SECCOMP_ALLOW = 0x7FFF0000
_SECCOMP_ERRNO = 0x00050000
_EACCES = 13
_AF_INET = 2
_AF_INET6 = 10
_AF_NETLINK = 16
_NETLINK_ROUTE = 0
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_AND_K = 0x54
_BPF_RET_K = 0x06


@dataclass(frozen=True)
class _Calls:
    """One machine's numbers: its audit arch, the syscall-number mask, and the calls."""

    arch: int
    mask: int
    socket: int
    io_uring_setup: int
    add_key: int
    request_key: int
    keyctl: int
    utimensat: int
    metadata: tuple[int, ...]
    """chmod, chown, xattr and time-setting calls (by path or descriptor), utimensat aside, and
    truncate by path."""


_SYSCALLS = {
    # The x86_64 mask folds x32 numbers (bit 30) onto x86_64's.
    "x86_64": _Calls(
        0xC000003E, 0xBFFFFFFF, 41, 425, 248, 249, 250, 280,
        # chmod fchmod chown fchown lchown utime utimes futimesat fchownat fchmodat fchmodat2,
        # setxattr lsetxattr fsetxattr removexattr lremovexattr fremovexattr, setxattrat
        # removexattrat, truncate
        (90, 91, 92, 93, 94, 132, 235, 261, 260, 268, 452, 188, 189, 190, 197, 198, 199, 463,
         466, 76),
    ),
    "aarch64": _Calls(
        0xC00000B7, 0xFFFFFFFF, 198, 425, 217, 218, 219, 88,
        # fchmod fchmodat fchownat fchown fchmodat2, the xattr calls, setxattrat removexattrat,
        # truncate
        (52, 53, 54, 55, 452, 5, 6, 7, 14, 15, 16, 463, 466, 45),
    ),
}  # fmt: skip


def seccomp_filter(machine: str, *, landlock: bool = False) -> bytes | None:
    """The classic-BPF seccomp program bwrap installs, for `platform.machine()`; None on
    machines whose syscall numbers are not known here (no filter there). `landlock=True`: the
    Landlock wall's, which also refuses internet sockets, changes of metadata and truncate by
    path."""
    calls = _SYSCALLS.get(machine)
    if calls is None or sys.byteorder != "little":
        return None
    # (op, jump-if-true label, jump-if-false label, k), and the labels themselves (a string
    # names the instruction after it); labels are resolved below.
    listing: list[tuple[int, str | None, str | None, int] | str] = [
        (_BPF_LD_W_ABS, None, None, 4),  # arch
        (_BPF_JEQ_K, None, "deny", calls.arch),
        (_BPF_LD_W_ABS, None, None, 0),  # syscall number
        (_BPF_AND_K, None, None, calls.mask),
        (_BPF_JEQ_K, "deny", None, calls.io_uring_setup),
        (_BPF_JEQ_K, "deny", None, calls.add_key),
        (_BPF_JEQ_K, "deny", None, calls.request_key),
        (_BPF_JEQ_K, "deny", None, calls.keyctl),
        *[(_BPF_JEQ_K, "deny", None, number) for number in calls.metadata if landlock],
        *(
            [
                (_BPF_JEQ_K, None, "socket", calls.utimensat),
                (_BPF_LD_W_ABS, None, None, 24),  # utimensat's path, low word
                (_BPF_JEQ_K, None, "deny", 0),
                (_BPF_LD_W_ABS, None, None, 28),  # and high word: NULL is "the descriptor"
                (_BPF_JEQ_K, "allow", "deny", 0),
            ]
            if landlock
            else []
        ),
        "socket",
        (_BPF_JEQ_K, None, "allow", calls.socket),
        (_BPF_LD_W_ABS, None, None, 16),  # socket's first argument, low word: the family
        (_BPF_JEQ_K, "deny" if landlock else "allow", None, _AF_INET),
        (_BPF_JEQ_K, "deny" if landlock else "allow", None, _AF_INET6),
        (_BPF_JEQ_K, None, "deny", _AF_NETLINK),
        (_BPF_LD_W_ABS, None, None, 32),  # the third argument: the netlink protocol
        (_BPF_JEQ_K, "allow", "deny", _NETLINK_ROUTE),
    ]
    program = [item for item in listing if not isinstance(item, str)]
    labels: dict[str, int] = {}
    for item in listing:
        if isinstance(item, str):
            labels[item] = sum(not isinstance(x, str) for x in listing[: listing.index(item)])
    labels.update({"allow": len(program), "deny": len(program) + 1})
    code = []
    for index, (op, true, false, k) in enumerate(program):
        jt = labels[true] - index - 1 if true else 0
        jf = labels[false] - index - 1 if false else 0
        code.append(struct.pack("=HBBI", op, jt, jf, k))
    code.append(struct.pack("=HBBI", _BPF_RET_K, 0, 0, _SECCOMP_ALLOW))
    code.append(struct.pack("=HBBI", _BPF_RET_K, 0, 0, _SECCOMP_ERRNO | _EACCES))
    return b"".join(code)


@contextlib.contextmanager
def seccomp_fd() -> Iterator[int | None]:
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
