"""Benchmark: what MCP servers cost, and what they cost when none is configured.

Through `lsp-agent serve` (driven by the tests' LSP client, the scripted model on loopback), for
a server without MCP servers and one with a stdio server configured (`tests/mcp_story_server.py`):

- resident memory once the server has finished starting (its watcher ready, its CPU idle for
  0.2 s; nothing of MCP is started before a session needs it, so the two should not differ);
- the first turn: from the ask to the request at the model (with a server configured this
  includes importing the SDK in a worker thread, starting the server and listing its tools),
  and the resident memory after it.

Then, in this process, one 50 MB tool answer read over stdio by our transport
(`lsp_agent/mcp/stdio.py`) and by the SDK's own `stdio_client`: wall time, CPU time of this
process, and the event loop's longest gap meanwhile (how long an editor request could wait).

Usage: .venv/bin/python benchmarks/mcp_cost.py [--runs 3] [--megabytes 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.conftest import new_workspace
from tests.editor import start_editor
from tests.fake_model import ScriptedModel, reply

STORY = Path(__file__).resolve().parents[1] / "tests" / "mcp_story_server.py"


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


async def settled(pid: int) -> None:
    """Until the process used no CPU for 0.2 s (its start-up work done), 10 s at most."""
    for _ in range(50):
        before = cpu_ticks(pid)
        await asyncio.sleep(0.2)
        if cpu_ticks(pid) == before:
            return


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def served(with_mcp: bool) -> tuple[float, float, float]:
    """Idle RSS, first turn's time to the model, RSS after it."""
    with tempfile.TemporaryDirectory(prefix="lsp-agent-mcp-cost-") as temp:
        base = Path(temp)
        root = new_workspace(base / "project")
        (base / "state").mkdir()
        (base / "home").mkdir()
        with ScriptedModel() as model:
            settings: dict[str, Any] = {"baseUrl": model.base_url, "model": "test-model"}
            if with_mcp:
                entry = {"command": sys.executable, "args": [str(STORY), str(base / "marks")]}
                settings["mcpServers"] = {"story": entry}
            editor = await start_editor(
                root, "visual-studio-code", settings, state_dir=base / "state", home=base / "home"
            )
            try:
                await editor.tracker_ready()
                pid = editor.client._server.pid  # type: ignore[union-attr]
                await settled(pid)
                idle = rss_mb(pid)
                model.add(reply("Hello."))
                sent = time.perf_counter()
                await editor.ask("hello")
                first = model.timings[0].received - sent
                after = rss_mb(pid)
            finally:
                await editor.client.shutdown_session()
                await editor.client.stop()
    return idle, first, after


async def gaps(work: Callable[[], Awaitable[None]]) -> tuple[float, float, float]:
    """Wall time, this process's CPU time, and the event loop's longest gap during `work`."""
    longest = 0.0

    async def tick() -> None:
        nonlocal longest
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            longest = max(longest, time.perf_counter() - before - 0.005)

    ticker = asyncio.create_task(tick())
    wall, cpu = time.perf_counter(), time.process_time()
    await work()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    ticker.cancel()
    return wall, cpu, longest


async def big_answers(megabytes: int) -> None:
    from mcp import Client, StdioServerParameters

    from lsp_agent.mcp.connection import Connection
    from lsp_agent.mcp.servers import ServerSpec

    with tempfile.TemporaryDirectory() as marks:
        args = (str(STORY), marks)
        spec = ServerSpec(
            "story", "story", "bench", command=sys.executable, args=args, call_timeout=900
        )
        ours = Connection(spec, home=None, log=lambda _: None)
        await ours.start()

        async def through_ours() -> None:
            await ours.call("big", {"megabytes": megabytes})

        figures = await gaps(through_ours)
        await ours.stop()
        print(
            f"  {megabytes} MB over stdio, our transport: wall {figures[0]:.2f} s, CPU "
            f"{figures[1]:.2f} s, longest loop gap {figures[2] * 1000:.0f} ms"
        )
        parameters = StdioServerParameters(command=sys.executable, args=list(args))
        async with Client(parameters, read_timeout_seconds=900) as client:

            async def through_sdk() -> None:
                await client.call_tool("big", {"megabytes": megabytes})

            figures = await gaps(through_sdk)
        print(
            f"  {megabytes} MB over stdio, the SDK's stdio_client: wall {figures[0]:.2f} s, CPU "
            f"{figures[1]:.2f} s, longest loop gap {figures[2] * 1000:.0f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--megabytes", type=int, default=50)
    args = parser.parse_args()
    print("lsp-agent serve, median of", args.runs, "runs each")
    for with_mcp in (False, True):
        runs = [asyncio.run(served(with_mcp)) for _ in range(args.runs)]
        idle, first, after = (statistics.median(column) for column in zip(*runs, strict=True))
        label = "one stdio MCP server configured" if with_mcp else "no MCP server configured"
        print(
            f"  {label}: idle RSS {idle:.1f} MB; first turn's ask → model {first * 1000:.0f} ms; "
            f"RSS after it {after:.1f} MB"
        )
    print("one big answer, in this process")
    asyncio.run(big_answers(args.megabytes))


if __name__ == "__main__":
    main()
