"""Process start → `initialize` answered, for `lsp-agent serve` over stdio (target ≤ 0.5 s).

Also prints start → first command answered (`lspAgent.status` right after `initialized`).

Run: .venv/bin/python benchmarks/startup.py [runs] [--mode entry|plain]

  entry  `python -m lsp_agent serve`, what editors launch (default): the agent stack is imported
         before `initialize` is answered (`lsp_agent/lsp/boot.py`)
  plain  the server alone, `connection.serve(create_server(), …)`: no command line, and the
         agent stack imported in the background after `initialized`
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from first_ask import compile_package

COMMANDS = {
    "entry": [sys.executable, "-m", "lsp_agent", "serve"],
    "plain": [
        sys.executable,
        "-c",
        "import sys; from lsp_agent.lsp.connection import serve, end_process; "
        "from lsp_agent.lsp.app import create_server; "
        "end_process(serve(create_server(), sys.stdin.buffer, sys.stdout.buffer))",
    ],
}


def frame(payload: dict[str, object]) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_message(stream: IO[bytes]) -> dict[str, Any]:
    length = 0
    while True:
        line = stream.readline()
        if not line:
            raise RuntimeError("server closed stdout before answering")
        if line in (b"\r\n", b"\n"):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(stream.read(length))  # type: ignore[no-any-return]


def wait_for(stream: IO[bytes], request_id: int) -> dict[str, Any]:
    while True:
        message = read_message(stream)
        if message.get("id") == request_id and "method" not in message:
            return message


def once(root: Path, command: list[str]) -> tuple[float, float]:
    """Seconds from process start to `initialize` answered, and to the first command answered."""
    started = time.perf_counter()
    server = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert server.stdin is not None
    assert server.stdout is not None
    server.stdin.write(
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
    initialized = time.perf_counter() - started
    server.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    server.stdin.write(
        frame(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "workspace/executeCommand",
                "params": {"command": "lspAgent.status", "arguments": [{}]},
            }
        )
    )
    server.stdin.flush()
    if "result" not in wait_for(server.stdout, 2):
        raise RuntimeError("lspAgent.status failed")
    ready = time.perf_counter() - started
    server.stdin.write(frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}))
    server.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
    server.stdin.flush()
    server.wait(10)
    return initialized, ready


def figures(times: list[float]) -> str:
    return (
        f"median {statistics.median(times):.3f} s, min {min(times):.3f} s, max {max(times):.3f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=int, nargs="?", default=10)
    parser.add_argument("--mode", choices=sorted(COMMANDS), default="entry")
    args = parser.parse_args()
    compile_package()
    with tempfile.TemporaryDirectory() as folder:
        results = [once(Path(folder), COMMANDS[args.mode]) for _ in range(args.runs)]
    print(f"mode {args.mode}, {args.runs} runs")
    print(f"  start → initialize answered (target ≤ 0.5 s): {figures([r[0] for r in results])}")
    print(f"  start → first command answered:              {figures([r[1] for r in results])}")


if __name__ == "__main__":
    main()
