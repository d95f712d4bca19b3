"""Benchmark: the edit statistics of a scripted session that hits every failure reason (issue 6).

Starts the real server over stdio (`python -m lsp_agent serve`) as a bare LSP client would
(`tests/editor.py`, capabilities "minimal": applyEdit without documentChanges, so it cannot delete
files), in a temporary git repository with Python, JSON and TypeScript files and a skill that
owns `apply_patch`. A scripted model on loopback (`tests/fake_model.py`) drives two sessions:
first-try edits, retries that land after a failure, and one attempt for each failure reason of
`lsp_agent.tools.stats.REASONS`, plus `denied` (a permission rule) and `edit_file` with old equal to
new. Between two turns the user changes a file on disk that the model read before, and the
model edits it without reading it again: the content-hash rule must refuse that edit (`stale`).
The user rejects one edit in the editor, with a reason.

It prints every edit attempt (what the script expects it to count, what the transcript recorded,
the first line the model was told), then the figures of `lspAgent.status` per session and
overall (attempts, succeeded, first-try successes and rate, failures by reason), and the figures
rebuilt from each session's transcript records.

Exit status 1 when a reason of `REASONS` was never counted, when an attempt was counted under
another reason than the script expects, or when the transcript and `lspAgent.status` disagree.

Usage: .venv/bin/python benchmarks/edit_stats.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsprotocol import types

from lsp_agent.tools.stats import EDIT_TOOLS, REASONS, EditStats
from tests.editor import Editor, start_editor
from tests.fake_model import Body, ScriptedModel, ToolCalls, reply, tool_call

OK = "ok"
"""What a move that should land expects."""

APP_PY = '''\
"""A tiny greeter."""

import json


def load(path):
    with open(path) as f:
        return json.load(f)


def greet(name):
    print("hello", name)


def farewell(name):
    print("bye", name)
'''

CONFIG_JSON = """\
{
  "name": "demo",
  "port": 8080,
  "debug": false
}
"""

GREETING_TS = """\
export function greeting(name: string): string {
  return `Hello, ${name}!`;
}
"""

UTIL_TS = """\
export const shout = (text: string): string => text.toUpperCase();
"""

SKILL = """\
---
name: refactor
description: Change several files at once with one patch.
tools: [apply_patch]
---
Send one patch for the whole change; read every file it touches first.
"""

FILES = {
    "app.py": APP_PY,
    "config.json": CONFIG_JSON,
    "src/greeting.ts": GREETING_TS,
    "src/util.ts": UTIL_TS,
    "vendor/lib.py": "VERSION = 1\n",
    "old.txt": "obsolete\n",
    ".agents/skills/refactor/SKILL.md": SKILL,
}

PERMISSIONS = [{"tool": "edit_file", "match": "vendor/*", "decision": "deny"}]
"""The user's rule that makes one attempt `denied`."""

OVERLAPPING = """\
--- a/app.py
+++ b/app.py
@@ -11,2 +11,2 @@
 def greet(name):
-    print(f"Hello, {name}!")
+    print(f"Hi, {name}!")
@@ -11,2 +11,2 @@
-def greet(name):
+def greet(who):
     print(f"Hello, {name}!")
"""

UNCHANGED = """\
--- a/src/greeting.ts
+++ b/src/greeting.ts
@@ -1,2 +1,2 @@
 export function greeting(name: string): string {
-  // Greets one person.
+  // Greets one person.
"""

DELETE_OLD = "*** Begin Patch\n*** Delete File: old.txt\n*** End Patch\n"

TWO_FILES = """\
*** Begin Patch
*** Update File: app.py
@@ def greet(name):
-    print(f"Hello, {name}!")
+    print(f"Hello there, {name}!")
*** Update File: src/greeting.ts
@@ export function greeting(name: string): string {
-  return `Hello, ${name}!`;
+  return `Hello there, ${name}!`;
*** End Patch
"""


@dataclass(frozen=True)
class Move:
    """One reply of the scripted model: a tool call, and what the statistics should count."""

    step: ToolCalls
    expect: str | None = None
    """For an edit tool: `ok`, or the failure reason the attempt must be counted under."""
    note: str = ""
    """What the move exercises, for the printout."""
    reject: str | None = None
    """When set, the user rejects the edit this move proposes, with this failureReason."""


@dataclass(frozen=True)
class Turn:
    """One `lspAgent.ask`: what the user does first, the prompt, the model's moves."""

    prompt: str
    moves: list[Move]
    before: Callable[[Path], None] | None = None
    """What the user does before asking (e.g. changes a file on disk)."""


EDITOR_FAILS = "\0the editor fails"
"""A `reject` that makes the editor answer `workspace/applyEdit` with an error, not a choice."""


@dataclass
class User:
    """How the user answers `workspace/applyEdit`: applies it, unless a rejection is pending."""

    pending: str | None = None

    def decide(self, _: types.ApplyWorkspaceEditParams) -> tuple[bool, str | None]:
        if self.pending is None:
            return True, None
        reason, self.pending = self.pending, None
        if reason == EDITOR_FAILS:
            raise RuntimeError("the editor's applyEdit handler crashed")
        return False, reason


@dataclass
class Attempt:
    """One counted attempt, as the transcript recorded it next to what the script expected."""

    tool: str
    paths: list[str]
    expect: str
    got: str
    note: str
    told: str = ""


@dataclass
class SessionRun:
    """What one scripted session produced."""

    id: str
    expected: list[tuple[str, str]] = field(default_factory=list)
    """(expected outcome, note) of each edit move, in order."""
    attempts: list[Attempt] = field(default_factory=list)
    rebuilt: EditStats = field(default_factory=EditStats)
    """The figures rebuilt from the transcript's `edit` events."""


def read(path: str) -> Move:
    return Move(tool_call("read_file", {"path": path}))


def edit(path: str, old: str, new: str, expect: str, note: str, reject: str | None = None) -> Move:
    return Move(
        tool_call("edit_file", {"path": path, "old": old, "new": new}), expect, note, reject
    )


def apply_patch(text: str, expect: str, note: str) -> Move:
    return Move(tool_call("apply_patch", {"patch": text}), expect, note)


def user_renames_the_project(root: Path) -> None:
    """Between turns the user edits config.json on disk, outside the editor."""
    path = root / "config.json"
    path.write_text(path.read_text().replace('"demo"', '"demo-app"'))


def first_session() -> list[Turn]:
    greet = '    print("hello", name)'
    tidy = [
        read("app.py"),
        edit("app.py", "    print('hello', name)", "x", "not_found", "old with the wrong quotes"),
        edit("app.py", greet, '    print(f"Hello, {name}!")', OK, "retry with the exact text"),
        edit("app.py", "(name):", "(name: str):", "ambiguous", "old matches greet and farewell"),
        edit(
            "app.py",
            "def farewell(name):",
            "def farewell(name: str) -> None:",
            OK,
            "retry with enough context",
        ),
        edit("app.py", "", "import os\n", "empty_old", "empty old"),
        edit("app.py", "def load(path):", "def load(path:", "syntax", "breaks Python"),
        edit("app.py", "import json", "import json", "no_change", "old equal to new"),
        Move(
            tool_call("edit_file", {"path": "app.py", "old": "import json"}),
            "bad_arguments",
            "no `new` argument",
        ),
        edit("../outside.py", "a", "b", "path", "outside the workspace"),
        Move(
            tool_call("write_file", {"path": "app.py", "content": "print('hi')\n"}),
            "exists",
            "write_file on an existing file",
        ),
        edit("src/util.ts", "toUpperCase", "toLocaleUpperCase", "unread", "never read"),
        read("config.json"),
        edit("config.json", '"port": 8080', '"port": 8081', OK, "first try (JSON)"),
        read("src/greeting.ts"),
        edit("src/greeting.ts", "${name}!`;", "${name}!;", "syntax", "breaks TypeScript"),
        edit(
            "src/greeting.ts",
            "${name}!`",
            "${name}`",
            "rejected",
            "the user rejects it in the editor",
            reject="keep the exclamation mark",
        ),
        read("src/greeting.ts"),
        edit(
            "src/greeting.ts",
            "): string {",
            "): string {\n  // Greets one person.",
            "editor",
            "the editor fails the request",
            reject=EDITOR_FAILS,
        ),
        edit(
            "src/greeting.ts",
            "): string {",
            "): string {\n  // Greets one person.",
            OK,
            "the same edit again",
        ),
        read("vendor/lib.py"),
        edit("vendor/lib.py", "VERSION = 1", "VERSION = 2", "denied", "a rule denies vendor/*"),
    ]
    again = [
        edit("config.json", '"debug": false', '"debug": true', "stale", "changed on disk since"),
        read("config.json"),
        edit("config.json", '"debug": false', '"debug": true', OK, "re-read, then edited"),
        apply_patch(TWO_FILES, "locked", "apply_patch before load_skill"),
        Move(tool_call("load_skill", {"name": "refactor"})),
        apply_patch("Please make the greeting friendlier.", "bad_patch", "prose, not a patch"),
        apply_patch(OVERLAPPING, "overlap", "two hunks on the same lines"),
        read("src/greeting.ts"),
        apply_patch(UNCHANGED, "no_change", "+ lines equal to - lines"),
        read("old.txt"),
        apply_patch(DELETE_OLD, "unsupported", "the editor cannot delete files"),
        apply_patch(TWO_FILES, OK, "one patch over two files"),
    ]
    return [
        Turn("Tidy up the greeter, the config and the TypeScript greeting.", tidy),
        Turn(
            "Turn debugging on, then make the greeting friendlier everywhere.",
            again,
            before=user_renames_the_project,
        ),
    ]


def second_session() -> list[Turn]:
    moves = [
        Move(
            tool_call(
                "write_file", {"path": "src/farewell.ts", "content": "export const bye = 1;\n"}
            ),
            OK,
            "new file, first try (TypeScript)",
        ),
        edit(
            "app.py", "import json", "import json\nimport sys", "unread", "read in another session"
        ),
        read("app.py"),
        edit("app.py", "import json", "import json\nimport sys", OK, "retry after reading"),
        read("src/util.ts"),
        edit("src/util.ts", "toUpperCase()", "toLocaleUpperCase()", OK, "first try"),
    ]
    return [Turn("Add a farewell module and prepare app.py for arguments.", moves)]


def scripted(move: Move, user: User) -> Callable[[Body], ToolCalls]:
    """The model's reply for `move`; arms the user's rejection when the move wants one."""

    def step(_: Body) -> ToolCalls:
        user.pending = move.reject
        return move.step

    return step


def make_workspace(root: Path) -> None:
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    git = ["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=b@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)


async def command(editor: Editor, name: str, *arguments: Any) -> Any:
    """A command's JSON result as plain dicts and lists."""
    return await editor.client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=name, arguments=list(arguments))
    )


def transcript_attempts(path: Path, run: SessionRun) -> None:
    """Pair each `edit` event of the transcript with the move that made it and its tool result."""
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    run.rebuilt = EditStats.from_events(records)
    names: dict[str, str] = {}
    told: list[str] = []
    for record in records:
        message = record.get("message") if record.get("type") == "message" else None
        if not isinstance(message, dict):
            continue
        for call in message.get("tool_calls") or []:
            names[call["id"]] = call["function"]["name"]
        called = names.get(str(message.get("tool_call_id")))
        if message.get("role") == "tool" and called in EDIT_TOOLS:
            told.append(_first_line(str(message.get("content", ""))))
    events = [r for r in records if r.get("type") == "event" and r.get("kind") == "edit"]
    for index, event in enumerate(events):
        expect, note = run.expected[index] if index < len(run.expected) else ("?", "unscripted")
        run.attempts.append(
            Attempt(
                event["tool"],
                event["paths"],
                expect,
                OK if event["ok"] else event.get("reason", "error"),
                note,
                told[index] if index < len(told) else "",
            )
        )
    for expect, note in run.expected[len(events) :]:
        run.attempts.append(Attempt("?", [], expect, "(not recorded)", note))


def _first_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("<")]
    return lines[0] if lines else ""


async def run_sessions(root: Path, state: Path, home: Path) -> tuple[list[SessionRun], Any]:
    """Drive both sessions through the real server; the runs and `lspAgent.status`."""
    user = User()
    with ScriptedModel() as model:
        settings = {"baseUrl": model.base_url, "model": "test-model", "permissions": PERMISSIONS}
        editor = await start_editor(root, "minimal", settings, state_dir=state, home=home)
        editor.decide = user.decide
        runs: list[SessionRun] = []
        try:
            for turns in (first_session(), second_session()):
                run = SessionRun((await command(editor, "lspAgent.newSession"))["session"])
                for turn in turns:
                    if turn.before is not None:
                        turn.before(root)
                    model.add(*(scripted(move, user) for move in turn.moves), reply("Done."))
                    run.expected += [(m.expect, m.note) for m in turn.moves if m.expect]
                    result = await command(
                        editor, "lspAgent.ask", {"prompt": turn.prompt, "session": run.id}
                    )
                    if result["status"] != "completed" or model.remaining:
                        raise SystemExit(f"turn did not complete as scripted: {result}")
                runs.append(run)
            status = await command(editor, "lspAgent.status")
            listed = await command(editor, "lspAgent.sessions")
        finally:
            await editor.client.shutdown_session()
            await editor.client.stop()
    transcripts = {entry["session"]: Path(entry["transcript"]) for entry in listed}
    for run in runs:
        transcript_attempts(transcripts[run.id], run)
    return runs, status


def print_attempts(number: int, run: SessionRun) -> None:
    print(f"\nsession {number} ({run.id}): {len(run.attempts)} edit attempts  (! = miscounted)")
    print(f"    {'#':>2}  {'tool':<11} {'paths':<23} {'expected':<13} {'counted':<13} what")
    for index, attempt in enumerate(run.attempts, start=1):
        mark = " " if attempt.expect == attempt.got else "!"
        paths = ", ".join(attempt.paths) or "-"
        print(
            f"  {mark} {index:>2}  {attempt.tool:<11} {paths:<23} {attempt.expect:<13} "
            f"{attempt.got:<13} {attempt.note}"
        )
        if attempt.told:
            print(f"        told: {attempt.told[:92]}")


def print_figures(columns: list[tuple[str, dict[str, Any]]]) -> None:
    print("\nedit statistics (lspAgent.status)")
    width = max(len(label) for label, _ in columns) + 2
    print(
        f"  {'':<{width}} {'attempts':>8} {'succeeded':>9} {'first try':>9} "
        f"{'first-try rate':>14} {'success rate':>12}"
    )
    for label, figures in columns:
        first_rate = figures["firstTryRate"]
        success_rate = figures["successRate"]
        print(
            f"  {label:<{width}} {figures['attempts']:>8} {figures['succeeded']:>9} "
            f"{figures['firstTry']:>9} {_rate(first_rate):>14} {_rate(success_rate):>12}"
        )
    reasons = sorted({r for _, figures in columns for r in figures["failures"]})
    print("\nfailures by reason")
    print(f"  {'':<14}" + "".join(f"{label:>{width}}" for label, _ in columns))
    for reason in reasons:
        counts = "".join(f"{figures['failures'].get(reason, 0):>{width}}" for _, figures in columns)
        known = "" if reason in REASONS else "   (not in stats.REASONS)"
        print(f"  {reason:<14}{counts}{known}")
    total = "".join(f"{figures['failed']:>{width}}" for _, figures in columns)
    print(f"  {'all failures':<14}{total}")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def check(runs: list[SessionRun], status: Any) -> list[str]:
    """What is wrong with the run: reasons never counted, miscounts, disagreeing figures."""
    problems: list[str] = []
    overall = status["edits"]
    missing = [reason for reason in REASONS if not overall["failures"].get(reason)]
    if missing:
        problems.append("reasons of stats.REASONS never counted: " + ", ".join(missing))
    by_session = {entry["session"]: entry["edits"] for entry in status["sessions"]}
    for number, run in enumerate(runs, start=1):
        for index, attempt in enumerate(run.attempts, start=1):
            if attempt.expect != attempt.got:
                problems.append(
                    f"session {number} attempt {index} ({attempt.tool}, {attempt.note}): "
                    f"expected {attempt.expect}, counted {attempt.got}"
                )
        if run.rebuilt.to_json() != by_session.get(run.id):
            problems.append(f"session {number}: transcript figures differ from lspAgent.status")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it (must not exist)")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="edit-stats-"))
    try:
        root, state, home = base / "project", base / "state", base / "home"
        for folder in (root, state, home):
            folder.mkdir(parents=True)
        make_workspace(root)
        print("real server over stdio, bare LSP client (no documentChanges), scripted model")
        print(f"workspace: {', '.join(rel for rel in FILES if not rel.startswith('.'))}")
        runs, status = asyncio.run(run_sessions(root, state, home))
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)

    for number, run in enumerate(runs, start=1):
        print_attempts(number, run)
    by_session = {entry["session"]: entry["edits"] for entry in status["sessions"]}
    columns = [(f"session {n}", by_session[run.id]) for n, run in enumerate(runs, start=1)]
    print_figures([*columns, ("overall", status["edits"])])

    print("\nrecorded in the transcripts (EditStats.from_events of the `edit` events)")
    for number, run in enumerate(runs, start=1):
        same = run.rebuilt.to_json() == by_session[run.id]
        agree = "same as lspAgent.status" if same else "DIFFERS from lspAgent.status"
        print(f"  session {number} ({agree}): {json.dumps(run.rebuilt.to_json())}")

    problems = check(runs, status)
    covered = len([r for r in REASONS if status["edits"]["failures"].get(r)])
    print(f"\nreasons of stats.REASONS counted: {covered} of {len(REASONS)}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
