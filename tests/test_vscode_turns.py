"""Every turn is seen, and every error has its way out, end to end in code-server.

A turn started from the light bulb (a code action of the server) or from a key bound to the
server's own command shows in the chat as it runs, as one asked there does. A turn that fails
says why on its last line with the buttons that lead out: Choose Model (the picker lists the
endpoint's models, the setting follows), Open Settings, Retry; a prompt typed while the server
cannot start waits in sight and goes once it runs. The model picker in the header shows the
model in effect and changes it. Each test reads facts: the DOM inside the chat's webview, the
user's settings file, what the model was sent.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import pytest

from tests import vscode_fixtures as fixtures
from tests import vscode_harness as harness
from tests.fake_model import ScriptedModel, break_after, reply
from tests.vscode_fixtures import (
    VSCode,
    last_prompt,
    open_chat,
    open_file,
    ready,
    replace_editor_text,
    send,
    turns_ended,
    user_settings,
    user_texts,
    widen_sidebar,
)

build, vscode = fixtures.build, fixtures.vscode
extra_settings, extra_env = fixtures.extra_settings, fixtures.extra_env
extra_keybindings = fixtures.extra_keybindings

KEY_PROMPT = "asked from a key bound to the server's command"


def quick_pick_row(vscode: VSCode, label: str) -> Any:
    """A row of the open quick pick, by its label."""
    name = vscode.page.locator(".label-name", has_text=re.compile(f"^{re.escape(label)}$"))
    return vscode.workbench.quick_input.locator(".monaco-list-row").filter(has=name).first


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "extra_keybindings",
    [[{"key": "ctrl+alt+q", "command": "lspAgent.ask", "args": {"prompt": KEY_PROMPT}}]],
)
def test_a_turn_from_the_light_bulb_or_a_key_shows_in_the_chat_as_it_runs(
    vscode: VSCode, model: ScriptedModel
) -> None:
    model.add(
        reply("It returns the greeting hello.", chunks=6),
        reply("Answered the key."),
    )
    page = vscode.page
    ready(vscode)
    chat = open_chat(vscode)
    open_file(vscode, "hello.py")

    # The light bulb's menu, from the keyboard: lsp-agent's code actions are in it.
    page.keyboard.press("Control+.")
    rows = page.locator(".action-widget .monaco-list-row.action")
    rows.first.wait_for()
    focused = page.locator(".action-widget .monaco-list-row.focused")
    for _ in range(rows.count()):
        if "lsp-agent: explain this" in focused.inner_text():
            break
        page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    prompt = chat.locator(".item.prompt", has_text="Explain what this code in hello.py does.")
    prompt.wait_for()
    assert prompt.locator(".chip-selection", has_text="hello.py").count() == 1
    turns_ended(chat, 1)
    chat.locator(".item.answer", has_text="It returns the greeting hello.").wait_for()
    assert "## Explain what this code in hello.py does." in vscode.wait_for_output("_completed_")

    # A key bound to the server's own command (as another extension would run it).
    page.locator(".editor-instance .monaco-editor .view-lines").first.click()
    page.keyboard.press("Control+Alt+Q")
    chat.locator(".item.prompt", has_text=KEY_PROMPT).wait_for()
    turns_ended(chat, 2)
    chat.locator(".item.answer", has_text="Answered the key.").wait_for()
    # Both turns continued the chat's session: one conversation.
    first, second = (user_texts(request) for request in model.requests)
    assert first[0].startswith("Explain what this code in hello.py does.")
    assert second[0] == first[0]
    assert last_prompt(model.requests[1]) == KEY_PROMPT


@pytest.mark.timeout(600)
@pytest.mark.parametrize("extra_settings", [{"lspAgent.model": ""}])
def test_a_turn_without_a_model_offers_the_picker_and_retry_and_then_runs(
    vscode: VSCode, model: ScriptedModel
) -> None:
    model.models.append("bigger-model")
    model.add(reply("Now I can answer."))
    ready(vscode, "no model")
    widen_sidebar(vscode)
    chat = open_chat(vscode)

    send(chat, "what is in hello.py?")
    failed = chat.locator(".item.status-failed")
    failed.wait_for()
    assert "no model configured" in failed.inner_text()
    for button in ("Retry", "Choose Model"):
        assert failed.get_by_role("button", name=button, exact=True).is_visible()
    assert failed.get_by_role("button", name="Open Settings (lspAgent.model)").is_visible()
    vscode.save_media(vscode.workbench.screenshot(vscode.shots / "chat-error.png"))

    # Choose Model lists what the endpoint serves; the setting follows the choice.
    failed.get_by_role("button", name="Choose Model", exact=True).click()
    quick_pick_row(vscode, "bigger-model").wait_for()
    quick_pick_row(vscode, "test-model").click()
    harness.wait_until(
        lambda: user_settings(vscode).get("lspAgent.model") == "test-model", 30, "the setting"
    )
    chat.locator("#model-name", has_text="test-model").wait_for()

    # Retry asks the same prompt again; it runs now.
    failed.get_by_role("button", name="Retry", exact=True).click()
    chat.locator(".item.answer", has_text="Now I can answer.").wait_for()
    assert last_prompt(model.requests[0]) == "what is in hello.py?"
    assert model.requests[0]["model"] == "test-model"


@pytest.mark.timeout(600)
def test_the_model_picker_in_the_header_shows_the_model_and_changes_it(
    vscode: VSCode, model: ScriptedModel
) -> None:
    model.models.append("bigger-model")
    model.add(reply("From the bigger model."))
    ready(vscode)
    widen_sidebar(vscode)
    chat = open_chat(vscode)
    chat.locator("#model-name", has_text="test-model").wait_for()

    chat.get_by_role("button", name="Model: test-model. Choose the model").click()
    current = quick_pick_row(vscode, "test-model")
    current.wait_for()
    assert "current" in current.inner_text()
    vscode.save_media(vscode.workbench.screenshot(vscode.shots / "chat-models.png"))
    quick_pick_row(vscode, "bigger-model").click()
    chat.locator("#model-name", has_text="bigger-model").wait_for()
    harness.wait_until(
        lambda: user_settings(vscode).get("lspAgent.model") == "bigger-model", 30, "the setting"
    )
    vscode.workbench.status_item("bigger-model").wait_for()

    send(chat, "hello?")
    chat.locator(".item.answer", has_text="From the bigger model.").wait_for()
    assert model.requests[-1]["model"] == "bigger-model"


@pytest.mark.timeout(600)
def test_a_broken_stream_offers_retry_and_the_prompt_runs_again(
    vscode: VSCode, model: ScriptedModel
) -> None:
    model.add(
        break_after("Half an answ"),
        break_after("Half an answ"),  # the server retries a broken stream once
        reply("A whole answer."),
    )
    ready(vscode)
    chat = open_chat(vscode)

    send(chat, "tell me")
    failed = chat.locator(".item.status-failed")
    failed.wait_for()
    failed.get_by_role("button", name="Retry", exact=True).click()
    chat.locator(".item.answer", has_text="A whole answer.").wait_for()
    turns_ended(chat, 2)
    assert last_prompt(model.requests[-1]) == "tell me"


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    "extra_settings", [{"lspAgent.server.command": ["/nonexistent/python3", "-m", "lsp_agent"]}]
)
def test_a_prompt_typed_while_the_server_is_missing_waits_and_goes_once_it_runs(
    vscode: VSCode, model: ScriptedModel
) -> None:
    model.add(reply("The server runs now."))
    workbench = vscode.workbench
    workbench.status_item("server not running").wait_for()
    chat = open_chat(vscode)
    notice = chat.locator("#notice")
    notice.wait_for()
    for button in ("Open Settings", "Show Log", "Try Again"):
        assert notice.get_by_role("button", name=button, exact=True).is_visible()

    send(chat, "are you there?")
    waiting = chat.locator("#queue .queued", has_text="are you there?")
    waiting.wait_for()
    assert "waits for the server" in waiting.inner_text()

    # The user fixes the command from the notice's Open Settings: the server starts, the
    # prompt goes.
    notice.get_by_role("button", name="Open Settings", exact=True).click()
    setting = vscode.page.locator(
        ".settings-editor .setting-item-contents", has_text="Server: Command"
    )
    setting.locator("a", has_text="Edit in settings.json").click()
    vscode.page.locator(".tab.active", has_text="settings.json").wait_for()
    working = [sys.executable, "-m", "lsp_agent", "serve"]
    # VS Code adds the setting to the file first; the user's line replaces the whole.
    replace_editor_text(
        vscode,
        json.dumps({"lspAgent.server.command": working}),
        shown='"lspAgent.server.command"',
    )
    chat.locator(".item.answer", has_text="The server runs now.").wait_for()
    assert last_prompt(model.requests[0]) == "are you there?"
    assert chat.locator("#queue .queued").count() == 0
    assert notice.is_hidden()
