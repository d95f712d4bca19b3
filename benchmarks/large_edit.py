"""Benchmark: one edit of a 50 000-line Python file, from the model's call to the editor's edit.

Runs the edit tools in process, as a session runs them: a workspace in a temporary folder, the
in-memory editor of `lsp_agent.testing` with the file open in a buffer (so the landed text is
the buffer's next version), the model's read recorded, then `edit_file` (one line changed in
the middle of the file) and `apply_patch` (two hunks, near the top and the bottom), each
followed by the `WorkspaceEdit` the LSP adapter builds for VS Code (`workspace_edit`: the
minimal text edits in UTF-16). A third run lands only the first hunk of the patch, so the
model's per-hunk report is computed too.

It prints the median CPU time of this process (worker threads included) and the median wall
time of N runs for each whole path, then the CPU time of the stages on their own:
planning (`plan_edit`, `plan_patch`), the syntax guard (`syntax.check`), the text edits, the
unified diff the model reads back, and the per-hunk report.

Usage: .venv/bin/python benchmarks/large_edit.py [--lines N] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsp_agent.lsp.port import EditCapabilities, workspace_edit
from lsp_agent.port import Document, EditProposal, FileChange
from lsp_agent.testing import MemoryPort
from lsp_agent.text import unified_diff
from lsp_agent.tools import outcome, patch, syntax
from lsp_agent.tools.editing import EditTools
from lsp_agent.tools.edits import plan_edit
from lsp_agent.tools.propose import Proposer
from lsp_agent.tools.reads import Reads
from lsp_agent.tools.results import EditCounts
from lsp_agent.tools.workspace import Workspace

VSCODE = EditCapabilities(document_changes=True, create=True, delete=True, annotations=True)


def big_python(lines: int) -> str:
    """A Python module of about `lines` lines: many small functions with repeated lines."""
    out: list[str] = ['"""A generated module."""\n', "\n"]
    number = 0
    while len(out) < lines:
        out += [
            "\n",
            f"def function_{number}(value):\n",
            "    # add one, then double\n",
            f"    result = value + {number}\n",
            "    return result * 2\n",
        ]
        number += 1
    return "".join(out)


_RUNS = iter(range(1_000_000))


def fresh(text: str) -> str:
    """`text` with a first line of its own, so that every run starts from a new text."""
    return f"# run {next(_RUNS)}\n{text}"


def middle_function(text: str) -> int:
    """The number of the function in the middle of the file."""
    return text.count("def function_") // 2


def two_hunk_patch(text: str) -> str:
    last = text.count("def function_") - 1
    return (
        "*** Begin Patch\n*** Update File: big.py\n"
        "@@ def function_3(value):\n-    result = value + 3\n+    result = value + 300\n"
        f"@@ def function_{last}(value):\n-    result = value + {last}\n"
        f"+    result = value + {last}00\n*** End Patch\n"
    )


def timed(runs: int, make: Callable[[], Setup], method: str) -> tuple[float, float]:
    """(median CPU, median wall) time in milliseconds of `runs` runs of `Setup.<method>`, each
    on a fresh setup (prepared untimed).

    CPU time is this process's, worker threads included: on a loaded machine the wall time
    also counts other processes' turns.
    """
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(runs):
        setup = make()
        spent = asyncio.run(setup.timed(method))
        cpu.append(spent[0])
        wall.append(spent[1])
    return statistics.median(cpu), statistics.median(wall)


def timed_sync(
    runs: int, call: Callable[[str], object], prepare: Callable[[str], object] | None = None
) -> float:
    """Median CPU time in milliseconds of `runs` calls of `call` on a fresh copy of the text
    (`prepare` runs on it first, untimed)."""
    times: list[float] = []
    for _ in range(runs):
        text = fresh(TEXT[0])
        if prepare is not None:
            prepare(text)
        start = time.process_time()
        call(text)
        times.append((time.process_time() - start) * 1000)
    return statistics.median(times)


TEXT: list[str] = [""]
"""The generated file, set once by `main`."""


class Setup:
    """A fresh workspace with the big file open and read, for one run of one tool."""

    def __init__(self, root: Path, text: str, land_first_hunk_only: bool = False) -> None:
        self.path = root / "big.py"
        self.path.write_text(text, encoding="utf-8")
        self.port = MemoryPort()
        self.port.open(self.path, text)
        self.reads = Reads()
        self.reads.saw(self.path, Document(text, 1))
        self.tools = EditTools(Proposer(Workspace(root), self.port, self.reads))
        self.text = text
        if land_first_hunk_only:
            # The user keeps the first hunk only: the top of the file as planned, the rest not.
            self.port.land = first_hunk_only(text, _plan(text))

    async def timed(self, method: str) -> tuple[float, float]:
        """Run `method`, after what it needs done first; (CPU ms, wall ms) of `method` alone."""
        if method == "second_edit":
            await self.edit()  # the edit before: the file was checked once already
            self.port.proposals.clear()
        start, start_cpu = time.perf_counter(), time.process_time()
        await getattr(self, method)()
        return (time.process_time() - start_cpu) * 1000, (time.perf_counter() - start) * 1000

    async def edit(self, shift: int = 0) -> None:
        n = middle_function(self.text) + shift
        result = await self.tools.edit_file(
            "big.py",
            f"    result = value + {n}\n",
            f"    result = value + {n} + 1\n",
            review=True,
            counts=EditCounts(),
        )
        assert result.ok, result.text
        self._lsp_edit()

    async def second_edit(self) -> None:
        await self.edit(shift=1)

    async def patch(self) -> None:
        result = await self.tools.apply_patch(
            two_hunk_patch(self.text), review=True, counts=EditCounts()
        )
        assert result.ok, result.text
        self._lsp_edit()

    def _lsp_edit(self) -> None:
        (proposal,) = self.port.proposals
        workspace_edit(proposal, VSCODE, "utf-16")


def first_hunk_only(text: str, planned: str) -> str:
    """What lands when the user unticks the second hunk of `two_hunk_patch`."""
    cut = "def function_10("
    return planned[: planned.index(cut)] + text[text.index(cut) :]


def _plan(text: str) -> str:
    change = _planned(text)
    assert change.after is not None
    return change.after


def _planned(text: str) -> patch.PlannedChange:
    (change,) = patch.plan_patch(
        patch.parse_patch(two_hunk_patch(text)), lambda name: (Path(name), text)
    )
    return change


def _report(before: str, planned: patch.PlannedChange, landed: str) -> object:
    """The per-hunk report, about the model's hunks where the planner gives them."""
    assert planned.after is not None
    hunks = getattr(planned, "hunks", ())
    if hunks:
        return outcome.hunk_outcomes(before, planned.after, landed, hunks)
    return outcome.hunk_outcomes(before, planned.after, landed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=15)
    options = parser.parse_args()
    text = TEXT[0] = big_python(options.lines)
    runs = options.runs
    print(f"file: {text.count(chr(10))} lines, {len(text) / 1e6:.2f} MB; {runs} runs each")
    syntax.check("warm.py", None, "x = 1\n")  # load the grammar once, as a server has

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder).resolve()
        print("whole path (tool call through the in-memory editor + the LSP WorkspaceEdit):")
        for name, land_first, method in (
            ("edit_file, one line in the middle", False, "edit"),
            ("edit_file, the next edit of that file", False, "second_edit"),
            ("apply_patch, two hunks", False, "patch"),
            ("apply_patch, the user keeps one hunk", True, "patch"),
        ):

            def make(land_first: bool = land_first) -> Setup:
                # A text no earlier run saw: nothing parsed or diffed before helps this run.
                return Setup(root, fresh(text), land_first)

            cpu, wall = timed(runs, make, method)
            print(f"  {name:<42} CPU {cpu:7.1f} ms   wall {wall:7.1f} ms")

        print("stages (median CPU):")
        path = root / "big.py"
        stages: list[tuple[str, Callable[[str], object], Callable[[str], object] | None]] = [
            ("plan_edit", lambda t: plan_edit(t, *_edit(t)), None),
            ("plan_patch (parse + place two hunks)", _plan, None),
            ("syntax guard, first edit of the file", lambda t: _check(t, "+ 1\n"), None),
            (
                "syntax guard, next edit of the file",
                lambda t: _check(_after(t), "+ 2\n"),
                lambda t: _check(t, "+ 1\n"),
            ),
            ("syntax guard, an edit that breaks it", lambda t: _check(t, "+ (1\n"), None),
            ("LSP text edits, edit_file", lambda t: _lsp(path, t, _after(t)), None),
            ("LSP text edits, two-hunk patch", lambda t: _lsp(path, t, _plan(t)), None),
            ("unified diff read back, edit_file", lambda t: unified_diff("b", t, _after(t)), None),
            ("unified diff read back, patch", lambda t: unified_diff("b", t, _plan(t)), None),
            ("plan_patch + per-hunk report (one hunk kept)", _report_stage, None),
        ]
        for label, call, prepare in stages:
            print(f"  {label:<42} {timed_sync(runs, call, prepare):7.1f} ms")


def _edit(text: str) -> tuple[str, str]:
    n = middle_function(text)
    return f"    result = value + {n}\n", f"    result = value + {n} + 1\n"


def _after(text: str) -> str:
    return plan_edit(text, *_edit(text))


def _check(text: str, change: str) -> object:
    """The guard on the edit of `_edit`, its new line ending in `change` instead of `+ 1`."""
    old, _ = _edit(text)
    return syntax.check("big.py", text, text.replace(old, old.replace("\n", " " + change), 1))


def _lsp(path: Path, before: str, after: str) -> object:
    proposal = EditProposal("l", "d", (FileChange(path, before, after, 1),), True)
    return workspace_edit(proposal, VSCODE, "utf-16")


def _report_stage(text: str) -> object:
    planned = _planned(text)
    assert planned.after is not None
    return _report(text, planned, first_hunk_only(text, planned.after))


if __name__ == "__main__":
    main()
