"""Benchmark: the change tracker on git repositories of 5 000, 50 000 and 200 000 files.

For each size it generates (or reuses, with `--keep DIR`) a repository of small source files in
folders of 20, committed once, plus untracked clutter the tracker must never watch
(`node_modules`, `.venv`, `build/`). The index is refreshed once before measuring, as a
repository a user works in is (a freshly committed index is "racily clean" and makes every git
status hash every file). Then, for each observer:

- `inotify`: the workspace is watched (`observer="auto"` on Linux);
- `polling`: nothing is watched, as past the kernel's inotify limit (one comparison a turn).

it prints:

(a) **start**: `start()` from nothing to ready (find the repository, place the watches, probe
    them, one full `git status`): what a first ask no longer waits for; the inotify watches and
    the threads it holds then, and how long `stop()` takes.
(b) **detection per call**, with 5 and with 500 tracked files changed since the snapshot: the time
    of the model call's `changes_since_snapshot()` once the watcher has the events: the refresh
    (index and HEAD lookups, hashing the changed files, ignore checks), judging the entries and
    their diffs. With `polling` it is the first call after a snapshot, which compares everything
    (one full `git status` and hashing what it lists); the snapshot itself costs as much again.
    Not included: the wait for the kernel's events (milliseconds), rendering the note (µs).
    For scale, one full `git status` and one `git status -- <the 5 paths>` on the same tree.
(c) **idle**, in a child process that runs only the tracker: CPU seconds per minute (the tracker's
    process and its git helpers) over `--idle-seconds` of nobody touching the tree, and resident
    memory (the tracker's process; its long-lived git helpers apart).

`--check` adds (d): correctness over a scripted series of edits, new files, deletes, renames,
staging, stash, branch switches, commits and ignored churn, against full `git status` and
`git ls-files` runs (never from watchdog); target 0 differences.

Usage: .venv/bin/python benchmarks/changes.py [--sizes 5000,50000,200000] [--changed 5,500]
       [--observers inotify,polling] [--runs 7] [--idle-seconds 20] [--keep DIR] [--check]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsp_agent.changes.tracker import (
    ADDED,
    BRANCH,
    DELETED,
    EXCLUDED_DIRS,
    MODIFIED,
    RENAMED,
    ChangeTracker,
    FileChangeEntry,
)

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@example.com"}
GIT_ENV |= {"GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@example.com"}
CONVERGE_S = 60.0
"""How long a step waits for the tracker to see what it expects."""
PER_DIR = 20
"""Files per generated folder."""


def git(root: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", *args], cwd=root, env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return result.stdout


def leaf_dirs(dirs: int) -> list[str]:
    """`dirs` leaf folders, 50 per group folder."""
    return [f"src/group{d // 50:03d}/pkg{d:05d}" for d in range(dirs)]


def build_repository(root: Path, files: int) -> None:
    """The repository: `files` small source files, `PER_DIR` a folder, one commit."""
    dirs = max(1, files // PER_DIR)
    for number, folder in enumerate(leaf_dirs(dirs)):
        path = root / folder
        path.mkdir(parents=True)
        for index in range(PER_DIR):
            lines = [f'"""Module {number}.{index}."""', ""]
            lines += [f"VALUE_{k} = {number * 1000 + index * 10 + k}" for k in range(18)]
            (path / f"mod{index:02d}.py").write_text("\n".join(lines) + "\n")
    (root / ".gitignore").write_text("build/\n*.log\ndist/\nnode_modules/\n.venv/\n")
    (root / "README.md").write_text("# synthetic\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "-c", "gc.auto=0", "commit", "-q", "-m", "synthetic repository")
    git(root, "gc", "-q")  # packed, as a clone is
    for name, count in (("node_modules", 300), (".venv/lib/site-packages", 200), ("build", 200)):
        for index in range(count):
            folder = root / name / f"p{index:03d}"
            folder.mkdir(parents=True)
            (folder / "index.js").write_text("module.exports = 1\n")
    settle_index(root)


def settle_index(root: Path) -> None:
    """Refresh the index's stat data once the files are older than it, as in a repository a
    user works in (the index written with the files is racily clean)."""
    time.sleep(1.1)  # racy-git works at one-second granularity on some file systems
    subprocess.run(["git", "update-index", "-q", "--refresh"], cwd=root, env=GIT_ENV)
    subprocess.run(["git", "status", "--porcelain"], cwd=root, env=GIT_ENV, capture_output=True)


def repository(size: int, keep: Path | None, scratch: Path) -> Path:
    root = ((keep or scratch) / f"repo-{size}").resolve()
    marker = root / ".git" / "lsp-agent-bench"
    if marker.exists():
        reset_repository(root)
        return root
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    begin = time.perf_counter()
    build_repository(root, size)
    marker.write_text(git(root, "rev-parse", "HEAD"))
    print(f"  generated {size} files in {time.perf_counter() - begin:.0f} s: {root}")
    return root


def reset_repository(root: Path) -> None:
    """Back to the generated commit, on main, nothing stashed, no other branch."""
    start = (root / ".git" / "lsp-agent-bench").read_text().strip()
    for args in (
        ("checkout", "-q", "-f", "main"),
        ("reset", "-q", "--hard", start),
        ("clean", "-qfd", "src"),
        ("stash", "clear"),
    ):
        git(root, *args)
    if "feature" in git(root, "branch", "--list", "feature"):
        git(root, "branch", "-q", "-D", "feature")
    settle_index(root)


def observer_kind(name: str) -> str:
    return "auto" if name == "inotify" else "polling"


def tracked_files(root: Path) -> list[str]:
    return git(root, "ls-files").splitlines()


def ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def wait_until(
    tracker: ChangeTracker, done: Callable[[list[FileChangeEntry]], bool]
) -> list[FileChangeEntry]:
    deadline = time.monotonic() + CONVERGE_S
    entries: list[FileChangeEntry] = []
    while time.monotonic() < deadline:
        entries = await tracker.changes_since_snapshot()
        if done(entries):
            break
        await asyncio.sleep(0.05)
    return entries


def full_status_s(root: Path, paths: list[str] | None = None) -> float:
    args = ["git", "status", "--porcelain=v2", "-z", "--untracked-files=all"]
    begin = time.perf_counter()
    subprocess.run(
        [*args, *(["--", *paths] if paths else [])],
        cwd=root,
        capture_output=True,
        check=True,
        env={**GIT_ENV, "GIT_OPTIONAL_LOCKS": "0"},
    )
    return time.perf_counter() - begin


async def measure(root: Path, observer: str, counts: list[int], runs: int) -> dict[str, Any]:
    """(a) and (b) for one repository and one observer."""
    tracker = ChangeTracker(root, observer=observer_kind(observer))  # type: ignore[arg-type]
    begin = time.perf_counter()
    await tracker.start()
    result: dict[str, Any] = {"start_ms": (time.perf_counter() - begin) * 1000}
    result["watching"] = tracker.watching
    result["watches"] = tracker.watches
    result["threads"] = threading.active_count()
    files = tracked_files(root)
    rng = random.Random(11)
    try:
        for count in counts:
            calls: list[float] = []
            snapshots: list[float] = []
            seen: list[int] = []
            for round_ in range(runs + 1):
                begin = time.perf_counter()
                await tracker.snapshot()
                snapshot_s = time.perf_counter() - begin
                chosen = rng.sample(files, count)
                edited = time.monotonic()
                for rel in chosen:
                    with (root / rel).open("a") as handle:
                        handle.write(f"# edited in round {round_}\n")
                if tracker.watching == "inotify":
                    # What is timed is the model call, not the kernel's delivery.
                    await tracker.settle(quiet=0.3, since=edited, timeout=CONVERGE_S)
                begin = time.perf_counter()
                entries = await tracker.changes_since_snapshot()
                call_s = time.perf_counter() - begin
                if round_ > 0:  # the first round warms the page cache
                    calls.append(call_s)
                    snapshots.append(snapshot_s)
                    seen.append(len([e for e in entries if e.status == MODIFIED]))
                subprocess.run(
                    ["git", "checkout", "-q", "--", *chosen], cwd=root, env=GIT_ENV, check=True
                )
                if tracker.watching == "inotify":
                    await tracker.settle(quiet=0.3, timeout=CONVERGE_S)
            result[f"call_ms_{count}"] = ms(calls)
            result[f"snapshot_ms_{count}"] = ms(snapshots)
            result[f"seen_{count}"] = (min(seen), max(seen))
    finally:
        begin = time.perf_counter()
        await tracker.stop()
        result["stop_ms"] = (time.perf_counter() - begin) * 1000
    sample = files[:5]
    result["status_ms"] = statistics.median(full_status_s(root) for _ in range(3)) * 1000
    result["limited_ms"] = statistics.median(full_status_s(root, sample) for _ in range(3)) * 1000
    return result


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and of its children that are still running."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for candidate in [pid, *children(pid)]:
        try:
            fields = Path(f"/proc/{candidate}/stat").read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(") ", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


async def idle_child(root: Path, observer: str, idle_s: float) -> None:
    """(c), in a process of its own: start, answer a call, then sit idle while measured."""
    tracker = ChangeTracker(root, observer=observer_kind(observer))  # type: ignore[arg-type]
    await tracker.start()
    await tracker.snapshot()
    first = tracked_files(root)[:5]
    for rel in first:
        with (root / rel).open("a") as handle:
            handle.write("# idle round\n")
    await wait_until(tracker, lambda e: len(e) >= 5)
    me = os.getpid()
    cpu_before, wall_before = cpu_s(me), time.monotonic()
    usage_before = resource.getrusage(resource.RUSAGE_SELF)
    await asyncio.sleep(idle_s)
    usage_after = resource.getrusage(resource.RUSAGE_SELF)
    own = (usage_after.ru_utime - usage_before.ru_utime) + (
        usage_after.ru_stime - usage_before.ru_stime
    )
    wall = time.monotonic() - wall_before
    helpers = children(me)
    report = {
        "cpu_s_per_min": (cpu_s(me) - cpu_before) / wall * 60,
        "own_cpu_s_per_min": own / wall * 60,
        "rss_mb": rss_mb(me),
        "peak_mb": rss_mb(me, "VmHWM"),
        "helpers_mb": sum(rss_mb(pid) for pid in helpers),
        "helpers": len(helpers),
        "watching": tracker.watching,
    }
    await tracker.stop()
    git(root, "checkout", "-q", "--", *first)
    print(json.dumps(report))


def measure_idle(root: Path, observer: str, idle_s: float) -> dict[str, Any]:
    command = [sys.executable, __file__, "--idle-child", str(root), "--observers", observer]
    command += ["--idle-seconds", str(idle_s)]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


@dataclass
class Truth:
    """The repository as full git commands see it: the reference for (d)."""

    head: str | None
    branch: str | None
    dirty: dict[str, tuple[str, str | None]]
    """Path → (XY, blob hash of the worktree file or None) for every path git status lists."""
    index: dict[str, str]
    """Path → blob of every tracked path (`git ls-files -s`)."""

    def content(self, path: str) -> str | None:
        if path in self.dirty:
            return self.dirty[path][1]
        return self.index.get(path)


def blob_hash(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def take_truth(root: Path) -> Truth:
    out = subprocess.run(
        ["git", "status", "--porcelain=v2", "-z", "--untracked-files=all", "--no-renames"],
        cwd=root,
        capture_output=True,
        check=True,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
    ).stdout
    dirty: dict[str, tuple[str, str | None]] = {}
    for record in out.split(b"\0"):
        if not record or any(part in EXCLUDED_DIRS for part in os.fsdecode(record).split("/")):
            continue
        if record[:1] == b"1":
            parts = record.split(b" ", 8)
            path, code = os.fsdecode(parts[8]), parts[1].decode()
        elif record[:1] == b"?":
            path, code = os.fsdecode(record[2:]), "??"
        elif record[:1] == b"u":
            parts = record.split(b" ", 10)
            path, code = os.fsdecode(parts[10]), parts[1].decode()
        else:
            continue
        dirty[path] = (code, blob_hash(root / path))
    index: dict[str, str] = {}
    for line in git(root, "ls-files", "-s", "-z").split("\0"):
        if line:
            meta, path = line.split("\t", 1)
            index[path] = meta.split()[1]
    head = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=root, capture_output=True, text=True
    ).stdout.strip()
    branch = subprocess.run(
        ["git", "symbolic-ref", "-q", "--short", "HEAD"], cwd=root, capture_output=True, text=True
    ).stdout.strip()
    return Truth(head or None, branch or f"(detached at {head[:7]})", dirty, index)


def expected_entries(then: Truth, now: Truth) -> set[tuple[str, str, str | None]]:
    """(path, status, old path) of each file whose content changed between the two truths."""
    changed: dict[str, tuple[str, str | None]] = {}
    for path in set(then.dirty) | set(now.dirty):
        before, after = then.content(path), now.content(path)
        if before != after:
            status = ADDED if before is None else DELETED if after is None else MODIFIED
            changed[path] = (status, before if status == DELETED else after)
    gone: dict[str, str] = {}
    for path in sorted(changed):
        status, content = changed[path]
        if status == DELETED and content is not None:
            gone.setdefault(content, path)
    result: set[tuple[str, str, str | None]] = set()
    sources: set[str] = set()
    for path in sorted(changed):
        status, content = changed[path]
        if status == ADDED and content in gone:
            source = gone.pop(content)
            sources.add(source)
            result.add((path, RENAMED, source))
        elif status != DELETED:
            result.add((path, status, None))
    result |= {
        (p, DELETED, None) for p, (s, _) in changed.items() if s == DELETED and p not in sources
    }
    return result


def expected_branch(root: Path, then: Truth, now: Truth) -> str | None:
    if then.head == now.head and then.branch == now.branch:
        return None
    if then.head and now.head and then.head != now.head:
        names = git(root, "diff", "--name-only", "-z", "--no-renames", then.head, now.head)
        count = len([n for n in names.split("\0") if n])
        differ = f"; {count} file{'' if count == 1 else 's'} differ"
    elif then.head == now.head:
        differ = "; same commit, no file differs"
    else:
        differ = ""
    if then.branch != now.branch:
        return f"branch changed from {then.branch} to {now.branch}{differ}"
    old, new = (then.head or "none")[:7], (now.head or "none")[:7]
    return f"branch {now.branch} moved from {old} to {new} (a commit, pull or reset){differ}"


def script(root: Path) -> list[tuple[str, Callable[[], None], bool]]:
    """(what, do it, end of turn after it): the user's work between and across turns."""
    dirs = sorted({str(Path(p).parent) for p in tracked_files(root) if p.startswith("src/")})
    picks = random.Random(5).sample(dirs, 40)

    def f(index: int, name: str = "mod03.py") -> Path:
        return root / picks[index] / name

    def edit(path: Path, text: str = "# user edit\n") -> None:
        with path.open("a") as handle:
            handle.write(text)

    def edit_five() -> None:
        for i in range(5):
            edit(f(i))

    def add_files() -> None:
        for i, name in ((5, "new_a.py"), (6, "new_b.py"), (7, "new_c.py")):
            f(i, name).write_text(f"{name} = 1\n")
        (root / picks[8] / "fresh").mkdir()
        (root / picks[8] / "fresh" / "x.py").write_text("X = 1\n")
        (root / picks[8] / "fresh" / "y.py").write_text("Y = 1\n")

    def delete_two() -> None:
        f(9).unlink()
        f(10).unlink()

    def rename_two() -> None:
        f(11).rename(f(11, "renamed.py"))
        f(12).rename(f(13, "moved_here.py"))

    def rename_folder() -> None:
        (root / picks[14]).rename(root / (picks[14] + "_new"))

    def staged_rename() -> None:
        git(root, "mv", str(f(15).relative_to(root)), str(f(15, "staged_mv.py").relative_to(root)))

    def ignored_churn() -> None:
        for i in range(100):
            (root / "build" / f"p{i:03d}" / "out.o").write_bytes(os.urandom(64))
            (root / "node_modules" / f"p{i:03d}" / "index.js").write_text(f"// {i}\n")
        (root / "build" / "new-dir").mkdir(exist_ok=True)
        (root / "build" / "new-dir" / "a.txt").write_text("x\n")
        (root / picks[0] / "trace.log").write_text("log\n")
        (root / ".venv" / "lib" / "site-packages" / "x.py").write_text("x = 1\n")

    def edit_and_undo() -> None:
        original = f(5).read_bytes()
        edit(f(5))
        f(5).write_bytes(original)

    def stage() -> None:
        git(root, "add", "-A", "src")

    def edit_staged() -> None:
        edit(f(0))
        edit(f(1))

    def stash() -> None:
        git(root, "stash", "push", "-q", "-u")

    def feature_branch() -> None:
        git(root, "checkout", "-q", "-b", "feature")
        for i in range(10):
            edit(f(20 + i, "mod07.py"), "# feature work\n")
        git(root, "commit", "-q", "-am", "feature work")

    def back_to_main() -> None:
        git(root, "checkout", "-q", "main")

    def edit_then_switch() -> None:
        edit(f(31), "# on main\n")
        edit(f(32), "# on main\n")
        git(root, "checkout", "-q", "feature")

    def commit() -> None:
        git(root, "commit", "-q", "-am", "the user's work")

    def delete_folder() -> None:
        shutil.rmtree(root / picks[16])

    def stash_pop() -> None:
        git(root, "stash", "pop", "-q")

    return [
        ("edit 5 tracked files", edit_five, False),
        ("add 3 files and a new folder of 2", add_files, False),
        ("delete 2 tracked files", delete_two, False),
        ("rename 2 files", rename_two, False),
        ("rename a folder of 20 files", rename_folder, False),
        ("git mv a file (staged rename)", staged_rename, False),
        ("ignored churn: build/, node_modules, .venv, *.log", ignored_churn, True),
        ("edit a file and undo it", edit_and_undo, False),
        ("git add the edited files", stage, False),
        ("edit 2 staged files again", edit_staged, False),
        ("git stash -u everything", stash, True),
        ("new branch, commit 10 files on it", feature_branch, True),
        ("git checkout main", back_to_main, True),
        ("edit 2 files, checkout feature with them", edit_then_switch, False),
        ("commit the user's 2 files", commit, True),
        ("delete a whole folder", delete_folder, False),
        ("ignored churn again", ignored_churn, False),
        ("git stash pop", stash_pop, False),
    ]


def entry_set(entries: list[FileChangeEntry]) -> set[tuple[str, str, str | None]]:
    return {(e.path, e.status, e.old_path) for e in entries if e.status != BRANCH}


async def check_correctness(root: Path, observer: str) -> tuple[int, int]:
    """(d): differences in entries and in the status map, summed over the script's steps."""
    tracker = ChangeTracker(root, observer=observer_kind(observer))  # type: ignore[arg-type]
    await tracker.start()
    entry_differences = status_differences = 0
    try:
        await tracker.settle(quiet=0.3)
        await tracker.snapshot()
        then = take_truth(root)
        for number, (what, step, end_of_turn) in enumerate(script(root), start=1):
            step()
            now = take_truth(root)
            want = expected_entries(then, now)
            want_branch = expected_branch(root, then, now)
            want_codes = {p: code for p, (code, _) in now.dirty.items()}
            begin = time.monotonic()
            got: list[FileChangeEntry] = []
            branch = None
            while True:
                await tracker.settle(quiet=0.3)
                got = await tracker.changes_since_snapshot()
                branch = next((e.detail for e in got if e.status == BRANCH), None)
                agree = entry_set(got) == want and branch == want_branch
                if (agree and tracker.status_map() == want_codes) or (
                    time.monotonic() - begin > CONVERGE_S or tracker.watching != "inotify"
                ):
                    break
                await asyncio.sleep(0.1)
            missing, extra = want - entry_set(got), entry_set(got) - want
            branch_wrong = int(branch != want_branch)
            status_wrong = len(set(tracker.status_map().items()) ^ set(want_codes.items()))
            entry_differences += len(missing) + len(extra) + branch_wrong
            status_differences += status_wrong
            print(
                f"  {number:2}. {what:<50} {len(want):3} files"
                f"{' + branch line' if want_branch else '':15} "
                f"differences: {len(missing) + len(extra) + branch_wrong}"
                f" (status map {status_wrong}), {time.monotonic() - begin:.2f} s"
            )
            for item in sorted(missing)[:5]:
                print(f"        missing {item}")
            for item in sorted(extra)[:5]:
                print(f"        extra   {item}")
            if branch_wrong:
                print(f"        branch: got {branch!r}, want {want_branch!r}")
            # Without a watcher, changes are compared once a turn: every step is a turn.
            if end_of_turn or observer != "inotify":
                await tracker.settle(quiet=0.3)
                await tracker.snapshot()
                then = take_truth(root)
        reason = f" ({tracker.fallback_reason})" if tracker.fallback_reason else ""
        print(f"  watching at the end: {tracker.watching}{reason}")
    finally:
        await tracker.stop()
    return entry_differences, status_differences


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="5000,50000,200000")
    parser.add_argument("--changed", default="5,500")
    parser.add_argument("--observers", default="inotify,polling")
    parser.add_argument("--runs", type=int, default=7, help="timed calls per figure")
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--keep", type=Path, help="build the repositories here and reuse them")
    parser.add_argument("--check", action="store_true", help="also run (d), on the largest size")
    parser.add_argument("--idle-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    observers = args.observers.split(",")
    if args.idle_child is not None:
        asyncio.run(idle_child(args.idle_child, observers[0], args.idle_seconds))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    counts = [int(c) for c in args.changed.split(",")]
    limit = Path("/proc/sys/fs/inotify/max_user_watches").read_text().strip()
    print(f"inotify max_user_watches = {limit}; {os.cpu_count()} cores; git {git_version()}")
    with tempfile.TemporaryDirectory(prefix="lsp-agent-changes-") as scratch:
        for size in sizes:
            print(f"\n{size} files")
            root = repository(size, args.keep, Path(scratch))
            for observer in observers:
                figures = asyncio.run(measure(root, observer, counts, args.runs))
                idle = measure_idle(root, observer, args.idle_seconds)
                print(f"  {observer} (watching: {figures['watching']})")
                print(
                    f"    (a) start to ready                       {figures['start_ms']:9.1f} ms"
                    f"  ({figures['watches']} inotify watches, {figures['threads']} threads; "
                    f"stop {figures['stop_ms']:.1f} ms)"
                )
                for count in counts:
                    low, high = figures[f"seen_{count}"]
                    print(
                        f"    (b) call, {count:3} files changed             "
                        f"{figures[f'call_ms_{count}']:9.1f} ms  ({low}-{high} entries); "
                        f"snapshot {figures[f'snapshot_ms_{count}']:.1f} ms"
                    )
                print(
                    f"        for scale: full git status {figures['status_ms']:.0f} ms, "
                    f"git status -- 5 paths {figures['limited_ms']:.0f} ms"
                )
                print(
                    f"    (c) idle CPU {idle['cpu_s_per_min']:.2f} s/min "
                    f"(tracker process alone {idle['own_cpu_s_per_min']:.2f}); "
                    f"RSS {idle['rss_mb']:.1f} MB (peak {idle['peak_mb']:.1f}); "
                    f"{idle['helpers']} git helpers {idle['helpers_mb']:.1f} MB"
                )
            if args.check and size == sizes[-1]:
                for observer in observers:
                    print(f"\n(d) correctness, {observer}, against full git status, step by step")
                    reset_repository(root)
                    entries, status = asyncio.run(check_correctness(root, observer))
                    print(f"  differences: {entries} in the entries, {status} in the status map")


def git_version() -> str:
    return subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.split()[-1]


if __name__ == "__main__":
    main()
