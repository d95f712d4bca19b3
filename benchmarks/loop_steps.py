"""Benchmark: how long `lsp-agent serve` holds its event loop while a model floods it.

Every request of the editor waits while the server's event loop runs one step (a callback or a
task's slice between two awaits), so the longest steps bound how late `lspAgent.status`, a
`didChange` or a cancel can be answered, whatever the client. This measures the steps from inside
the server, so that a slow client or an endpoint in the same process does not blur them.

The server runs with a `sitecustomize` module on its `PYTHONPATH` (written to a temporary folder;
nothing of it is in the package) that times every step of the loop and, for a step still running
after 20 ms, samples where the loop's thread is every 5 ms. The server is started under a real LSP
client (`tests/editor.py`), left to finish starting, then asked while the scripted endpoint
streams each flood: 2 MB of answer in 16-character deltas, and 20 MB in one delta. Printed per
flood: the number of steps, their p99 and longest, and where the longest were spent.

Usage: .venv/bin/python benchmarks/loop_steps.py [--floods 2000000:16,20000000:20000000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.editor import start_editor
from tests.fake_model import ScriptedModel, flood, reply

PROBE = r"""
import asyncio.events, collections, json, os, sys, threading, time, traceback

_out = os.environ.get("LOOP_STEPS_OUT")
if _out:
    _now = {"start": None}
    _steps = []
    _where = collections.Counter()
    _run = asyncio.events.Handle._run

    def _timed(self):
        start = time.perf_counter()
        _now["start"] = start
        try:
            _run(self)
        finally:
            _now["start"] = None
            _steps.append((time.monotonic(), time.perf_counter() - start))

    asyncio.events.Handle._run = _timed
    _main = threading.main_thread().ident

    def _sample():
        while True:
            time.sleep(0.005)
            start = _now["start"]
            if start is None or time.perf_counter() - start < 0.02:
                continue
            frame = sys._current_frames().get(_main)
            if frame is None:
                continue
            stack = traceback.extract_stack(frame)[-6:]
            _where[" <- ".join(
                f"{os.path.basename(f.filename)}:{f.lineno} {f.name}" for f in reversed(stack)
            )] += 5

    threading.Thread(target=_sample, daemon=True).start()

    _exit = os._exit

    def _dump(code):
        with open(_out, "w") as handle:
            json.dump({"steps": _steps, "where": dict(_where)}, handle)
        _exit(code)

    os._exit = _dump
"""


async def run(floods: list[tuple[int, int]]) -> list[tuple[str, float, float]]:
    """Runs the floods; returns each one's label and span on the system's monotonic clock (the
    server's steps are stamped with the same clock)."""
    spans = []
    with tempfile.TemporaryDirectory(prefix="lsp-agent-steps-") as temp:
        root, state, home = (Path(temp) / name for name in ("project", "state", "home"))
        for path in (root, state, home):
            path.mkdir()
        (root / "README.md").write_text("a project\n")
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        with ScriptedModel() as model:
            settings = {"baseUrl": model.base_url, "model": "test-model", "contextWindow": 10**8}
            editor = await start_editor(
                root, "visual-studio-code", settings, state_dir=state, home=home
            )
            try:
                model.add(reply("ready"))
                await editor.ask("start")  # the server has started and made its agent
                for size, delta in floods:
                    session = (await editor.command("lspAgent.newSession", {})).session
                    model.add(flood(size, delta))
                    began = time.monotonic()
                    result = await editor.ask("go", session=session)
                    spans.append(
                        (
                            f"{size / 1e6:g} MB in {delta:,}-character deltas",
                            began,
                            time.monotonic(),
                        )
                    )
                    assert result.status == "completed", result
            finally:
                await editor.client.shutdown_session()
                await editor.client.stop()
    return spans


def report(out: Path, spans: list[tuple[str, float, float]]) -> None:
    found: dict[str, Any] = json.loads(out.read_text())
    for label, began, ended in [("the whole run, start-up included", 0.0, float("inf")), *spans]:
        steps = sorted(ms * 1000 for at, ms in found["steps"] if began <= at <= ended)
        p99 = steps[min(len(steps) - 1, int(len(steps) * 0.99))]
        print(
            f"{label}: {len(steps)} steps, median {statistics.median(steps):.2f} ms, "
            f"p99 {p99:.1f} ms, longest {', '.join(f'{ms:.0f}' for ms in steps[-3:][::-1])} ms"
        )
    where: dict[str, int] = found["where"]
    if where:
        print("where the loop was during steps longer than 20 ms (sampled every 5 ms):")
        for stack, ms in sorted(where.items(), key=lambda item: -item[1])[:8]:
            print(f"  {ms:4d} ms  {stack[:200]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--floods", default="2000000:16,20000000:20000000")
    args = parser.parse_args()
    floods = [
        (int(size), int(delta))
        for size, delta in (item.split(":") for item in args.floods.split(","))
    ]
    with tempfile.TemporaryDirectory(prefix="lsp-agent-probe-") as probe:
        Path(probe, "sitecustomize.py").write_text(PROBE)
        out = Path(probe) / "steps.json"
        # The server is a child process with this environment: it loads the probe at start-up.
        os.environ["PYTHONPATH"] = probe
        os.environ["LOOP_STEPS_OUT"] = str(out)
        spans = asyncio.run(run(floods))
        report(out, spans)


if __name__ == "__main__":
    main()
