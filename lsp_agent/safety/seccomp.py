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


_SYSCALLS = {
    # The x86_64 mask folds x32 numbers (bit 30) onto x86_64's.
    "x86_64": _Calls(0xC000003E, 0xBFFFFFFF, 41, 425, 248, 249, 250),
    "aarch64": _Calls(0xC00000B7, 0xFFFFFFFF, 198, 425, 217, 218, 219),
}


def seccomp_filter(machine: str) -> bytes | None:
    """The classic-BPF seccomp program bwrap installs, for `platform.machine()`; None on
    machines whose syscall numbers are not known here (no filter there)."""
    calls = _SYSCALLS.get(machine)
    if calls is None or sys.byteorder != "little":
        return None
    # (op, jump-if-true label, jump-if-false label, k); labels are resolved below.
    program: list[tuple[int, str | None, str | None, int]] = [
        (_BPF_LD_W_ABS, None, None, 4),  # arch
        (_BPF_JEQ_K, None, "deny", calls.arch),
        (_BPF_LD_W_ABS, None, None, 0),  # syscall number
        (_BPF_AND_K, None, None, calls.mask),
        (_BPF_JEQ_K, "deny", None, calls.io_uring_setup),
        (_BPF_JEQ_K, "deny", None, calls.add_key),
        (_BPF_JEQ_K, "deny", None, calls.request_key),
        (_BPF_JEQ_K, "deny", None, calls.keyctl),
        (_BPF_JEQ_K, None, "allow", calls.socket),
        (_BPF_LD_W_ABS, None, None, 16),  # socket's first argument, low word: the family
        (_BPF_JEQ_K, "allow", None, _AF_INET),
        (_BPF_JEQ_K, "allow", None, _AF_INET6),
        (_BPF_JEQ_K, None, "deny", _AF_NETLINK),
        (_BPF_LD_W_ABS, None, None, 32),  # the third argument: the netlink protocol
        (_BPF_JEQ_K, "allow", "deny", _NETLINK_ROUTE),
    ]
    labels = {"allow": len(program), "deny": len(program) + 1}
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
