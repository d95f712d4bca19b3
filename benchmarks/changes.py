"""Benchmark: `<file_changes>` on a 50 000-file git repository (DESIGN §8).

Generates, in a temporary folder, a git repository of 50 000 files in 2 500 directories,
committed once, plus untracked clutter the tracker must not watch (`node_modules`, `.venv`,
`build/`). Then prints three figures:

(a) the cost of producing the file changes per model call (`changes_since_snapshot()`, with 5
    files changed since the snapshot) against one full `git status` — target ≤ 0.2×;
(b) the tracker's resident memory while it watches the repository, measured in a child process
    that does nothing else — target ≤ 150 MB;
(c) correctness over a scripted series of edits, new files, deletes, renames (plain, staged and
    of a whole directory), staging, stash, branch switches, commits and ignored-file churn: after
    each step, the tracker's entries against a reference computed from full `git status` and
    `git ls-files` runs (never from watchdog), and the tracker's incremental status map against
    a full `git status` — target 0 differences.

The inotify watch limit (`/proc/sys/fs/inotify/max_user_watches`) is printed; when it is too low
for the repository, the tracker falls back to polling and the figures say so. `--max-watches N`
forces that fallback to measure it.

Usage: .venv/bin/python benchmarks/changes.py [--files 50000] [--dirs 2500] [--runs 15]
       [--observer auto|polling] [--max-watches N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
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
CONVERGE_S = 30.0
"""How long (c) waits for the tracker to agree with the reference after a step."""


def git(root: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", *args], cwd=root, env=GIT_ENV, capture_output=True, text=True, check=True
    )
    return result.stdout


def leaf_dirs(dirs: int) -> list[str]:
    """`dirs` leaf folders, 50 per group folder (so about `dirs` folders in all)."""
    return [f"src/group{d // 50:02d}/pkg{d:04d}" for d in range(dirs)]


def build_repository(root: Path, files: int, dirs: int) -> None:
    """The repository: `files` small source files spread over `dirs` folders, one commit."""
    per_dir = max(1, files // dirs)
    for number, folder in enumerate(leaf_dirs(dirs)):
        path = root / folder
        path.mkdir(parents=True)
        for index in range(per_dir):
            lines = [f'"""Module {number}.{index}."""', ""]
            lines += [f"VALUE_{k} = {number * 1000 + index * 10 + k}" for k in range(18)]
            (path / f"mod{index:02d}.py").write_text("\n".join(lines) + "\n")
    (root / ".gitignore").write_text("build/\n*.log\ndist/\nnode_modules/\n.venv/\n")
    (root / "README.md").write_text("# synthetic\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "synthetic repository")
    # Clutter that is never committed and never watched.
    for name, count in (("node_modules", 300), (".venv/lib/site-packages", 200), ("build", 200)):
        for index in range(count):
            folder = root / name / f"p{index:03d}"
            folder.mkdir(parents=True)
            (folder / "index.js").write_text("module.exports = 1\n")


def count_dirs(root: Path) -> int:
    total = 0
    for _, dirnames, _ in os.walk(root):
        total += len(dirnames)
    return total


def read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def tracker_for(root: Path, args: argparse.Namespace, log: list[str]) -> ChangeTracker:
    return ChangeTracker(
        root,
        observer=args.observer,
        max_watches=args.max_watches,
        log_line=log.append,
    )


def tracked_files(root: Path) -> list[str]:
    return git(root, "ls-files").splitlines()


async def wait_for_events(tracker: ChangeTracker, expected: int) -> list[FileChangeEntry]:
    """Entries once `expected` files show up (watchdog delivers within milliseconds)."""
    deadline = time.monotonic() + CONVERGE_S
    entries: list[FileChangeEntry] = []
    while time.monotonic() < deadline:
        await tracker.settle(quiet=0.1)
        entries = await tracker.changes_since_snapshot()
        if len(entries) >= expected:
            break
        await asyncio.sleep(0.05)
    return entries


async def measure_cost(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    """(a): per-call cost with 5 changed files, with none, and one full `git status`."""
    log: list[str] = []
    tracker = tracker_for(root, args, log)
    started = time.perf_counter()
    await tracker.start()
    start_ms = (time.perf_counter() - started) * 1000
    rng = random.Random(11)
    files = tracked_files(root)
    with_changes: list[float] = []
    idle: list[float] = []
    limited: list[float] = []
    full: list[float] = []
    seen_counts: list[int] = []
    try:
        for round_ in range(args.runs + 1):
            await tracker.snapshot()
            chosen = rng.sample(files, 5)
            edited = time.monotonic()
            for rel in chosen:
                with (root / rel).open("a") as handle:
                    handle.write(f"# edited in round {round_}\n")
            # Let the events arrive first: what is timed is the work of the model call.
            await tracker.settle(quiet=0.2, since=edited, timeout=CONVERGE_S)
            begin = time.perf_counter()
            entries = await tracker.changes_since_snapshot()
            call_s = time.perf_counter() - begin
            begin = time.perf_counter()
            await tracker.changes_since_snapshot()
            idle_s = time.perf_counter() - begin
            begin = time.perf_counter()
            subprocess.run(
                ["git", "status", "--porcelain=v2", "-z", "--untracked-files=all"],
                cwd=root,
                capture_output=True,
                check=True,
                env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
            )
            full_s = time.perf_counter() - begin
            begin = time.perf_counter()
            subprocess.run(
                ["git", "status", "--porcelain=v2", "-z", "--untracked-files=all", "--", *chosen],
                cwd=root,
                capture_output=True,
                check=True,
                env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
            )
            limited_s = time.perf_counter() - begin
            reverted = time.monotonic()
            git(root, "checkout", "-q", "--", *chosen)
            await tracker.settle(quiet=0.2, since=reverted, timeout=CONVERGE_S)
            if round_ > 0:  # the first round warms the page cache
                with_changes.append(call_s)
                idle.append(idle_s)
                full.append(full_s)
                limited.append(limited_s)
                seen_counts.append(len(entries))
    finally:
        watching, fallback = tracker.watching, tracker.fallback_reason or ""
        await tracker.stop()
    return {
        "start_ms": start_ms,
        "call_ms": median_ms(with_changes),
        "idle_ms": median_ms(idle),
        "full_ms": median_ms(full),
        "limited_ms": median_ms(limited),
        "entries_min": min(seen_counts),
        "entries_max": max(seen_counts),
        "watching": watching,
        "fallback": fallback,
    }


def inotify_watches() -> int:
    """Inotify watches held by this process (from /proc/self/fdinfo)."""
    total = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            with open(f"/proc/self/fdinfo/{fd}") as info:
                total += sum(1 for line in info if line.startswith("inotify wd:"))
        except OSError:
            continue
    return total


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def memory_child(root: Path, args: argparse.Namespace) -> None:
    """(b), in a process of its own: start, watch, answer a call, and report the memory."""
    before = rss_mb()
    log: list[str] = []
    tracker = tracker_for(root, args, log)
    await tracker.start()
    await tracker.snapshot()
    files = tracked_files(root)[:5]
    for rel in files:
        with (root / rel).open("a") as handle:
            handle.write("# memory round\n")
    await wait_for_events(tracker, 5)
    await asyncio.sleep(3 * args.poll_interval if tracker.watching == "polling" else 0.5)
    report = {
        "before_mb": before,
        "rss_mb": rss_mb(),
        "peak_mb": rss_mb("VmHWM"),
        "watches": inotify_watches(),
        "watching": tracker.watching,
    }
    await tracker.stop()
    git(root, "checkout", "-q", "--", *files)
    print(json.dumps(report))


def measure_memory(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    command = [
        sys.executable,
        __file__,
        "--memory-child",
        str(root),
        "--observer",
        args.observer,
        "--poll-interval",
        str(args.poll_interval),
    ]
    if args.max_watches is not None:
        command += ["--max-watches", str(args.max_watches)]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


@dataclass
class Truth:
    """The repository as full git commands see it: the reference for (c)."""

    head: str | None
    branch: str | None
    dirty: dict[str, tuple[str, str | None]]
    """Path → (XY, blob hash of the worktree file or None) for every path git status lists."""
    index: dict[str, str]
    """Path → blob of every tracked path (`git ls-files -s`)."""

    def content(self, path: str) -> str | None:
        """The blob hash of what the file holds: the worktree's if dirty, else the index's."""
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
        if any(part in EXCLUDED_DIRS for part in os.fsdecode(record).split("/")):
            continue  # never reported by policy, even when not ignored (node_modules, …)
        if not record:
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


def expected_entries(root: Path, then: Truth, now: Truth) -> set[tuple[str, str, str | None]]:
    """(path, status, old path) of each file whose content changed between the two truths.

    A path clean (or absent) at both moments is left out: when HEAD moved, its change is the
    branch line's to tell, not a file entry. A deleted and an added file with the same content
    are one file renamed.
    """
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


async def check_correctness(root: Path, args: argparse.Namespace) -> tuple[int, int]:
    """(c): differences in entries and in the status map, summed over the script's steps."""
    log: list[str] = []
    tracker = tracker_for(root, args, log)
    await tracker.start()
    entry_differences = status_differences = 0
    try:
        await tracker.settle(quiet=0.3)
        await tracker.snapshot()
        then = take_truth(root)
        for number, (what, step, end_of_turn) in enumerate(script(root), start=1):
            step()
            now = take_truth(root)
            want = expected_entries(root, then, now)
            want_branch = expected_branch(root, then, now)
            want_codes = {p: code for p, (code, _) in now.dirty.items()}
            begin = time.monotonic()
            got: list[FileChangeEntry] = []
            while True:
                await tracker.settle(quiet=0.3)
                got = await tracker.changes_since_snapshot()
                branch = next((e.detail for e in got if e.status == BRANCH), None)
                agree = entry_set(got) == want and branch == want_branch
                if (agree and tracker.status_map() == want_codes) or (
                    time.monotonic() - begin > CONVERGE_S
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
            if end_of_turn:
                await tracker.settle(quiet=0.3)
                await tracker.snapshot()
                then = take_truth(root)
    finally:
        await tracker.stop()
    return entry_differences, status_differences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--dirs", type=int, default=2_500)
    parser.add_argument("--runs", type=int, default=15, help="timed model calls for (a)")
    parser.add_argument("--observer", choices=["auto", "polling"], default="auto")
    parser.add_argument("--max-watches", type=int, help="cap the tracker's inotify watches")
    parser.add_argument("--poll-interval", type=float, default=2.0)
    parser.add_argument("--keep", type=Path, help="build the repository here and keep it")
    parser.add_argument("--memory-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child is not None:
        asyncio.run(memory_child(args.memory_child, args))
        return
    with tempfile.TemporaryDirectory(prefix="lsp-agent-changes-") as scratch:
        root = (args.keep or Path(scratch) / "repo").resolve()
        if args.keep and root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        begin = time.perf_counter()
        build_repository(root, args.files, args.dirs)
        tracked = len(tracked_files(root))
        print(
            f"generated {tracked} files in {count_dirs(root / 'src') + 1} folders under src/ "
            f"({count_dirs(root)} folders in all, clutter included) in "
            f"{time.perf_counter() - begin:.1f} s: {root}"
        )
        limit = read_int("/proc/sys/fs/inotify/max_user_watches")
        needed = count_dirs(root / "src") + 1 + 6
        print(
            f"inotify: max_user_watches = {limit}; the tracker needs about {needed} "
            f"({'enough' if limit is None or limit >= needed else 'TOO LOW: it will poll'})"
            + (f"; capped at {args.max_watches} by --max-watches" if args.max_watches else "")
        )

        print("\n(a) cost per model call, 5 files changed since the snapshot")
        cost = asyncio.run(measure_cost(root, args))
        print(
            f"  watching with: {cost['watching']}"
            + (f" ({cost['fallback']})" if cost["fallback"] else "")
        )
        print(f"  tracker start (first full status, watches)  {cost['start_ms']:8.1f} ms")
        print(
            f"  changes_since_snapshot, 5 files changed      {cost['call_ms']:8.1f} ms"
            f"   ({cost['entries_min']}-{cost['entries_max']} entries with diffs)"
        )
        print(f"  changes_since_snapshot, nothing new           {cost['idle_ms']:8.1f} ms")
        print(f"  git status limited to the 5 paths (for scale) {cost['limited_ms']:8.1f} ms")
        print(f"  one full git status                            {cost['full_ms']:8.1f} ms")
        print(
            f"  ratio: {cost['call_ms'] / cost['full_ms']:.3f}× a full git status (target ≤ 0.2×)"
        )

        print("\n(b) resident memory of a process running only the tracker")
        memory = measure_memory(root, args)
        print(f"  watching with: {memory['watching']}, inotify watches held: {memory['watches']}")
        print(f"  before start (interpreter + imports): {memory['before_mb']:.1f} MB")
        print(
            f"  while watching: {memory['rss_mb']:.1f} MB resident, peak {memory['peak_mb']:.1f} MB"
            " (target ≤ 150 MB)"
        )

        print("\n(c) correctness against full git status, step by step")
        entries, status = asyncio.run(check_correctness(root, args))
        print(f"  differences: {entries} in the entries, {status} in the status map (target 0)")


if __name__ == "__main__":
    main()
