"""Does `lsp-agent serve` end promptly however its editor leaves? A stress run over stdio.

Each round starts the server in a fresh git workspace, initializes it, sends `initialized` and
one request (a bad `lspAgent.ask`, answered with an error at once), then leaves one of three ways
while the server is still starting its workspace watcher:

  eof       stdin closed, nothing else (the editor died)
  exit      `exit` without `shutdown` (the specification wants exit code 1)
  shutdown  `shutdown`, then `exit` (exit code 0)

and measures how long the process takes to go, and its exit code. A process still alive after
`--bound` seconds is counted as stuck and killed.

Run: .venv/bin/python benchmarks/lifecycle.py [rounds per way] [--bound SECONDS] [--ways eof,exit]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.raw_lsp import frame, read_frame

WAYS = ("eof", "exit", "shutdown")
EXPECTED_CODE = {"eof": None, "exit": 1, "shutdown": 0}
"""The exit code each way must end with (None: any; the editor is gone either way)."""


def wait_for(stream: IO[bytes], request_id: int) -> dict[str, Any]:
    while True:
        message = read_frame(stream)
        if message is None:
            raise RuntimeError(f"the server closed stdout before answering request {request_id}")
        if message.get("id") == request_id and "method" not in message:
            return message


@dataclass
class Round:
    way: str
    seconds: float | None
    """From leaving to the process gone; None when it had to be killed."""
    code: int | None


def workspace(parent: Path, index: int) -> Path:
    root = parent / f"ws{index}"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def one_round(root: Path, way: str, bound: float, env: dict[str, str]) -> Round:
    server = subprocess.Popen(
        [sys.executable, "-m", "lsp_agent", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert server.stdin is not None
    assert server.stdout is not None
    send = server.stdin.write
    send(
        frame(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {}},
            }
        )
    )
    server.stdin.flush()
    wait_for(server.stdout, 1)
    send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    send(
        frame(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "workspace/executeCommand",
                "params": {"command": "lspAgent.ask", "arguments": [{"prompt": 3}]},
            }
        )
    )
    server.stdin.flush()
    wait_for(server.stdout, 2)
    if way == "shutdown":
        send(frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}))
        server.stdin.flush()
        wait_for(server.stdout, 3)
    if way in ("exit", "shutdown"):
        send(frame({"jsonrpc": "2.0", "method": "exit"}))
        server.stdin.flush()
    left = time.perf_counter()
    if way == "eof":
        server.stdin.close()
    try:
        code = server.wait(bound)
        seconds: float | None = time.perf_counter() - left
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
        code, seconds = None, None
    if not server.stdin.closed:
        server.stdin.close()
    server.stdout.close()
    return Round(way, seconds, code)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", type=int, nargs="?", default=100, help="rounds per way")
    parser.add_argument("--bound", type=float, default=5.0, help="seconds before 'stuck'")
    parser.add_argument("--ways", default=",".join(WAYS))
    args = parser.parse_args()
    ways = [w for w in args.ways.split(",") if w]
    results: list[Round] = []
    with tempfile.TemporaryDirectory() as folder:
        parent = Path(folder)
        env = {**os.environ, "LSP_AGENT_STATE_DIR": str(parent / "state")}
        index = 0
        for _ in range(args.rounds):
            for way in ways:
                index += 1
                results.append(one_round(workspace(parent, index), way, args.bound, env))
    failed = False
    for way in ways:
        rounds = [r for r in results if r.way == way]
        stuck = [r for r in rounds if r.seconds is None]
        times = [r.seconds for r in rounds if r.seconds is not None]
        wrong = [
            r
            for r in rounds
            if r.seconds is not None
            and EXPECTED_CODE[way] is not None
            and r.code != EXPECTED_CODE[way]
        ]
        codes = sorted({r.code for r in rounds if r.code is not None})
        line = f"{way:<9} {len(rounds)} rounds: {len(stuck)} stuck (> {args.bound:g} s)"
        if times:
            line += (
                f", gone in median {statistics.median(times) * 1000:.0f} ms,"
                f" max {max(times) * 1000:.0f} ms"
            )
        line += f", exit codes {codes}, {len(wrong)} wrong"
        print(line)
        failed = failed or bool(stuck or wrong)
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
