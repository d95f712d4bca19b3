"""LSP messages as bytes, for the tests that drive `lsp-agent serve` over raw pipes (a client
library would refuse to send what they send, or would read for them), and `RawClient`: an
editor replayed message by message as its source sends them."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
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


Handler = Callable[[dict[str, Any]], Any]
"""Answers one request of the server's: its params → the result (an `Error` for an error,
`LATER` to answer it later with `RawClient.answer`)."""

LATER = object()
"""What a handler returns for a request the test answers later (a prompt on screen)."""


@dataclass(frozen=True)
class Error:
    """An error answer to one of the server's requests."""

    code: int
    message: str
    data: Any = None


class RawClient:
    """An editor replayed over the server's real stdio: requests and notifications sent as raw
    JSON exactly as that editor's source sends them, the server's requests answered by
    `handlers` (by method), everything the server wrote kept in `received`."""

    def __init__(self, state_dir: Path, home: Path, handlers: dict[str, Handler]) -> None:
        self.process = spawn_server(state_dir, home)
        self.handlers = handlers
        self.received: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._ids = itertools.count(1)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        while (message := read_frame(self.process.stdout)) is not None:
            method = message.get("method")
            if method is not None and "id" in message and method in self.handlers:
                result = self.handlers[method](message.get("params") or {})
                if result is not LATER:
                    self._answer(message["id"], result)
            with self._changed:
                self.received.append(message)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def _answer(self, msg_id: Any, result: Any) -> None:
        if isinstance(result, Error):
            error = {"code": result.code, "message": result.message}
            if result.data is not None:
                error["data"] = result.data
            self._write({"jsonrpc": "2.0", "id": msg_id, "error": error})
        else:
            self._write({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def answer(self, msg_id: Any, result: Any) -> None:
        """Answer a request of the server's that no handler answered (a prompt the user
        answers later)."""
        self._answer(msg_id, result)

    def _write(self, payload: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(frame(payload))
        self.process.stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        self._write({"jsonrpc": "2.0", "method": method, "params": params})

    def send(self, method: str, params: Any) -> int:
        """Send a request; its id (`response` waits for the answer)."""
        msg_id = next(self._ids)
        self._write({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return msg_id

    def response(self, msg_id: int, timeout: float = 60) -> dict[str, Any]:
        """The server's answer to request `msg_id`, once it came."""
        return self.wait_for(
            lambda m: m.get("id") == msg_id and "method" not in m,
            f"the answer to request {msg_id}",
            timeout,
        )

    def request(self, method: str, params: Any, timeout: float = 60) -> Any:
        """Send a request and wait for its result (an error answer fails the test)."""
        answer = self.response(self.send(method, params), timeout)
        assert "error" not in answer, answer
        return answer.get("result")

    def wait_for(
        self, fact: Callable[[dict[str, Any]], bool], what: str, timeout: float = 60
    ) -> dict[str, Any]:
        """The first message the server wrote for which `fact` holds, waiting for it."""
        with self._changed:
            seen = 0
            while True:
                for message in self.received[seen:]:
                    if fact(message):
                        return message
                seen = len(self.received)
                if self.process.poll() is not None and not self._reader.is_alive():
                    raise AssertionError(f"the server exited before {what}")
                if not self._changed.wait(timeout):
                    raise AssertionError(f"timed out waiting for {what}")

    def messages(self, method: str) -> list[dict[str, Any]]:
        """Every message of `method` the server wrote so far."""
        with self._changed:
            return [m for m in self.received if m.get("method") == method]

    def close(self) -> None:
        """`shutdown`, `exit`, and the process gone."""
        if self.process.poll() is None:
            try:
                self.request("shutdown", None, timeout=10)
                self.notify("exit", None)
            except (AssertionError, OSError):
                self.process.kill()
            self.process.wait(timeout=10)
        self._reader.join(timeout=10)
