"""An editor that stops reading for a while: the server goes on working, and loses nothing.

An extension host busy with a long task, or a Neovim waiting on a prompt, leaves the server's
output unread, and the pipe between them holds 64 KiB. The server must not stop with it: the
model's stream, the tools and the next model call go on, what the editor has not read waits in
order, and all of it arrives once the editor reads again.

Real `lsp-agent serve` over real pipes, driven byte by byte (a client library would read for
us), with the scripted model on loopback.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

from tests.fake_model import ScriptedModel, Step, reply, tool_call
from tests.raw_lsp import frame, read_frame, spawn_server

WAIT_S = 60.0
"""A hang guard: far above what the turn takes."""

TEXT = "".join(f"line {n:06d} of a long explanation the model writes first.\n" for n in range(2500))
"""About 150 KB of text before the tool call: over twice what the pipe holds."""


class Editor:
    """The editor's side of the pipes: reads only when the test says so."""

    def __init__(self, root: Path, tmp: Path, model: ScriptedModel) -> None:
        (tmp / "state").mkdir()
        (tmp / "home").mkdir()
        self.process = spawn_server(tmp / "state", tmp / "home")
        self.root = root
        self.model = model
        self.seen: list[dict[str, Any]] = []
        self.next_id = 0

    def send(self, payload: Any) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(frame(payload))
        self.process.stdin.flush()

    def request(self, method: str, params: Any) -> int:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def read_until(self, done: Any) -> dict[str, Any]:
        """Read (answering the server's own requests) until a message `done` accepts."""
        assert self.process.stdout is not None
        while True:
            message = read_frame(self.process.stdout)
            assert message is not None, "the server closed its output"
            self.seen.append(message)
            if "method" in message and "id" in message:
                items = message.get("params", {}).get("items", [])
                result = (
                    [None] * len(items) if message["method"].endswith("configuration") else None
                )
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})
            if done(message):
                return message

    def answer(self, request_id: int) -> dict[str, Any]:
        return self.read_until(lambda m: m.get("id") == request_id and "method" not in m)

    def initialize(self) -> None:
        settings = {"model": "test-model", "baseUrl": self.model.base_url}
        asked = self.request(
            "initialize",
            {
                "processId": None,
                "rootUri": self.root.as_uri(),
                "capabilities": {},
                "initializationOptions": {
                    "lspAgent": settings,
                    "lspAgentClient": {"events": True, "showsAnswers": True},
                },
            },
        )
        assert "result" in self.answer(asked)
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        # Whatever the server asks after `initialized` is answered before the test stops reading.
        self.status()

    def status(self) -> dict[str, Any]:
        asked = self.request(
            "workspace/executeCommand", {"command": "lspAgent.status", "arguments": [{}]}
        )
        answer = self.answer(asked)
        assert "result" in answer, answer
        return dict(answer["result"])


def texts(messages: list[dict[str, Any]]) -> str:
    return "".join(
        m["params"]["text"]
        for m in messages
        if m.get("method") == "lspAgent/event" and m["params"].get("kind") == "text"
    )


def test_the_turn_goes_on_while_the_editor_reads_nothing(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.md").write_text("notes\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    second_call = threading.Event()

    def then_answer(_: Any) -> Step:
        second_call.set()
        return reply("All done.")

    plan = {"items": [{"text": "Explain at length", "status": "completed"}]}
    with ScriptedModel() as model:
        model.add(tool_call("todo", plan, text=TEXT, chunks=400), then_answer)
        editor = Editor(root, tmp_path, model)
        try:
            editor.initialize()
            editor.request(
                "workspace/executeCommand",
                {"command": "lspAgent.start", "arguments": [{"prompt": "Explain."}]},
            )
            # The editor reads nothing now. The server streams the text (more than the pipe
            # holds) to it, runs the tool and calls the model again: all without a reader.
            assert second_call.wait(WAIT_S), (
                "the server stopped when the editor's pipe filled: the model was not called again"
            )
            # The editor reads again: everything is there, whole and in order.
            editor.read_until(lambda _: texts(editor.seen).endswith("All done."))
            assert texts(editor.seen) == TEXT + "All done."
            assert editor.status()["model"] == "test-model"
            asked = editor.request("shutdown", None)
            assert "result" in editor.answer(asked)
            editor.send({"jsonrpc": "2.0", "method": "exit"})
            assert editor.process.wait(WAIT_S) == 0
        finally:
            if editor.process.poll() is None:
                editor.process.kill()
                editor.process.wait(WAIT_S)
