"""Process start → `initialize` answered, for `lsp-agent serve` over stdio (DESIGN §8: ≤ 0.5 s).

Run: .venv/bin/python benchmarks/startup.py [runs]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def frame(payload: dict[str, object]) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_message(stream: object) -> dict[str, object]:
    length = 0
    while True:
        line = stream.readline()  # type: ignore[attr-defined]
        if not line:
            raise RuntimeError("server closed stdout before answering")
        if line in (b"\r\n", b"\n"):
            break
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(stream.read(length))  # type: ignore[attr-defined,no-any-return]


def once(root: Path) -> float:
    command = [sys.executable, "-m", "lsp_agent", "serve"]
    started = time.perf_counter()
    server = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert server.stdin is not None and server.stdout is not None
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
    while read_message(server.stdout).get("id") != 1:
        pass
    elapsed = time.perf_counter() - started
    server.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
    server.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
    server.stdin.flush()
    server.wait(10)
    return elapsed


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    with tempfile.TemporaryDirectory() as folder:
        times = [once(Path(folder)) for _ in range(runs)]
    print(f"start → initialize answered over {runs} runs (target ≤ 0.5 s):")
    print(
        f"  median {statistics.median(times):.3f} s, min {min(times):.3f} s, max {max(times):.3f} s"
    )


if __name__ == "__main__":
    main()
