"""Emacs with the README's recipes, as a user runs them: Debian's Emacs 28 with its packaged eglot
(1.9, `elpa-eglot`) and lsp-mode (8.0, `elpa-lsp-mode`), the real server and the scripted model
on loopback.

Emacs runs its terminal UI (`emacs -nw`) in tmux, not `--batch`: a batch Emacs is never idle, so
eglot's idle timer that sends the buffer's changes (`didChange`) never fires, and what the server
is told about an applied edit would be the batch mode's, not the user's. In a terminal, the
echo area, eglot's "Proceed?" question and the idle timers are the ones a user has. The test
is the user: it types `M-x` commands key by key (`tmux send-keys`), answers the questions on
screen, and reads facts — the screen, buffers through `emacsclient`, what the model was told —
never after a fixed time.

The init file is the README's snippet as written, but for the model's name (the scripted model
answers to `test-model`); the endpoint comes from `LSP_AGENT_BASE_URL`, as a user's would.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.editor import handles
from tests.fake_model import ScriptedModel, reply, told, tool_call
from tests.neovim import user_message
from tests.test_neovim_typing import held_until
from tests.test_plain_lsp import command, plain

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SERVER_BIN = Path(sys.executable).parent
PLACEHOLDER_MODEL = "qwen2.5-coder:7b"
"""The model the README's recipes name: the test answers to another."""
KEY_PAUSE_S = 0.02
"""Between two keys typed: pacing only, nothing waits on it."""
POLL_S = 0.05
FACT_TIMEOUT_S = 40.0


def readme_snippet(heading: str) -> str:
    """The first ```elisp block after the README line that starts with `heading`."""
    text = README.read_text(encoding="utf-8")
    start = text.index(heading)
    block = re.search(r"```elisp\n(.*?)```", text[start:], re.S)
    assert block is not None, f"README: no elisp block after {heading!r}"
    snippet = block.group(1)
    assert PLACEHOLDER_MODEL in snippet, f"README's {heading} recipe no longer names the model"
    return snippet.replace(PLACEHOLDER_MODEL, "test-model")


def emacs_env(tmp: Path, base_url: str) -> dict[str, str]:
    """A home of its own, no settings or keys of the machine, `lsp-agent` from this checkout
    first on PATH, and the scripted model's address."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("LSP_AGENT_", "OPENAI_", "ANTHROPIC_", "EMACS", "XDG_"))
        and key not in ("CONTEXT_WINDOW", "TMUX")
    }
    env.update(
        HOME=str(tmp / "home"),
        PATH=f"{SERVER_BIN}{os.pathsep}{env.get('PATH', '')}",
        PYTHONPATH=str(ROOT),
        LSP_AGENT_STATE_DIR=str(tmp / "state"),
        LSP_AGENT_BASE_URL=base_url,
        TERM="xterm-256color",
    )
    return env


class Emacs:
    """`emacs -nw` in a tmux pane of its own server, typed at key by key; read through
    `emacsclient` (a server the test starts, apart from the recipe)."""

    def __init__(self, init: str, workspace: Path, tmp: Path, base_url: str, file: str) -> None:
        for tool, package in (("emacs", "emacs-nox"), ("tmux", "tmux")):
            if shutil.which(tool) is None:
                pytest.fail(f"{tool} not found: `apt-get install {package}` (scripts/test.sh does)")
        home = tmp / "home"
        (home / ".emacs.d").mkdir(parents=True)
        # Native compilation of the packaged libraries would pop up a *Warnings* window of
        # its own now and then: not what this test looks at.
        (home / ".emacs.d" / "early-init.el").write_text(
            "(setq native-comp-deferred-compilation nil)\n"
        )
        (home / ".emacs.d" / "init.el").write_text(init, encoding="utf-8")
        sockets = tmp / "emacs-server"
        sockets.mkdir(mode=0o700)
        self.socket = sockets / "test"
        self.out = tmp / "emacs-value.txt"
        harness = tmp / "harness.el"
        harness.write_text(
            f'(setq server-socket-dir {_elisp_string(str(sockets))} server-name "test")\n'
            "(server-start)\n",
            encoding="utf-8",
        )
        self.env = emacs_env(tmp, base_url)
        self.tmux = ["tmux", "-S", str(tmp / "tmux.sock"), "-f", "/dev/null"]
        subprocess.run(
            [
                *self.tmux,
                "new-session",
                "-d",
                "-x",
                "150",
                "-y",
                "40",
                "-s",
                "user",
                "emacs",
                "-nw",
                "-l",
                str(harness),
                file,
            ],
            cwd=workspace,
            env=self.env,
            check=True,
            timeout=30,
        )
        self.until("Emacs's server socket", self.socket.exists)

    def keys(self, *keys: str) -> None:
        """Press `keys` (tmux key names: "Enter", "M-x", "C-x") one at a time."""
        for key in keys:
            subprocess.run([*self.tmux, "send-keys", "-t", "user", key], check=True, timeout=10)
            time.sleep(KEY_PAUSE_S)

    def type(self, text: str) -> None:
        """Type `text` character by character (as bytes: tmux reads a lone `;` as the end of
        its command)."""
        for char in text:
            hexes = [f"{byte:02x}" for byte in char.encode()]
            subprocess.run(
                [*self.tmux, "send-keys", "-t", "user", "-H", *hexes], check=True, timeout=10
            )
            time.sleep(KEY_PAUSE_S)

    def command(self, name: str, *answers: str) -> None:
        """`M-x name RET`, then each answer typed and confirmed with RET."""
        self.keys("M-x")
        self.type(name)
        self.keys("Enter")
        for answer in answers:
            self.type(answer)
            self.keys("Enter")

    def asking(self, question: str) -> bool:
        """Whether the minibuffer waits for an answer to `question` now: the cursor is on the
        screen's last line, after it (the question's text alone stays on screen once answered)."""
        shown = subprocess.run(
            [*self.tmux, "display-message", "-p", "-t", "user", "#{cursor_y} #{pane_height}"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.split()
        last = self.screen().rstrip("\n").splitlines()[-1:]
        return (
            len(shown) == 2
            and int(shown[0]) == int(shown[1]) - 1
            and bool(last)
            and question in last[0]
        )

    def screen(self) -> str:
        return subprocess.run(
            [*self.tmux, "capture-pane", "-p", "-J", "-t", "user"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout

    def value(self, expression: str) -> str:
        """What the Lisp `expression` (a string) is in the running Emacs."""
        self.out.unlink(missing_ok=True)
        subprocess.run(
            [
                "emacsclient",
                "-s",
                str(self.socket),
                "--eval",
                f"(with-temp-file {_elisp_string(str(self.out))} (insert {expression}))",
            ],
            env=self.env,
            capture_output=True,
            check=True,
            timeout=30,
        )
        return self.out.read_text(encoding="utf-8")

    def buffer(self, name: str) -> str:
        return self.value(
            f"(with-current-buffer {_elisp_string(name)} "
            "(buffer-substring-no-properties (point-min) (point-max)))"
        )

    def messages(self) -> str:
        """The *Messages* buffer: every message the echo area showed."""
        return self.buffer("*Messages*")

    def until(self, what: str, fact: Callable[[], Any]) -> Any:
        """Look at `fact` until it holds; fail with the screen if it never does."""
        deadline = time.monotonic() + FACT_TIMEOUT_S
        while True:
            value = fact()
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}; the screen:\n{self.screen()}")
            time.sleep(POLL_S)

    def on_screen(self, text: str) -> str:
        """The screen, once it shows `text`."""
        return str(self.until(f"{text!r} on screen", lambda: text in (s := self.screen()) and s))

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], timeout=10, check=False)


def _elisp_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git repository with a Python file and a README, committed."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "hello.py").write_text('def greet():\n    return "hello"\n', encoding="utf-8")
    (root / "NOTES.md").write_text("# Notes\n", encoding="utf-8")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "start"], check=True)
    return root


@pytest.fixture
def emacs_with(
    project: Path, tmp_path: Path, model: ScriptedModel
) -> Iterator[Callable[[str], Emacs]]:
    opened: list[Emacs] = []

    def open_emacs(heading: str) -> Emacs:
        opened.append(Emacs(readme_snippet(heading), project, tmp_path, model.base_url, "hello.py"))
        return opened[-1]

    yield open_emacs
    for emacs in opened:
        emacs.close()


def lsp_mode_ready(emacs: Emacs) -> None:
    """Wait until lsp-mode has initialized lsp-agent (not only "Connected … starting": a command
    sent before is refused), read in *Messages*: the echo area may show the next message."""
    emacs.until(
        "lsp-mode's server initialized", lambda: "initialized successfully" in emacs.messages()
    )


def reminder(request: dict[str, Any]) -> str:
    """The context note of a model request (the last user message)."""
    return str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


EDIT = [
    tool_call("read_file", {"path": "hello.py"}),
    tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hello, world"'}),
]


def test_eglot_ask_runs_while_you_type_and_its_edit_is_told_as_applied(
    emacs_with: Callable[[str], Emacs], model: ScriptedModel, project: Path
) -> None:
    emacs = emacs_with("**Emacs with eglot**")
    emacs.command("eglot")
    emacs.on_screen("Connected!")

    typed = threading.Event()
    model.add(held_until(typed, EDIT[0]), EDIT[1], reply("The greeting now says hello, world."))
    emacs.command("lsp-agent-ask", "greet the world")
    # The turn runs on while the user works elsewhere: Emacs is not frozen waiting for it.
    # (Until the edit has landed, the test looks only at the screen: an `emacsclient --eval`
    # leaves Emacs not idle until the next key, and eglot sends a buffer's changes when idle.)
    emacs.keys("C-x", "b")
    emacs.type("*scratch*")
    emacs.keys("Enter")
    emacs.type(";; typing while the agent works")
    emacs.on_screen(";; typing while the agent works")
    typed.set()

    emacs.on_screen("Proceed? (y or n)")
    emacs.keys("y")
    emacs.on_screen("The greeting now says hello, world.")
    assert "The greeting now says hello, world." in emacs.messages()
    assert emacs.buffer("hello.py") == 'def greet():\n    return "hello, world"\n'
    assert told(model, "edit_file").startswith("applied: hello.py\n")

    # The user changes another file; the next turn hears of the user's change only, before and
    # after the agent's edit is saved.
    emacs.keys("C-x", "b")
    emacs.type("hello.py")
    emacs.keys("Enter")
    (project / "NOTES.md").write_text("# Notes\n\nask about the greeting\n", encoding="utf-8")
    model.add(reply("Noted."))
    emacs.command("lsp-agent-ask", "anything new?")
    emacs.on_screen("Noted.")
    note = reminder(model.requests[-1])
    assert "<file_changes>" in note
    assert "NOTES.md" in note
    assert "hello.py" not in note

    emacs.keys("C-x", "C-s")
    emacs.until("hello.py saved", lambda: "hello, world" in (project / "hello.py").read_text())
    model.add(reply("Still nothing."))
    emacs.command("lsp-agent-ask", "and now?")
    emacs.on_screen("Still nothing.")
    assert "hello.py" not in reminder(model.requests[-1])


def test_eglot_code_action_starts_a_turn_about_the_cursor(
    emacs_with: Callable[[str], Emacs], model: ScriptedModel
) -> None:
    emacs = emacs_with("**Emacs with eglot**")
    emacs.command("eglot")
    emacs.on_screen("Connected!")
    model.add(reply("It returns the greeting."))

    emacs.keys("M-<", "C-n")  # the cursor on `return "hello"`
    emacs.command("eglot-code-actions")
    emacs.on_screen("Pick an action (default lsp-agent: explain this)")
    emacs.keys("Enter")

    emacs.on_screen("It returns the greeting.")
    # eglot asks at the point (an empty range): the function around it goes along.
    asked = user_message(model.requests[-1])
    assert asked.startswith("Explain what this code in hello.py does.")
    assert 'hello.py, lines 1-2:\n```\ndef greet():\n    return "hello"\n```' in asked


def test_eglot_edit_answered_no_is_told_as_the_users_rejection(
    emacs_with: Callable[[str], Emacs], model: ScriptedModel
) -> None:
    emacs = emacs_with("**Emacs with eglot**")
    emacs.command("eglot")
    emacs.on_screen("Connected!")
    model.add(*EDIT, reply("Left it as it was."))

    emacs.command("lsp-agent-ask", "greet the world")
    emacs.on_screen("Proceed? (y or n)")
    emacs.keys("n")

    emacs.on_screen("Left it as it was.")
    assert emacs.buffer("hello.py") == 'def greet():\n    return "hello"\n'
    assert told(model, "edit_file").startswith("not applied — the user rejected this edit")


def test_lsp_mode_ask_and_code_action_with_the_server_as_an_add_on(
    emacs_with: Callable[[str], Emacs], model: ScriptedModel
) -> None:
    emacs = emacs_with("**Emacs with lsp-mode**")
    emacs.command("lsp")
    emacs.on_screen("Import project root")
    emacs.keys("i")
    lsp_mode_ready(emacs)

    model.add(*EDIT, reply("The greeting now says hello, world."))
    emacs.command("lsp-agent-ask", "greet the world")
    emacs.on_screen("The greeting now says hello, world.")
    assert emacs.buffer("hello.py") == 'def greet():\n    return "hello, world"\n'
    assert told(model, "edit_file").startswith("applied: hello.py\n")

    model.add(reply("It returns the greeting."))
    emacs.keys("M-<", "C-n")
    emacs.command("lsp-execute-code-action")
    emacs.on_screen("Select code action:")
    # SPC completes a word in Emacs 28's minibuffer: C-q inserts it as typed.
    emacs.type("lsp-agent:")
    emacs.keys("C-q", "Space")
    emacs.type("explain")
    emacs.keys("Tab")
    emacs.on_screen("Select code action: lsp-agent: explain this")
    emacs.keys("Enter")
    emacs.on_screen("It returns the greeting.")
    asked = user_message(model.requests[-1])
    assert asked.startswith("Explain what this code in hello.py does.")
    assert "hello.py, lines 1-2:\n```\ndef greet():" in asked  # lsp-mode's empty range too
    # The turn's events went only to clients that ask for them: lsp-mode warned of none.
    assert "Unknown notification" not in emacs.value(
        '(if (get-buffer "*Warnings*") (with-current-buffer "*Warnings*" (buffer-string)) "")'
    )


def test_eglot_c_g_at_the_edit_prompt_is_the_users_rejection_at_once(
    emacs_with: Callable[[str], Emacs], model: ScriptedModel
) -> None:
    """eglot 1.9 sends no answer when the user quits its "Proceed?" prompt; the recipe's C-g
    answers it as a rejection, so the turn goes on at once (no lsp-agent-cancel needed)."""
    emacs = emacs_with("**Emacs with eglot**")
    emacs.command("eglot")
    emacs.on_screen("Connected!")
    model.add(*EDIT, reply("Left it as it was."))

    emacs.command("lsp-agent-ask", "greet the world")
    emacs.on_screen("Proceed? (y or n)")
    emacs.keys("C-g")
    emacs.on_screen("Left it as it was.")
    assert told(model, "edit_file").startswith("not applied — the user rejected this edit")
    assert emacs.buffer("hello.py") == 'def greet():\n    return "hello"\n'


@pytest.mark.parametrize("keys", [["Enter"], ["C-g"]], ids=["RET on the default", "C-g"])
def test_eglot_asks_deny_first_and_a_stray_ret_or_c_g_denies_at_once(
    emacs_with: Callable[[str], Emacs], model: ScriptedModel, project: Path, keys: list[str]
) -> None:
    """eglot 1.9 fills its question's minibuffer with the first action: Deny, so RET denies;
    C-g, with the recipe, answers "no choice", which denies at once, not at the time limit."""
    emacs = emacs_with("**Emacs with eglot**")
    emacs.command("eglot")
    emacs.on_screen("Connected!")
    model.add(tool_call("bash", {"command": "touch made.txt"}), reply("Did not run it."))

    emacs.command("lsp-agent-ask", "make a file")
    emacs.until("the question, Deny filled in", lambda: emacs.asking("Choose an option: Deny"))
    emacs.keys(*keys)
    emacs.on_screen("Did not run it.")
    why = "the user denied it" if keys == ["Enter"] else "it was dismissed"
    assert why in told(model, "bash")
    assert not (project / "made.txt").exists()


def test_eglot_allows_a_command_typed_at_its_question(
    emacs_with: Callable[[str], Emacs], model: ScriptedModel, project: Path
) -> None:
    emacs = emacs_with("**Emacs with eglot**")
    emacs.command("eglot")
    emacs.on_screen("Connected!")
    model.add(tool_call("bash", {"command": "touch made.txt"}), reply("Made it."))

    emacs.command("lsp-agent-ask", "make a file")
    emacs.until("the question, Deny filled in", lambda: emacs.asking("Choose an option: Deny"))
    emacs.keys("C-a", "C-k")  # the filled-in Deny replaced by the user's choice
    emacs.type("Allow")
    emacs.keys("Enter")
    emacs.on_screen("Made it.")
    assert (project / "made.txt").exists()


async def test_an_edit_quit_in_newer_eglot_is_told_as_the_users_rejection(
    workspace: Path, model: ScriptedModel, state_dir: Path, home: Path
) -> None:
    """eglot 1.16 and later (not installable here) answer `C-g` at their prompt with an error
    whose data is `{applied: false, failureReason}`: replayed over the wire."""
    capabilities = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(
            apply_edit=True,
            workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True),
        )
    )
    client = await plain([workspace], model, state_dir, home, capabilities)

    @handles(client, types.WORKSPACE_APPLY_EDIT)
    def quit_at_the_prompt(params: types.ApplyWorkspaceEditParams) -> None:
        raise JsonRpcException(
            code=32000,
            message="[jsonrpc] error ",
            data={"applied": False, "failureReason": "'quit'."},
        )

    try:
        model.add(*EDIT, reply("Left it."))
        await command(client, "lspAgent.ask", "greet the world")
        assert told(model, "edit_file").startswith("not applied — the user rejected this edit")
    finally:
        await client.shutdown_session()
        await client.stop()


def test_eglot_typing_in_the_file_as_the_edit_arrives_keeps_both(
    emacs_with: Callable[[str], Emacs], model: ScriptedModel, project: Path
) -> None:
    """eglot tells the server of typing half a second after it stops, and refuses an edit made
    for an older version of the buffer: the edit is merged onto the typing and sent again."""
    rest = "\n\ndef one():\n    return 1\n\n\ndef two():\n    return 2\n"
    (project / "hello.py").write_text('def greet():\n    return "hello"\n' + rest)
    emacs = emacs_with("**Emacs with eglot**")
    emacs.command("eglot")
    emacs.on_screen("Connected!")
    typed = threading.Event()
    model.add(EDIT[0], held_until(typed, EDIT[1]), reply("Done."))

    emacs.command("lsp-agent-ask", "greet the world")
    emacs.keys("M->")
    emacs.type("# mine")
    emacs.on_screen("# mine")
    typed.set()

    # The first answer is refused by eglot itself (its buffer moved on); the merged edit asks
    # again.
    emacs.until("eglot's question", lambda: emacs.asking("Proceed? (y or n)"))
    emacs.keys("y")
    emacs.until(
        "the merged edit's question, or the answer",
        lambda: emacs.asking("Proceed? (y or n)") or "Done." in emacs.screen(),
    )
    if emacs.asking("Proceed? (y or n)"):
        emacs.keys("y")
    emacs.on_screen("Done.")
    expected = 'def greet():\n    return "hello, world"\n' + rest + "# mine"
    assert emacs.buffer("hello.py") == expected
    said = told(model, "edit_file")
    assert "applied on top of their text" in said
    assert "applied: hello.py" in said


def test_a_blocking_ask_that_eglot_gives_up_on_goes_on_and_is_answered(
    emacs_with: Callable[[str], Emacs], model: ScriptedModel
) -> None:
    """An old-style `lspAgent.ask` through `eglot-execute-command` blocks Emacs until eglot 1.9
    gives up on it (10 s); the turn goes on: its edit still asks, and its answer still shows."""
    emacs = emacs_with("**Emacs with eglot**")
    emacs.command("eglot")
    emacs.on_screen("Connected!")
    gave_up = threading.Event()
    model.add(held_until(gave_up, EDIT[0]), EDIT[1], reply("Greeting changed."))

    emacs.keys("M-:")
    emacs.type('(eglot-execute-command (eglot-current-server) \'lspAgent.ask ["greet the world"])')
    emacs.keys("Enter")
    emacs.on_screen("Timed out")
    gave_up.set()

    emacs.until("eglot's question", lambda: emacs.asking("Proceed? (y or n)"))
    emacs.keys("y")
    emacs.on_screen("Greeting changed.")
    assert emacs.buffer("hello.py") == 'def greet():\n    return "hello, world"\n'
    assert told(model, "edit_file").startswith("applied: hello.py\n")


EGLOT_CAPABILITIES = types.ClientCapabilities(
    workspace=types.WorkspaceClientCapabilities(
        apply_edit=True,
        workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True),
    )
)
"""What eglot says of its edits: versioned `documentChanges`."""


async def eglot_replay(
    workspace: Path, model: ScriptedModel, state_dir: Path, home: Path
) -> tuple[Any, str]:
    """eglot 1.16 and later (Emacs 30, not installable here) over the wire, with hello.py open
    at version 0: the client, and the file's URI."""
    client = await plain([workspace], model, state_dir, home, EGLOT_CAPABILITIES, "Eglot")
    uri = (workspace / "hello.py").as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=0, text=(workspace / "hello.py").read_text()
            )
        )
    )
    return client, uri


async def test_an_edit_eglot_applied_is_told_at_once_though_its_buffer_reports_it_late(
    workspace: Path, model: ScriptedModel, state_dir: Path, home: Path
) -> None:
    """eglot answers "applied" and sends the buffer's change only once Emacs is idle, which in
    Emacs 30 can be long after: the turn goes on at once, told the edit as applied (eglot applies
    all of an edit or none, on the version it was made for)."""
    client, uri = await eglot_replay(workspace, model, state_dir, home)
    applied: list[types.ApplyWorkspaceEditParams] = []

    @handles(client, types.WORKSPACE_APPLY_EDIT)
    def apply_and_report_later(params: types.ApplyWorkspaceEditParams) -> Any:
        applied.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    try:
        model.add(*EDIT, reply("Done."))
        result = await command(client, "lspAgent.ask", "greet the world")
        assert result["status"] == "completed"
        assert len(applied) == 1
        said = told(model, "edit_file")
        assert said.startswith("applied: hello.py\n")
        assert "has not shown the change yet" not in said

        # The change comes when Emacs is idle; the next edit is pinned to it.
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=1),
                content_changes=[
                    types.TextDocumentContentChangeWholeDocument(
                        text='def greet():\n    return "hello, world"\n'
                    )
                ],
            )
        )
        model.add(
            tool_call("read_file", {"path": "hello.py"}),
            tool_call("edit_file", {"path": "hello.py", "old": "world", "new": "Emacs"}),
            reply("Done again."),
        )
        await command(client, "lspAgent.ask", "greet Emacs")
        assert len(applied) == 2
        (change,) = applied[1].edit.document_changes or []
        assert isinstance(change, types.TextDocumentEdit)
        assert change.text_document.version == 1
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_an_edit_eglot_refused_for_typing_it_has_not_sent_is_not_asked_again(
    workspace: Path, model: ScriptedModel, state_dir: Path, home: Path
) -> None:
    """The user typed (eglot's buffer is at version 2) and Emacs was not idle since, so eglot
    has not sent the typing: it refuses the edit made for version 0 after the user's "y". The
    server does not hold the turn for the typing, nor ask the user again for an edit eglot
    would refuse again: the model hears the user is typing there."""
    client, _ = await eglot_replay(workspace, model, state_dir, home)
    asked: list[types.ApplyWorkspaceEditParams] = []

    @handles(client, types.WORKSPACE_APPLY_EDIT)
    def refuse_as_stale(params: types.ApplyWorkspaceEditParams) -> None:
        asked.append(params)
        raise JsonRpcException(code=-32001, message="Edits on `hello.py' require version 0, have 2")

    try:
        model.add(*EDIT, reply("You are typing there; later."))
        result = await command(client, "lspAgent.ask", "greet the world")
        assert result["status"] == "completed"
        assert len(asked) == 1  # the user answered once, and is not asked again
        assert told(model, "edit_file").startswith(
            "not applied — hello.py changed in the editor after you read it (the user is typing"
        )
    finally:
        await client.shutdown_session()
        await client.stop()


LONG = "".join(f"Point {i} of the answer.\n" for i in range(80))
"""An answer too long for the echo area: it goes to a file of its own."""


def answer_path(message: str) -> Path:
    """The file a long answer's message names."""
    found = re.search(r"\(the whole answer: (\S+\.md)\)", message)
    assert found is not None, message
    return Path(found.group(1))


def test_eglot_long_answers_each_get_a_file_of_their_own(
    emacs_with: Callable[[str], Emacs], model: ScriptedModel
) -> None:
    emacs = emacs_with("**Emacs with eglot**")
    emacs.command("eglot")
    emacs.on_screen("Connected!")
    paths = []
    for turn in ("first", "second"):
        model.add(reply(LONG.replace("answer", f"{turn} answer")))
        emacs.command("lsp-agent-ask", f"the {turn} time, in detail")
        marker = f"of the {turn} answer"

        def shown(marker: str = marker) -> bool:
            return marker in emacs.messages()

        emacs.until(f"the {turn} answer", shown)
        paths.append(answer_path(emacs.messages().split(f"Point 0 of the {turn} answer.")[-1]))
    assert paths[0] != paths[1]
    assert paths[0].read_text().startswith("Point 0 of the first answer.")  # never rewritten
    assert paths[1].read_text().startswith("Point 0 of the second answer.")
    # eglot 1.9 opens nothing: the user's window still shows their file.
    assert emacs.value("(buffer-name (window-buffer (selected-window)))") == "hello.py"


@pytest.mark.parametrize("keys", [["Enter"], ["C-g"]], ids=["RET on nothing", "C-g"])
def test_lsp_mode_ret_on_nothing_or_c_g_at_its_question_denies_at_once(
    emacs_with: Callable[[str], Emacs], model: ScriptedModel, project: Path, keys: list[str]
) -> None:
    emacs = emacs_with("**Emacs with lsp-mode**")
    emacs.command("lsp")
    emacs.on_screen("Import project root")
    emacs.keys("i")
    lsp_mode_ready(emacs)
    model.add(tool_call("bash", {"command": "touch made.txt"}), reply("Did not run it."))

    emacs.command("lsp-agent-ask", "make a file")
    emacs.until("the question", lambda: emacs.asking("even a similar one, is asked."))
    emacs.keys(*keys)
    emacs.on_screen("Did not run it.")
    assert "it was dismissed" in told(model, "bash")
    assert not (project / "made.txt").exists()


def test_lsp_mode_long_answer_begins_in_the_echo_area_and_names_its_file(
    emacs_with: Callable[[str], Emacs], model: ScriptedModel
) -> None:
    emacs = emacs_with("**Emacs with lsp-mode**")
    emacs.command("lsp")
    emacs.on_screen("Import project root")
    emacs.keys("i")
    lsp_mode_ready(emacs)
    model.add(reply(LONG))
    emacs.command("lsp-agent-ask", "in detail")
    emacs.until("the answer", lambda: "Point 0 of the answer." in emacs.messages())
    path = answer_path(emacs.messages())
    assert path.read_text() == LONG.strip() + "\n"
