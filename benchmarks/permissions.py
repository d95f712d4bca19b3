"""Benchmark: how long the permission wall takes to decide a command, and whether the event loop
waits for it (the issue: a 200 KB command kept the server from answering for 4.3 s).

In a small git project with a secret beside its code, it times `decide_command` on the harmless
corpus (median, p95, max), on the longest command the judge reads (8,000 characters of parts
that each look at the disk), and on a 200 KB and a 1 MB command (refused by size). Then it runs
the longest command through the gate, as the server does, and reports the longest the event
loop went without running while the gate decided.

It also runs the adversarial corpus through the decision function and prints the counts: tried,
allowed unasked, and the harmless commands asked (over-asking).

Usage: .venv/bin/python benchmarks/permissions.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsp_agent.config import Settings
from lsp_agent.context.cap import Spills
from lsp_agent.safety.permissions import ALLOW, MAX_COMMAND_CHARS, decide_command
from lsp_agent.safety.sandbox import Availability, Sandbox
from lsp_agent.testing import MemoryPort
from lsp_agent.tools.belt import Toolbox
from lsp_agent.tools.shell import run_env
from lsp_agent.tools.workspace import Workspace
from tests.permission_corpus import (
    ATTACKS,
    HARMLESS,
    attack_workspace,
    canary_name,
    fill,
    harmless_workspace,
)


def decide_in(box: Sandbox, home: Path, command: str) -> tuple[str, float]:
    started = time.perf_counter()
    verdict = decide_command(
        command,
        root=box.root,
        home=home,
        scanner=box.scanner,
        history=box.repository.secrets,
        path=run_env()["PATH"],
    )
    return verdict.decision, time.perf_counter() - started


async def loop_stall(root: Path, command: str) -> tuple[float, float]:
    """The gate deciding `command` (answered Deny): its duration and the event loop's longest
    gap meanwhile."""
    settings = Settings()
    tools = Toolbox(
        Workspace(root),
        MemoryPort(answer="Deny"),
        settings=lambda: settings,
        sandbox=Sandbox(root, Availability("bwrap", "benchmark")),
        spills=Spills(root.parent / "spills"),
    )
    gaps: list[float] = []
    done = asyncio.Event()

    async def heartbeat() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    beat = asyncio.create_task(heartbeat())
    started = time.perf_counter()
    await tools.run("bash", json.dumps({"command": command}))
    took = time.perf_counter() - started
    done.set()
    await beat
    return took, max(gaps)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="lsp-agent-bench-permissions-"))
    root = harmless_workspace(base / "harmless")
    home = base / "home"
    box = Sandbox(root, Availability("bwrap", "benchmark"))

    times: list[float] = []
    for _ in range(args.runs):
        for command in HARMLESS:
            times.append(decide_in(box, home, command)[1])
    times.sort()
    p95 = times[int(len(times) * 0.95)]
    print(
        f"harmless corpus ({len(HARMLESS)} commands × {args.runs}): median "
        f"{statistics.median(times) * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms, "
        f"max {times[-1] * 1000:.1f} ms per decision"
    )

    longest = " && ".join(f"cat src/util.py app.py a{i}.py" for i in range(400))
    longest = longest[: longest.rfind(" && ", 0, MAX_COMMAND_CHARS)]
    decision, took = decide_in(box, home, longest)
    print(f"longest command read ({len(longest):,} chars, {longest.count('&&') + 1} parts): "
          f"{decision} in {took * 1000:.0f} ms")  # fmt: skip
    for size in (200_000, 1_000_000):
        decision, took = decide_in(box, home, "ls " + "a" * size)
        print(f"{size // 1000} KB command: {decision} in {took * 1000:.2f} ms")

    took, stall = asyncio.run(loop_stall(root, longest + " && rm x"))
    print(
        f"gate deciding the longest command: {took * 1000:.0f} ms, the event loop's longest gap "
        f"meanwhile {stall * 1000:.1f} ms"
    )

    attacked = attack_workspace(base / "attacked")
    attack_box = Sandbox(attacked.root, Availability("bwrap", "benchmark"))
    allowed = 0
    for index, attack in enumerate(ATTACKS):
        command = fill(
            attack.command,
            canary=canary_name(index),
            outside=attacked.outside,
            home=attacked.home,
            port=9,
        )
        allowed += decide_in(attack_box, attacked.home, command)[0] == ALLOW
    asked = sum(decide_in(box, home, command)[0] != ALLOW for command in HARMLESS)
    print(
        f"adversarial corpus: tried {len(ATTACKS)}, allowed unasked {allowed}; harmless "
        f"{len(HARMLESS)}, asked {asked}"
    )


if __name__ == "__main__":
    main()
