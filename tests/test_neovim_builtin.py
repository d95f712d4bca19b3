"""Neovim's built-in LSP client without our plugin, set up with the README's recipe as written:
Debian's Neovim 0.7.2 (`vim.lsp.start_client`) and a current 0.11 (`vim.lsp.start`), the real
server and the scripted model on loopback.

The test is the user: over Neovim's RPC socket it runs the recipe's `:AgentAsk`, and picks
"lsp-agent: explain this" in the menu `vim.lsp.buf.code_action()` opens (the menu is
`vim.ui.select`, which a headless Neovim cannot show: the test answers it as a user would). It
reads facts, never after a fixed time: the buffer, the messages the user saw (`:messages`), the
windows, and what the model was told.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from tests.fake_model import ScriptedModel, reply, told, tool_call
from tests.neovim import Neovim, neovim_env, nvim, user_message
from tests.test_neovim_typing import connected
from tests.test_plain_lsp import command, plain, shown

__all__ = ["nvim"]  # the fixture, used by the tests below

README = Path(__file__).resolve().parent.parent / "README.md"
PLACEHOLDER_MODEL = "qwen2.5-coder:7b"
"""The model the README's recipes name: the scripted model answers to another."""
POLL_S = 0.05
FACT_TIMEOUT_S = 40.0


def recipe(nvim: Neovim) -> str:
    """The README's Neovim-without-the-plugin recipe for this version: how to start the server
    (0.8 and later, or 0.7), then the `:AgentAsk` command."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("**Neovim without the plugin**") :]
    blocks: list[str] = re.findall(r"```lua\n(.*?)```", section, re.S)
    start_08, start_07, ask = blocks[:3]
    snippet = (start_07 if nvim.label == "0.7" else start_08) + ask
    assert PLACEHOLDER_MODEL in snippet, "the README's Neovim recipe no longer names the model"
    return snippet.replace(PLACEHOLDER_MODEL, "test-model")


class Session:
    """A headless Neovim with the recipe as its `init.lua`, editing `hello.py`."""

    def __init__(self, nvim: Neovim, workspace: Path, tmp: Path, base_url: str) -> None:
        init = tmp / "init.lua"
        init.write_text(recipe(nvim), encoding="utf-8")
        env = neovim_env(tmp, base_url)
        env.update(
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            LSP_AGENT_BASE_URL=base_url,
        )
        listen = tmp / "nvim.sock"
        self.process = subprocess.Popen(
            [
                str(nvim.path),
                "--headless",
                "--clean",
                "-u",
                str(init),
                "--listen",
                str(listen),
                "hello.py",
            ],
            cwd=workspace,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.rpc = self.until("Neovim's RPC socket", lambda: connected(listen))

    def lua(self, code: str, *args: Any) -> Any:
        return self.rpc.lua(code, *args)

    def until(self, what: str, fact: Callable[[], Any]) -> Any:
        """Look at `fact` until it holds; fail with what Neovim said if it never does."""
        deadline = time.monotonic() + FACT_TIMEOUT_S
        while True:
            value = fact()
            if value:
                return value
            if time.monotonic() > deadline or self.process.poll() is not None:
                said = self.messages() if self.process.poll() is None else "(Neovim exited)"
                pytest.fail(f"timed out waiting for {what}; :messages says:\n{said}")
            time.sleep(POLL_S)

    def messages(self) -> str:
        """What `:messages` shows: every message the user saw."""
        return str(
            self.lua(
                "if vim.api.nvim_exec2 then"
                " return vim.api.nvim_exec2('messages', { output = true }).output end"
                " return vim.api.nvim_exec('messages', true)"
            )
        )

    def lines(self, name: str) -> list[str]:
        lines: list[str] = self.lua(
            "return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)", name
        )
        return lines

    def shown_markdown(self) -> list[list[str]]:
        """The lines of each Markdown file shown in a window."""
        shown: list[list[str]] = self.lua(
            """
            local shown = {}
            for _, win in ipairs(vim.api.nvim_list_wins()) do
              local buf = vim.api.nvim_win_get_buf(win)
              if vim.api.nvim_buf_get_name(buf):match("%.md$") then
                shown[#shown + 1] = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
              end
            end
            return shown
            """
        )
        return shown

    def close(self) -> None:
        self.rpc.close()
        self.process.kill()
        self.process.wait(timeout=30)


@pytest.fixture
def session(
    nvim: Neovim, workspace: Path, tmp_path: Path, model: ScriptedModel
) -> Iterator[Session]:
    opened = Session(nvim, workspace, tmp_path, model.base_url)
    yield opened
    opened.close()


def test_ask_edits_the_buffer_unasked_and_shows_the_answer(
    session: Session, nvim: Neovim, model: ScriptedModel, workspace: Path
) -> None:
    session.until(
        "the server to start",
        lambda: session.lua(
            "local get = vim.lsp.get_clients or vim.lsp.get_active_clients"
            " local c = get({ name = 'lsp-agent' })[1]"
            " return c ~= nil and c.initialized == true"
        ),
    )
    model.add(
        tool_call("read_file", {"path": "hello.py"}),
        tool_call("edit_file", {"path": "hello.py", "old": '"hello"', "new": '"hello, world"'}),
        reply("The greeting now says hello, world."),
    )

    session.lua("vim.cmd('AgentAsk greet the world')")

    # Neovim's built-in handler applies the edit without asking; the model hears it landed.
    session.until(
        "the edit in the buffer",
        lambda: session.lines("hello.py") == ["def greet():", '    return "hello, world"'],
    )
    session.until("the answer", lambda: "The greeting now says hello, world." in session.messages())
    assert told(model, "edit_file").startswith("applied: hello.py\n")
    # A short answer is the message, and nothing opens.
    assert "(the whole answer: " not in session.messages()
    assert session.shown_markdown() == []
    assert (workspace / "hello.py").read_text() == 'def greet():\n    return "hello"\n'

    # A long answer begins in the message; 0.11 opens the whole of it beside the user's window,
    # a new document each turn (the first answer is never shown again as the second).
    for turn in ("first", "second"):
        model.add(reply("".join(f"Line {i} of the {turn} answer.\n" for i in range(80))))
        session.lua(f"vim.cmd('AgentAsk and in detail, the {turn} time?')")
        marker = f"of the {turn} answer"

        def said(marker: str = marker) -> bool:
            return marker in session.messages()

        def documents(marker: str = marker) -> list[list[str]]:
            return [d for d in session.shown_markdown() if marker in d[0]]

        session.until(f"the {turn} long answer", said)
        if nvim.label == "0.7":
            # 0.7 cannot open a document for the server: the message names the answer's file.
            assert "(the whole answer: " in session.messages()
        else:
            shown = session.until(f"the {turn} answer's document", documents)
            assert shown[0][0] == f"Line 0 of the {turn} answer."
            assert session.lua("return vim.fn.expand('%:t')") == "hello.py"  # the user's window
    if nvim.label != "0.7":
        firsts = [d for d in session.shown_markdown() if "of the first answer" in d[0]]
        assert firsts == [[f"Line {i} of the first answer." for i in range(80)]]

    model.add(reply("It returns the greeting."))
    chosen = session.lua(
        """
        local chosen = {}
        vim.ui.select = function(items, opts, on_choice)
          for i, item in ipairs(items) do
            local title = opts.format_item and opts.format_item(item) or tostring(item)
            chosen[#chosen + 1] = title
            if title == "lsp-agent: explain this" then
              return on_choice(item, i)
            end
          end
          on_choice(nil, nil)
        end
        vim.api.nvim_win_set_cursor(0, { 2, 4 })
        vim.lsp.buf.code_action()
        LspAgentTestChosen = chosen
        """
    )
    assert chosen is None
    session.until("the explanation", lambda: "It returns the greeting." in session.messages())
    offered = session.lua("return LspAgentTestChosen")
    assert "lsp-agent: explain this" in offered
    # Neovim asks at the cursor with an empty range: the function around it goes along.
    asked = user_message(model.requests[-1])
    assert asked.startswith("Explain what this code in hello.py does.")
    assert 'hello.py, lines 1-2:\n```\ndef greet():\n    return "hello, world"\n```' in asked

    assert "deprecated" not in session.messages()


async def test_a_client_that_says_it_cannot_show_documents_gets_none(
    tmp_path: Path, model: ScriptedModel, state_dir: Path, home: Path, workspace: Path
) -> None:
    """Neovim 0.7 sends `window.showDocument: {support: false}`: the answer comes as a message
    naming its file, and no `window/showDocument` is sent."""
    capabilities = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(apply_edit=True, workspace_folders=True),
        window=types.WindowClientCapabilities(
            work_done_progress=True,
            show_document=types.ShowDocumentClientCapabilities(support=False),
        ),
    )
    client = await plain([workspace], model, state_dir, home, capabilities)
    try:
        model.add(reply("".join(f"It greets, reason {i}.\n" for i in range(80))))
        await command(client, "lspAgent.ask", "what does hello.py do?")
        message = await shown(client, "It greets, reason 0.")
        assert "(the whole answer: " in message.message
        assert client.shown_documents == []
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.parametrize(("keys", "allowed"), [("<CR>", False), ("1<CR>", False), ("2<CR>", True)])
def test_the_built_in_question_lists_deny_first_so_enter_or_1_denies(
    session: Session, model: ScriptedModel, workspace: Path, keys: str, allowed: bool
) -> None:
    """Neovim's built-in client asks with a numbered list (`inputlist()`): 1 is Deny, Enter
    alone (no choice) denies at once, 2 is Allow."""
    session.until(
        "the server to start",
        lambda: session.lua(
            "local get = vim.lsp.get_clients or vim.lsp.get_active_clients"
            " local c = get({ name = 'lsp-agent' })[1]"
            " return c ~= nil and c.initialized == true"
        ),
    )
    model.add(tool_call("bash", {"command": "touch made.txt"}), reply("Over."))
    session.lua("vim.cmd('AgentAsk make a file')")
    # While the list is on screen Neovim waits for the user's keys: its mode is not Normal.
    session.until("the question", lambda: session.rpc.request("nvim_get_mode")["mode"] != "n")
    session.rpc.request("nvim_input", keys)
    session.until("the answer", lambda: "Over." in session.messages())
    assert (workspace / "made.txt").exists() is allowed
    why = "(it was dismissed)" if keys == "<CR>" else "the user denied it"
    assert allowed or why in told(model, "bash")
