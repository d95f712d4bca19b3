"""Benchmark: how soon the first ask reaches the model, and what an idle server holds in memory.

Through `lsp-agent serve` over stdio, driven byte by byte, with the scripted model endpoint on
loopback (`tests/fake_model.py`), in a git repository of `--files` files:

- first ask with `initialized`: the client sends `initialized` and, at once, `lspAgent.ask`, as
  soon as `initialize` is answered; the figure is the time from sending them to the request's
  arrival at the model endpoint. It covers what loading is still under way (the agent stack
  loads in the background once `initialize` is answered), the settings request, making the
  session (system prompt, AGENTS.md, skills), the reminder and the request sent; it leaves out
  process start and `initialize` (`benchmarks/startup.py`).
- first ask once warm: the same ask sent to a server that has finished starting (its watcher
  ready, its CPU idle for 0.2 s), as when the user asks a moment after the editor opened
  (target ≤ 150 ms, whatever the repository's size).
- idle RSS: the resident memory of a server that answered `initialize` and `initialized` and has
  finished starting (its workspace watcher ready, read from `lspAgent.status`), before any ask
  (target ≤ 55 MB); and again after one ask.

Usage: .venv/bin/python benchmarks/first_ask.py [--files 1,50000] [--runs 5]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.editor import server_env
from tests.fake_model import ScriptedModel, reply


def compile_package() -> None:
    """Measure the package as users have it: `pip install .` compiles it at install, while an
    editable tree run with PYTHONDONTWRITEBYTECODE set would compile it at every start."""
    compileall.compile_dir(Path(__file__).resolve().parents[1] / "lsp_agent", quiet=1)


INITIALIZED: dict[str, Any] = {"jsonrpc": "2.0", "method": "initialized", "params": {}}


def execute(request_id: int, command: str, *arguments: Any) -> dict[str, Any]:
    """A `workspace/executeCommand` request."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "workspace/executeCommand",
        "params": {"command": command, "arguments": list(arguments)},
    }


def frame(payload: dict[str, Any]) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class Raw:
    """A server on stdio; its requests to the client get null results."""

    def __init__(self, env: dict[str, str], command: list[str] | None = None) -> None:
        self.process = subprocess.Popen(
            command or [sys.executable, "-m", "lsp_agent", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.stdin: IO[bytes] = self.process.stdin
        self.stdout: IO[bytes] = self.process.stdout

    def send(self, *payloads: dict[str, Any]) -> None:
        self.stdin.write(b"".join(frame(p) for p in payloads))
        self.stdin.flush()

    def read(self) -> dict[str, Any]:
        length = 0
        while True:
            line = self.stdout.readline()
            if not line:
                raise RuntimeError("the server closed stdout")
            if line in (b"\r\n", b"\n"):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        message: dict[str, Any] = json.loads(self.stdout.read(length))
        return message

    def answer(self, request_id: Any) -> dict[str, Any]:
        while True:
            message = self.read()
            if "method" in message and "id" in message:
                items = message.get("params", {}).get("items", [])
                result = [None] * len(items) if "configuration" in message["method"] else None
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
            elif message.get("id") == request_id and "method" not in message:
                return message

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_ticks(self) -> int:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    def settle(self) -> None:
        """Until the server has used no CPU for 0.2 s: what it does after start-up (imports in
        the background, the sandbox probe) is over."""
        last, quiet = self.cpu_ticks(), 0
        while quiet < 4:
            time.sleep(0.05)
            now = self.cpu_ticks()
            quiet = quiet + 1 if now == last else 0
            last = now

    def close(self) -> None:
        self.send({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"})
        self.send({"jsonrpc": "2.0", "method": "exit"})
        self.process.wait(10)


def repository(root: Path, files: int) -> Path:
    root.mkdir(parents=True)
    for index in range(files):
        folder = root / f"pkg{index // 1000}"
        folder.mkdir(exist_ok=True)
        (folder / f"m{index}.py").write_text(f"VALUE = {index}\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    # No automatic gc: with 200 000 new objects the commit would start one in the background,
    # still writing into .git when the folder is removed.
    identity = ["-c", "user.name=b", "-c", "user.email=b@x", "-c", "gc.auto=0"]
    subprocess.run(["git", "-C", str(root), *identity, "commit", "-qm", "."], check=True)
    return root


def initialize(server: Raw, root: Path, model: ScriptedModel | None = None) -> None:
    """`initialize` for the folder `root`, answered; with `model`, its settings."""
    params: dict[str, Any] = {
        "processId": os.getpid(),
        "rootUri": root.as_uri(),
        "capabilities": {},
    }
    if model is not None:
        params["initializationOptions"] = {
            "lspAgent": {"baseUrl": model.base_url, "model": "bench"}
        }
    server.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    server.answer(1)


def first_ask(root: Path, env: dict[str, str]) -> float:
    with ScriptedModel() as model:
        server = Raw(env)
        try:
            initialize(server, root, model)
            model.add(reply("hi"))
            sent = time.perf_counter()
            server.send(INITIALIZED, execute(2, "lspAgent.ask", {"prompt": "hi"}))
            server.answer(2)
            return model.timings[0].received - sent
        finally:
            server.close()


def once_started(root: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """The RSS of a server that finished starting, the first ask's time to the model then, and
    the RSS after it."""
    with ScriptedModel() as model:
        server = Raw(env)
        try:
            initialize(server, root, model)
            server.send(INITIALIZED)
            ready = False
            request = 10
            while not ready:
                request += 1
                server.send(execute(request, "lspAgent.status", {}))
                ready = bool(server.answer(request)["result"]["changes"]["ready"])
            server.settle()
            idle = server.rss_mb()
            model.add(reply("hi"))
            sent = time.perf_counter()
            server.send(execute(2, "lspAgent.ask", {"prompt": "hi"}))
            server.answer(2)
            return idle, model.timings[0].received - sent, server.rss_mb()
        finally:
            server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", default="1,50000")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    compile_package()
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        (base / "home").mkdir()
        env = server_env(base / "state", base / "home")
        for size in [int(n) for n in args.files.split(",")]:
            root = repository(base / f"repo{size}", size)
            times = [first_ask(root, env) * 1000 for _ in range(args.runs)]
            started = [once_started(root, env) for _ in range(args.runs)]
            idle = statistics.median(run[0] for run in started)
            later = [run[1] * 1000 for run in started]
            after = statistics.median(run[2] for run in started)
            print(
                f"{size:>7} files: first ask reaches the model, sent with `initialized`: median "
                f"{statistics.median(times):.0f} ms (min {min(times):.0f}, max {max(times):.0f}); "
                f"sent once warm: median {statistics.median(later):.0f} ms (min "
                f"{min(later):.0f}, max {max(later):.0f}) (target ≤ 150); RSS idle {idle:.1f} MB "
                f"(target ≤ 55), after one ask {after:.1f} MB"
            )


if __name__ == "__main__":
    main()
