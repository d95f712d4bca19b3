"""The sandbox: the bubblewrap options and the seatbelt profile as text, the environment
allowlist, the probe, the placeholders that guard protected paths that do not exist yet, the
paths found by looking (nested repositories, virtualenvs, submodules, git's hooks folder), the
process limit and the seccomp filter."""

from __future__ import annotations

import asyncio
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lsp_agent.context.cap import Spills
from lsp_agent.errors import ToolError
from lsp_agent.safety import landlock, sandbox
from lsp_agent.safety.limits import MAX_PROCESSES, cgroup_parent
from lsp_agent.safety.protected import guards
from lsp_agent.safety.sandbox import (
    PROTECTED_DIRS,
    PROTECTED_FILES,
    Availability,
    Sandbox,
    bwrap_args,
    command_env,
    probe,
    seatbelt_profile,
)
from lsp_agent.safety.seccomp import seccomp_filter
from lsp_agent.tools.shell import run_command

needs_bwrap = pytest.mark.skipif(probe().kind != "bwrap", reason=f"no bwrap: {probe().reason}")


def test_bwrap_options_make_everything_read_only_but_the_workspace() -> None:
    root = Path("/work/project")
    args = bwrap_args(
        root,
        read_only=[root / ".git"],
        readable=[Path("/tmp/spill")],
        above=[Path("/tmp/repo")],
        run_links={"current-system": "/nix/store/x"},
    )
    text = " ".join(args)

    assert args[:3] == ["--ro-bind", "/", "/"]
    for flag in ("--unshare-net", "--unshare-pid", "--die-with-parent"):
        assert flag in args
    # --new-session would move the sandbox out of the process group a kill reaches (see
    # test_shell: a command cancelled while it starts); start_new_session does its job.
    assert "--new-session" not in args
    assert "--share-net" not in args
    assert "--unshare-user" not in args
    assert "--tmpfs /tmp" in text
    assert "--tmpfs /run" in text
    assert "--dev /dev" in text
    # order matters: later mounts cover earlier ones
    assert text.index("--tmpfs /tmp") < text.index(f"--bind {root} {root}")
    assert text.index(f"--bind {root} {root}") < text.index(f"--ro-bind {root}/.git {root}/.git")
    assert text.index("--tmpfs /tmp") < text.index("--ro-bind /tmp/spill /tmp/spill")
    assert "--symlink /nix/store/x /run/current-system" in text
    assert text.index("--tmpfs /tmp") < text.index("--ro-bind /tmp/repo /tmp/repo")
    assert text.index("--ro-bind /tmp/repo") < text.index(f"--bind {root} {root}")
    assert args[args.index("--chdir") + 1] == str(root)


def test_the_seatbelt_profile_denies_by_default_and_guards_the_protected_paths() -> None:
    # macOS only: sandbox-exec cannot run on this Linux machine, so this checks the generated
    # profile text; the probe runs it for real on a Mac.
    root = Path('/Users/me/my "project"')
    profile = seatbelt_profile(root, tmp=Path("/private/var/folders/x/T/lsp-agent-tmp-1"))

    lines = profile.splitlines()
    assert lines[0] == "(version 1)"
    assert lines[1] == "(deny default)"
    assert "(deny network*)" in lines
    assert "(allow network" not in profile
    assert "(allow file-read*)" in lines
    assert "(allow process-exec process-fork" in profile
    assert '(subpath "/Users/me/my \\"project\\"")' in profile  # quotes escaped
    for name in PROTECTED_DIRS:
        assert f'(require-not (subpath "/Users/me/my \\"project\\"/{name}"))' in profile
    for name in PROTECTED_FILES:
        assert f'(require-not (literal "/Users/me/my \\"project\\"/{name}"))' in profile
    nested = "|".join(re.escape(name) for name in PROTECTED_DIRS)
    assert f'(regex #"^/Users/me/my\\ \\"project\\"/(.*/)?({nested})(/.*)?$")' in profile
    assert '(allow file-write* (subpath "/private/var/folders/x/T/lsp-agent-tmp-1"))' in profile
    assert profile.count("(") == profile.count(")")
    writes = [line for line in lines if line.startswith("(allow file-write")]
    assert len(writes) == 3  # the workspace (guarded), the private temp folder, /dev files


def test_the_environment_keeps_only_the_allowlist() -> None:
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "LC_CTYPE": "C.UTF-8",
        "TERM": "xterm",
        "OPENAI_API_KEY": "sk-1",
        "LSP_AGENT_API_KEY": "sk-2",
        "ANTHROPIC_API_KEY": "sk-3",
        "GITHUB_TOKEN": "t",
        "AWS_SECRET_ACCESS_KEY": "a",
        "AWS_PROFILE": "p",
        "SSH_AUTH_SOCK": "/tmp/ssh",
        "MY_SECRET": "s",
        "LD_PRELOAD": "/evil.so",
        "PYTHONPATH": "/evil",
    }
    env = command_env(environ)
    assert set(env) == {
        "PATH",
        "HOME",
        "LANG",
        "LC_CTYPE",
        "TERM",
        "TMPDIR",
        "PAGER",
        "GIT_PAGER",
        "GIT_DISCOVERY_ACROSS_FILESYSTEM",
        "LSP_AGENT_SANDBOX",
    }
    assert env["TMPDIR"] == "/tmp"
    assert env["GIT_PAGER"] == "cat"


@needs_bwrap
def test_the_probe_runs_a_real_sandbox_and_says_so() -> None:
    found = probe()
    assert found == Availability(found.kind, found.reason, found.uncovered)
    assert found.kind == "bwrap"
    assert "reads" in found.uncovered
    assert found.sandboxed
    assert "bubblewrap" in found.reason
    assert "no network" in found.reason
    assert probe() is found  # once per process


def test_without_bwrap_nor_landlock_the_probe_says_none_and_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(landlock, "abi", lambda: 0)
    found = probe.__wrapped__()
    assert found.kind == "none"
    assert not found.sandboxed
    assert "bwrap is not installed" in found.reason
    assert "bubblewrap" in found.reason
    assert "no Landlock" in found.reason


@pytest.mark.skipif(landlock.abi() < 1, reason="this kernel has no Landlock")
def test_without_bwrap_the_probe_finds_the_landlock_wall_and_says_what_it_leaves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What the README's install gives on a machine without the bubblewrap package.
    monkeypatch.setenv("LSP_AGENT_BWRAP", "")
    found = probe.__wrapped__()
    assert found.kind == "landlock"
    assert found.sandboxed
    assert "names no bwrap" in found.reason
    assert f"Landlock ABI {landlock.abi()} and seccomp" in found.reason
    assert "no private /tmp" in found.uncovered
    assert "own PID namespace" in found.reason or "no PID namespace" in found.uncovered


def test_landlock_below_abi_6_without_a_pid_namespace_says_signals_are_not_confined() -> None:
    old_kernel = sandbox.landlock_uncovered(5, own_pids=False)
    assert "no PID namespace could be made here" in old_kernel
    assert "does not confine signals" in old_kernel
    # ABI 6 scopes signals; a PID namespace keeps them in whatever the ABI.
    assert "does not confine signals" not in sandbox.landlock_uncovered(6, own_pids=False)
    assert "signals" not in sandbox.landlock_uncovered(5, own_pids=True)
    assert sandbox.landlock_uncovered(5, own_pids=True) == sandbox.LANDLOCK_UNCOVERED


def test_when_bwrap_cannot_make_namespaces_the_probe_says_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the "
        "kernel does not allow non-privileged user namespaces' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(shutil, "which", lambda name: str(fake))
    monkeypatch.setattr(landlock, "abi", lambda: 0)
    found = probe.__wrapped__()
    assert found.kind == "none"
    assert "user namespaces" in found.reason
    assert "unsandboxed" in found.reason


def test_on_other_systems_there_is_no_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "system", lambda: "Windows")
    found = probe.__wrapped__()
    assert found.kind == "none"
    assert "Windows" in found.reason


def test_with_no_sandbox_the_command_is_unchanged(tmp_path: Path) -> None:
    box = Sandbox(tmp_path, Availability("none", "test"))
    with box.command(["/bin/sh", "-c", "true"], spill_dir=tmp_path) as launch:
        assert launch.argv == ["/bin/sh", "-c", "true"]
        assert launch.pass_fds == ()


@needs_bwrap
async def test_placeholders_guard_missing_paths_and_go_when_the_command_ends(
    tmp_path: Path,
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / ".vscode").mkdir()
    (root / ".vscode" / "settings.json").write_text("{}")
    box = Sandbox(root)

    with box.command(["true"], spill_dir=tmp_path) as launch:
        inside = {p.name for p in root.iterdir()}
        assert inside >= {*PROTECTED_DIRS, *PROTECTED_FILES}
        assert all((root / name).is_dir() for name in PROTECTED_FILES)  # folders, for git
        assert f"{root}/.bashrc" in launch.argv
    assert sorted(p.name for p in root.iterdir()) == [".vscode"]
    assert (root / ".vscode" / "settings.json").read_text() == "{}"


@needs_bwrap
async def test_placeholders_stay_while_another_command_runs(tmp_path: Path) -> None:
    box = Sandbox(tmp_path)
    with box.command(["true"], spill_dir=tmp_path):
        with box.command(["true"], spill_dir=tmp_path):
            pass
        assert (tmp_path / ".bashrc").is_dir()  # the first command is still guarded
    assert not (tmp_path / ".bashrc").exists()


@needs_bwrap
async def test_a_placeholder_someone_wrote_into_is_kept(tmp_path: Path) -> None:
    box = Sandbox(tmp_path)
    with box.command(["true"], spill_dir=tmp_path):
        (tmp_path / ".vscode" / "launch.json").write_text("{}")  # the editor, meanwhile
    assert (tmp_path / ".vscode" / "launch.json").exists()


def test_a_protected_path_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / ".vscode").symlink_to(tmp_path / "real")
    box = Sandbox(tmp_path, Availability("bwrap", "test"))
    with pytest.raises(ToolError) as refused, box.command(["true"], spill_dir=tmp_path):
        pass
    assert ".vscode" in refused.value.message
    assert "symlink" in refused.value.message


@needs_bwrap
async def test_git_works_inside_a_repository_subfolder_despite_the_placeholder(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    root = repo / "sub"
    root.mkdir(parents=True)
    (root / "a.txt").write_text("a\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    (root / "a.txt").write_text("b\n")

    result = await run_command(
        "git status --short && git log --oneline | wc -l",
        sandbox=Sandbox(root),
        spills=Spills(tmp_path),
        limit=10_000,
        timeout=60,
    )

    assert result.exit_code == 0, result.output.head
    assert result.output.head == " M a.txt\n1\n"


@needs_bwrap
async def test_a_worktree_git_file_pointing_inside_protects_the_real_git_folder(
    tmp_path: Path,
) -> None:
    root = tmp_path / "project"
    (root / "gitdir").mkdir(parents=True)
    (root / "gitdir" / "config").write_text("[core]\n")
    (root / ".git").write_text("gitdir: gitdir\n")

    result = await run_command(
        "echo '[core] fsmonitor = evil' >> gitdir/config",
        sandbox=Sandbox(root),
        spills=Spills(tmp_path),
        limit=10_000,
        timeout=60,
    )

    assert result.exit_code != 0
    assert (root / "gitdir" / "config").read_text() == "[core]\n"


def test_the_seccomp_program_is_known_for_the_common_machines() -> None:
    for machine in ("x86_64", "aarch64"):
        program = seccomp_filter(machine)
        assert program is not None
        assert len(program) == 17 * 8
    assert seccomp_filter("riscv64") is None  # unknown numbers: no filter rather than a wrong one


@needs_bwrap
async def test_unix_sockets_cannot_be_made_but_socketpairs_and_loopback_work(
    tmp_path: Path,
) -> None:
    script = (
        "import socket\n"
        "a, b = socket.socketpair(); a.send(b'pair'); print(b.recv(4).decode())\n"
        "server = socket.create_server(('127.0.0.1', 0))\n"
        "socket.create_connection(server.getsockname()).close(); print('loopback')\n"
        "try:\n"
        "    socket.socket(socket.AF_UNIX)\n"
        "except PermissionError:\n"
        "    print('no unix socket')\n"
        "socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); print('inet6')\n"
        "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0); print('netlink route')\n"
        "for family, kind, protocol, name in [\n"
        "    (socket.AF_VSOCK, socket.SOCK_STREAM, 0, 'vsock'),\n"
        "    (socket.AF_NETLINK, socket.SOCK_RAW, 9, 'netlink audit'),\n"
        "    (socket.AF_NETLINK, socket.SOCK_RAW, 15, 'netlink uevents'),\n"
        "    (socket.AF_PACKET, socket.SOCK_RAW, 0, 'packet'),\n"
        "]:\n"
        "    try:\n"
        "        socket.socket(family, kind, protocol)\n"
        "    except PermissionError:\n"
        "        print('no', name)\n"
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "number = {'x86_64': 250, 'aarch64': 219}[__import__('os').uname().machine]\n"
        "print('keyctl', libc.syscall(number, 0, -4, 0), ctypes.get_errno())\n"
    )
    (tmp_path / "probe.py").write_text(script)

    result = await run_command(
        f"{sys.executable} probe.py",
        sandbox=Sandbox(tmp_path),
        spills=Spills(tmp_path / "spill"),
        limit=10_000,
        timeout=60,
    )

    assert result.output.head == (
        "pair\nloopback\nno unix socket\ninet6\nnetlink route\nno vsock\nno netlink audit\n"
        "no netlink uevents\nno packet\nkeyctl -1 13\n"
    ), result.output.head


def test_bwrap_is_what_the_tests_run_on_linux() -> None:
    # scripts/test.sh installs bubblewrap: a machine without it must not pass silently.
    if shutil.which("bwrap") is None:
        pytest.fail("bwrap is not installed: run scripts/test.sh, which installs it")


def test_the_kernel_knobs_dev_and_the_private_mounts_are_bounded() -> None:
    root = Path("/work/project")
    args = bwrap_args(root, pinned=[root / "sub"], read_only=[root / "sub" / ".git"])
    text = " ".join(args)

    assert "--ro-bind /proc/sys /proc/sys" in text  # root could write core_pattern otherwise
    assert text.index("--proc /proc") < text.index("--ro-bind /proc/sys /proc/sys")
    assert "--remount-ro /dev" in text
    assert "--tmpfs /dev/shm" in text
    for mount in ("/tmp", "/run", "/dev/shm"):
        assert args[args.index(mount) - 3] == "--size", mount
    # a pinned folder is bound onto itself before the protected path inside it
    assert text.index(f"--bind {root} {root}") < text.index(f"--bind {root}/sub {root}/sub")
    assert text.index(f"--bind {root}/sub") < text.index(f"--ro-bind {root}/sub/.git")
    unsized = " ".join(bwrap_args(root, sized=False))
    assert "--size" not in unsized
    assert "--tmpfs /tmp" in unsized


def make_repository(root: Path) -> None:
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (root / "app.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)


def test_paths_found_by_looking_are_guarded(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    make_repository(root)
    git = ["git", "-C", str(root)]
    (root / "deep" / "nested").mkdir(parents=True)
    subprocess.run(["git", "-C", str(root / "deep" / "nested"), "init", "-q"], check=True)
    (root / "tools" / "env").mkdir(parents=True)
    (root / "tools" / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (root / "envs" / "conda" / "conda-meta").mkdir(parents=True)
    subprocess.run([*git, "config", "core.hooksPath", ".husky/_"], check=True)
    subprocess.run([*git, "config", "include.path", "../team.gitconfig"], check=True)
    subprocess.run(
        [*git, "update-index", "--add", "--cacheinfo", f"160000,{'2' * 40},vendor/lib"],
        check=True,
    )
    box = Sandbox(root, Availability("bwrap", "test"))

    found = {guard.path.relative_to(root).as_posix(): guard for guard in guards(root, box.scanner)}

    for name in (*PROTECTED_DIRS, *PROTECTED_FILES):
        assert name in found
        assert not found[name].must_exist
    assert found["deep/nested/.git"].must_exist  # what was found is guarded while it exists
    assert found["tools/env"].must_exist
    assert found["envs/conda"].must_exist
    assert not found["vendor/lib/.git"].must_exist  # a submodule not checked out: a placeholder
    assert {".husky", ".husky/_", "team.gitconfig"} <= set(found)

    with box.command(["true"], spill_dir=tmp_path) as launch:
        text = " ".join(launch.argv)
        assert (root / "vendor" / "lib" / ".git").is_dir()
        for pinned in ("deep", "deep/nested", "tools", "envs", "vendor", "vendor/lib"):
            assert f"--bind {root / pinned} {root / pinned}" in text, pinned
    assert not (root / "vendor").exists()  # placeholders and their parents go


def test_a_git_file_pointing_inside_protects_the_git_folder_and_pins_its_parents(
    tmp_path: Path,
) -> None:
    root = tmp_path / "project"
    (root / "meta").mkdir(parents=True)
    subprocess.run(
        ["git", "init", "-q", "--separate-git-dir", str(root / "meta" / "repo"), str(root)],
        check=True,
    )
    box = Sandbox(root, Availability("bwrap", "test"))
    with box.command(["true"], spill_dir=tmp_path) as launch:
        text = " ".join(launch.argv)
    assert f"--ro-bind {root}/meta/repo {root}/meta/repo" in text
    assert f"--bind {root}/meta {root}/meta" in text


def test_a_symlink_on_the_way_to_a_protected_path_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    make_repository(root)
    (tmp_path / "elsewhere" / "env").mkdir(parents=True)
    (tmp_path / "elsewhere" / "env" / "pyvenv.cfg").write_text("")
    (root / "link").symlink_to(tmp_path / "elsewhere")
    (root / "venv").symlink_to(tmp_path / "elsewhere" / "env")
    box = Sandbox(root, Availability("bwrap", "test"))
    with pytest.raises(ToolError) as refused, box.command(["true"], spill_dir=tmp_path):
        pass
    assert "venv" in refused.value.message
    assert "symlink" in refused.value.message


@needs_bwrap
async def test_commands_cannot_make_more_processes_than_the_limit(tmp_path: Path) -> None:
    (tmp_path / "fork.py").write_text(
        "import os, time\n"
        "children = 0\n"
        "while children < 2000:\n"
        "    try:\n"
        "        pid = os.fork()\n"
        "    except OSError:\n"
        "        break\n"
        "    if pid == 0:\n"
        "        time.sleep(60)\n"
        "        os._exit(0)\n"
        "    children += 1\n"
        "print(children)\n"
    )
    result = await run_command(
        f"{sys.executable} fork.py",
        sandbox=Sandbox(tmp_path),
        spills=Spills(tmp_path / "spill"),
        limit=10_000,
        timeout=60,
    )
    started = int(result.output.head.split()[-1])
    assert MAX_PROCESSES // 2 < started < MAX_PROCESSES, result.output.head


def test_the_probe_says_which_process_limit_holds() -> None:
    reason = probe().reason
    assert "processes" in reason
    if os.getuid() == 0 and cgroup_parent() is None:
        assert "NO process limit" in reason


@needs_bwrap
async def test_a_command_cancelled_as_it_starts_leaves_no_placeholder_behind(
    tmp_path: Path,
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    box = Sandbox(root)
    for _ in range(3):
        running = asyncio.create_task(
            run_command("sleep 100", sandbox=box, spills=Spills(tmp_path), limit=1000, timeout=60)
        )
        while not (root / ".bashrc").exists() and not running.done():
            await asyncio.sleep(0)  # until the sandbox is being prepared
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert sorted(p.name for p in root.iterdir()) == []
