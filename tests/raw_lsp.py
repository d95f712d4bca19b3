"""LSP messages as bytes, for the tests that drive `lsp-agent serve` over raw pipes (a client
library would refuse to send what they send, or would read for them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from tests.editor import server_env


def frame(payload: Any) -> bytes:
    """One message, framed as an editor sends it."""
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_frame(stream: IO[bytes]) -> dict[str, Any] | None:
    """The next message the server wrote; None once it closed its output."""
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    assert length is not None, "the server framed a message without Content-Length"
    return dict(json.loads(stream.read(length)))


def spawn_server(state_dir: Path, home: Path) -> subprocess.Popen[bytes]:
    """`lsp-agent serve` on pipes the test reads and writes itself (its log discarded)."""
    return subprocess.Popen(
        [sys.executable, "-m", "lsp_agent", "serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=server_env(state_dir, home),
    )
