"""`#codebase` in the chat, end to end in code-server: the `#` picker adds it, the prompt goes
with the files that match its terms (found by the server's ripgrep before the model is asked),
the search shows in the conversation as it runs, and a reloaded window shows it again. Each
test reads facts: the DOM inside the chat's webview and what the model was sent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import vscode_fixtures as fixtures
from tests.fake_model import ScriptedModel, reply
from tests.vscode_fixtures import (
    VSCode,
    last_prompt,
    open_chat,
    pick_context,
    ready,
    reload_window,
    turns_ended,
)

build, vscode = fixtures.build, fixtures.vscode
extra_settings, extra_env = fixtures.extra_settings, fixtures.extra_env
extra_keybindings = fixtures.extra_keybindings


@pytest.mark.timeout(600)
def test_hash_codebase_sends_the_matching_files_and_shows_the_search(
    vscode: VSCode, model: ScriptedModel, workspace: Path
) -> None:
    (workspace / "net").mkdir()
    (workspace / "net" / "client.py").write_text(
        "class Client:\n    def retry_after(self, seconds):\n        return seconds\n",
        encoding="utf-8",
    )
    (workspace / ".env").write_text("RETRY_AFTER_KEY=sk-not-for-the-model\n", encoding="utf-8")
    model.add(reply("Client.retry_after in net/client.py."), reply("Nothing else."))
    ready(vscode)
    chat = open_chat(vscode)
    box = chat.locator("#input")

    box.click()
    box.press_sequentially("#")
    pick_context(vscode, "Codebase")
    chip = chat.locator("#chips .chip-codebase", has_text="#codebase")
    chip.wait_for()
    # The user types on while the chip is there; the keys stay in the chat's input.
    box.press_sequentially("where do we `retry_after`?")
    box.press("Enter")

    turns_ended(chat, 1)
    asked = last_prompt(model.requests[0])
    assert asked.startswith("#codebase where do we `retry_after`?\n\nThe user added #codebase")
    assert "net/client.py (has retry_after)\n  2: def retry_after(self, seconds):" in asked
    assert "sk-not-for-the-model" not in asked  # .env files are never searched
    prompt = chat.locator(".item.prompt")
    assert prompt.locator(".prompt-text").inner_text() == "where do we `retry_after`?"
    assert prompt.locator(".chip-codebase").count() == 1
    search = chat.locator(".item.tool", has_text="1 file matches retry_after; 1 shown")
    assert search.count() == 1
    assert chat.locator("#chips .chip-codebase").count() == 0  # the next prompt starts without

    # The chip's × takes it back before sending: the next prompt is not searched for.
    box.click()
    box.press_sequentially("#")
    pick_context(vscode, "Codebase")
    chip.wait_for()
    chip.locator(".chip-remove").click()
    chip.wait_for(state="detached")
    box.press_sequentially("thanks")
    box.press("Enter")
    turns_ended(chat, 2)
    assert last_prompt(model.requests[1]) == "thanks"

    # After a reload the conversation shows the chip and the search again, from the server.
    reload_window(vscode)
    ready(vscode)
    chat = fixtures.chat_frame(vscode.page)
    chat.locator(".item.status").nth(1).wait_for()
    assert chat.locator(".item.prompt").first.locator(".chip-codebase").count() == 1
    assert chat.locator(".item.tool", has_text="1 file matches retry_after; 1 shown").count() == 1
    assert model.remaining == 0
