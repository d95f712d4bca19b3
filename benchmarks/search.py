"""Benchmark: the `search` tool versus ripgrep run directly (target: ≤ 1.1×), and `#codebase`.

Builds a repository of a few thousand Python-like files in a temporary folder (or searches the
folder given as the first argument), then times, for a rare and a common pattern, the median
of N runs of:

- `files.search(...)`, the tool as the agent calls it (subprocess, JSON parsing, cap at 50);
- `rg -n PATTERN`, run directly as a user would, all output read;
- ripgrep with exactly the tool's flags, all output read (the tool minus its Python side).

Then `#codebase` for one prompt: the terms found, searched and ranked as a turn does before its
first model call, beside `rg -n -i` with the same terms run directly.

Usage: .venv/bin/python benchmarks/search.py [REPO] [--files N] [--runs N] [--pattern REGEX]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsp_agent.agent import codebase
from lsp_agent.tools import files
from lsp_agent.tools.workspace import Workspace

WORDS = ["alpha", "beta", "parse", "render", "index", "value", "cache", "store", "event", "queue"]


def build_repository(root: Path, count: int, seed: int = 7) -> None:
    """Write `count` source files of ~80 lines under `root`, 40 per folder, a few needles."""
    rng = random.Random(seed)
    for number in range(count):
        folder = root / "src" / f"pkg{number // 40:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = [f'"""Module {number}."""', ""]
        for function in range(10):
            name = "_".join(rng.sample(WORDS, 2))
            lines.append(f"def {name}_{function}(value, other=None):")
            for _ in range(6):
                a, b, c = rng.sample(WORDS, 3)
                lines.append(f"    {a} = {b}.{c}(value)  # {rng.choice(WORDS)}")
            lines.append("")
        if number % 997 == 0:
            lines.append(f"NEEDLE_{number} = 'rare marker'")
        (folder / f"mod{number:05d}.py").write_text("\n".join(lines) + "\n")
    (root / ".gitignore").write_text("build/\n*.pyc\n")


def median_ms(samples: list[float]) -> float:
    """The median of `samples` (seconds) in milliseconds."""
    return statistics.median(samples) * 1000


async def measure(root: Path, pattern: str, runs: int) -> None:
    """Time the three ways of searching `root` for `pattern` and print the figures.

    The three are interleaved within each round, so a noisy neighbour slows all of them alike.
    """
    ws = Workspace(root)
    rg = files.find_rg()
    direct = [rg, "-n", "--", pattern]
    same_flags = files.search_argv(rg, pattern, ["."], None)
    samples: dict[str, list[float]] = {"tool": [], "direct": [], "flags": []}
    result = ""
    for round_ in range(runs + 1):
        start = time.perf_counter()
        result = await files.search(ws, pattern)
        tool_s = time.perf_counter() - start
        start = time.perf_counter()
        subprocess.run(direct, cwd=root, capture_output=True, check=False)
        direct_s = time.perf_counter() - start
        start = time.perf_counter()
        subprocess.run(same_flags, cwd=root, capture_output=True, check=False)
        flags_s = time.perf_counter() - start
        if round_ > 0:  # the first round warms the page cache
            samples["tool"].append(tool_s)
            samples["direct"].append(direct_s)
            samples["flags"].append(flags_s)
    tool_ms, direct_ms, flags_ms = (median_ms(samples[k]) for k in ("tool", "direct", "flags"))
    counts = subprocess.run(
        [rg, "-c", "--no-filename", "--", pattern], cwd=root, capture_output=True, text=True
    ).stdout.split()
    print(f"pattern {pattern!r}: {sum(int(n) for n in counts)} matching lines")
    print(f"  tool's first line: {result.splitlines()[0]}")
    print(f"  search tool            {tool_ms:8.1f} ms")
    print(
        f"  rg -n (direct)         {direct_ms:8.1f} ms   tool/direct = {tool_ms / direct_ms:.2f}×"
    )
    print(f"  rg, the tool's flags   {flags_ms:8.1f} ms   tool/flags  = {tool_ms / flags_ms:.2f}×")


async def measure_codebase(root: Path, prompt: str, runs: int) -> None:
    """Time `#codebase` for `prompt` beside ripgrep run directly with the same terms."""
    ws = Workspace(root)
    terms = codebase.terms(prompt)
    direct = [files.find_rg(), "-n", "-i", *(arg for term in terms for arg in ("-e", term))]
    samples: dict[str, list[float]] = {"codebase": [], "direct": []}
    found = None
    for round_ in range(runs + 1):
        start = time.perf_counter()
        found = await codebase.search(ws, prompt)
        codebase_s = time.perf_counter() - start
        start = time.perf_counter()
        subprocess.run([*direct, "--", "."], cwd=root, capture_output=True, check=False)
        direct_s = time.perf_counter() - start
        if round_ > 0:
            samples["codebase"].append(codebase_s)
            samples["direct"].append(direct_s)
    assert found is not None
    ours, theirs = median_ms(samples["codebase"]), median_ms(samples["direct"])
    print(f"#codebase {prompt!r}: terms {terms}, {found.summary}")
    print(f"  #codebase              {ours:8.1f} ms   ({len(found.text)} characters for the model)")
    print(f"  rg -n -i, same terms   {theirs:8.1f} ms   codebase/direct = {ours / theirs:.2f}×")


def main() -> None:
    """Parse arguments, build or take the repository, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", nargs="?", type=Path, help="search this folder instead")
    parser.add_argument("--files", type=int, default=3000, help="files to generate")
    parser.add_argument("--runs", type=int, default=15, help="timed runs per figure")
    parser.add_argument("--pattern", action="append", help="regex to time (repeatable)")
    args = parser.parse_args()
    patterns = args.pattern or [r"NEEDLE_\d+", r"def \w+_3\("]
    with tempfile.TemporaryDirectory(prefix="lsp-agent-bench-") as scratch:
        if args.repo is None:
            root = Path(scratch)
            build_repository(root, args.files)
            print(f"generated {args.files} files in {root}")
        else:
            root = args.repo.resolve()
            print(f"searching {root}")
        print(f"median of {args.runs} runs; target: tool ≤ 1.1× rg direct\n")
        for pattern in patterns:
            asyncio.run(measure(root, pattern, args.runs))
        prompt = "#codebase where do we `render_cache` the queue events?"
        asyncio.run(measure_codebase(root, prompt, args.runs))


if __name__ == "__main__":
    main()
