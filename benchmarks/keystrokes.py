"""Benchmark: what a keystroke in a large open file costs the server.

Through `lsp-agent serve` over stdio (as `first_ask.py` drives it), in a git repository holding
one Python file of `--sizes` megabytes, opened in the "editor": `--keys` `didChange`
notifications of one character each, in the middle of the file, then `lspAgent.status`. The
figures are the server's CPU time per keystroke (all its threads, from /proc) and the time from
the first keystroke sent to the status answered, per keystroke: how long any request waits
behind typing. It covers the buffer kept in step and the change tracker told of the typing; it
leaves out the editor's own cost.

Beside it, in this process, the same keystrokes applied to the server's own buffer store
(`lsp_agent/lsp/documents.py`) and to pygls' workspace (`pygls.workspace.Workspace`, which the
server keeps out of the way): why the server keeps its buffers itself.

Usage: .venv/bin/python benchmarks/keystrokes.py [--sizes 1,10] [--keys 200]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from first_ask import INITIALIZED, Raw, compile_package, execute, initialize
from lsprotocol import types
from pygls.workspace import Workspace

from lsp_agent.lsp.documents import Buffers
from tests.editor import server_env

LINE = "value = compute(alpha, beta)  # a line of ordinary code\n"


def keystroke(uri: str, version: int, line: int) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "method": "textDocument/didChange",
        "params": {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [
                {
                    "range": {
                        "start": {"line": line, "character": 5},
                        "end": {"line": line, "character": 5},
                    },
                    "text": "x",
                }
            ],
        },
    }


def measure(megabytes: int, keys: int) -> tuple[float, float]:
    """CPU ms per keystroke, and wall ms per keystroke until a request behind them is answered."""
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        root = base / "repo"
        root.mkdir()
        lines = megabytes * 1_000_000 // len(LINE)
        path = root / "big.py"
        path.write_text(LINE * lines)
        subprocess.run(["git", "init", "-q", str(root)], check=True)
        state, home = base / "state", base / "home"
        state.mkdir()
        home.mkdir()
        server = Raw(server_env(state, home))
        try:
            initialize(server, root)
            server.send(INITIALIZED)
            uri = path.as_uri()
            server.send(
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/didOpen",
                    "params": {
                        "textDocument": {
                            "uri": uri,
                            "languageId": "python",
                            "version": 1,
                            "text": path.read_text(),
                        }
                    },
                }
            )
            server.send(execute(2, "lspAgent.status", {}))
            server.answer(2)
            server.settle()
            ticks = server.cpu_ticks()
            started = time.perf_counter()
            server.send(*(keystroke(uri, 2 + k, lines // 2) for k in range(keys)))
            server.send(execute(3, "lspAgent.status", {}))
            server.answer(3)
            wall = time.perf_counter() - started
            cpu = (server.cpu_ticks() - ticks) / os.sysconf("SC_CLK_TCK")
            return cpu / keys * 1000, wall / keys * 1000
        finally:
            server.close()


def stores(megabytes: int, keys: int) -> tuple[float, float]:
    """ms per keystroke applied to the server's buffer store, and to pygls' workspace."""
    lines = megabytes * 1_000_000 // len(LINE)
    text, uri = LINE * lines, "file:///big.py"
    changes = [
        types.TextDocumentContentChangePartial(
            range=types.Range(
                start=types.Position(line=lines // 2, character=5),
                end=types.Position(line=lines // 2, character=5),
            ),
            text="x",
        )
        for _ in range(keys)
    ]
    buffers = Buffers()
    buffers.open(uri, text, 1)
    started = time.perf_counter()
    for version, change in enumerate(changes, start=2):
        buffers.change(uri, version, [change], "utf-16")
    ours = (time.perf_counter() - started) / keys * 1000
    workspace = Workspace(None, types.TextDocumentSyncKind.Incremental)
    workspace.put_text_document(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
    )
    started = time.perf_counter()
    for version, change in enumerate(changes, start=2):
        document = types.VersionedTextDocumentIdentifier(uri=uri, version=version)
        workspace.update_text_document(document, change)
    library = (time.perf_counter() - started) / keys * 1000
    buffer = buffers.get(uri)
    assert buffer is not None
    assert buffer.source == workspace.get_text_document(uri).source
    return ours, library


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,10")
    parser.add_argument("--keys", type=int, default=200)
    args = parser.parse_args()
    compile_package()
    for megabytes in (int(size) for size in args.sizes.split(",")):
        cpu, wall = measure(megabytes, args.keys)
        print(
            f"{megabytes:3d} MB file, {args.keys} keystrokes: server CPU {cpu:.2f} ms per "
            f"keystroke; a request behind them waits {wall:.2f} ms per keystroke"
        )
        ours, library = stores(megabytes, args.keys)
        print(
            f"{megabytes:3d} MB file, the keystroke alone: the server's buffer store {ours:.3f} ms,"
            f" pygls' workspace {library:.3f} ms"
        )


if __name__ == "__main__":
    main()
