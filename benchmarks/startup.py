"""Benchmark: how soon a language server answers `initialize`, how soon lsp-agent is ready for a
first command, and what each holds in memory once idle — beside its peers, in the same run.

Each server is started over stdio as an editor starts it and sent `initialize`; the figures are
the time from process start to its answer, then (lsp-agent) to the answer of a first command
that needs the agent stack (`lspAgent.newSession`), and the resident memory once the server has
used no CPU for 0.2 s after `initialized`. Runs are interleaved (A B C A B C …) so that the
machine's load falls on every server alike.

- `lsp-agent`: this checkout (`python -m lsp_agent serve`), the package compiled as
  `pip install .` leaves it.
- `--before DIR`: the same command with the code of another checkout first on `PYTHONPATH`
  (e.g. `git worktree add /tmp/before <commit>`), in the same virtualenv.
- `--peers`: jedi-language-server (itself on pygls) and pylsp, from a virtualenv of their own
  made in `.cache/peers/` on first use (`pip install jedi-language-server python-lsp-server`).

Targets (DESIGN.md §8): `initialize` answered ≤ 0.5 s and ≤ 0.75 × jedi-language-server's;
ready for a first command no later than jedi-language-server answers `initialize`; idle RSS
≤ 55 MB.

Usage: .venv/bin/python benchmarks/startup.py [runs] [--before DIR] [--peers]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from first_ask import INITIALIZED, Raw, compile_package, execute

from tests.editor import server_env

PEERS = Path(__file__).resolve().parents[1] / ".cache" / "peers"
"""The peers' own virtualenv (`.cache/` is ignored by git)."""


@dataclass
class Server:
    """One server to start, and what was measured of it."""

    name: str
    command: list[str]
    env: dict[str, str]
    ours: bool
    """lsp-agent (ready = a first command answered), or a peer (ready = `initialize`)."""
    initialize: list[float] = field(default_factory=list)
    ready: list[float] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)


def once(server: Server, root: Path) -> None:
    started = time.perf_counter()
    raw = Raw(server.env, server.command)
    try:
        raw.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {}},
            }
        )
        raw.answer(1)
        server.initialize.append(time.perf_counter() - started)
        raw.send(INITIALIZED)
        if server.ours:
            raw.send(execute(2, "lspAgent.newSession", {}))
            if "result" not in raw.answer(2):
                raise RuntimeError(f"{server.name}: lspAgent.newSession failed")
            server.ready.append(time.perf_counter() - started)
        raw.settle()
        server.rss.append(raw.rss_mb())
    finally:
        raw.close()


def peers() -> list[tuple[str, list[str]]]:
    """jedi-language-server and pylsp, installed into `.cache/peers/` when missing."""
    jedi, pylsp = PEERS / "bin" / "jedi-language-server", PEERS / "bin" / "pylsp"
    if not (jedi.exists() and pylsp.exists()):
        subprocess.run([sys.executable, "-m", "venv", str(PEERS)], check=True)
        subprocess.run(
            [
                str(PEERS / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "jedi-language-server",
                "python-lsp-server",
            ],
            check=True,
        )
    return [("jedi-language-server", [str(jedi)]), ("pylsp", [str(pylsp)])]


def figures(values: list[float], unit: str) -> str:
    if not values:
        return "—"
    scale, fmt = (1000.0, "{:.0f} ms") if unit == "s" else (1.0, "{:.1f} MB")
    low, mid, high = (
        fmt.format(v * scale) for v in (min(values), statistics.median(values), max(values))
    )
    return f"{mid} ({low}–{high})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=int, nargs="?", default=10)
    parser.add_argument("--before", type=Path, default=None, help="a checkout of older code")
    parser.add_argument("--peers", action="store_true", help="jedi-language-server and pylsp")
    args = parser.parse_args()
    compile_package()
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        root, state, home = base / "project", base / "state", base / "home"
        for made in (root, state, home):
            made.mkdir()
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        env = server_env(state, home)
        command = [sys.executable, "-m", "lsp_agent", "serve"]
        servers = [Server("lsp-agent", command, env, ours=True)]
        if args.before is not None:
            before = args.before.resolve()
            subprocess.run(
                [sys.executable, "-m", "compileall", "-q", str(before / "lsp_agent")], check=True
            )
            servers.append(
                # PYTHONSAFEPATH: `python -m` would otherwise look in this working directory
                # (this checkout) before PYTHONPATH.
                Server(
                    f"before ({before})",
                    command,
                    {**env, "PYTHONPATH": str(before), "PYTHONSAFEPATH": "1"},
                    ours=True,
                )
            )
        if args.peers:
            servers += [Server(name, cmd, dict(os.environ), ours=False) for name, cmd in peers()]
        for _ in range(args.runs):
            for server in servers:
                once(server, root)
    print(f"{args.runs} runs each, interleaved; median (min–max)")
    for server in servers:
        print(f"  {server.name}")
        print(f"    start → initialize answered:     {figures(server.initialize, 's')}")
        if server.ours:
            print(f"    start → first command answered:  {figures(server.ready, 's')}")
        print(f"    idle RSS:                        {figures(server.rss, 'MB')}")


if __name__ == "__main__":
    main()
