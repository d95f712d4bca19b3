"""Fixtures of the VS Code end-to-end tests (tests/test_vscode*.py import them), and the moves a
user makes in the chat that several stories share.

`vscode` is a code-server with the extension, configured for the scripted model and open on the
test's workspace. A test changes what it starts with by parametrizing `extra_settings` (merged
over the user settings) or `extra_env` (code-server's environment, inherited by the extension host
and the server it starts). When a test fails, the logs of VS Code, the extension host and the
server, and a screenshot, are kept in `.cache/vscode-failures/<test>/`.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, sync_playwright

from tests import vscode_harness as harness
from tests.fake_model import ScriptedModel

MEDIA = harness.EXTENSION / "media"
# Set LSP_AGENT_TEST_SCREENSHOTS=1 to refresh the README's screenshots in editors/vscode/media/.
SAVE_MEDIA = os.environ.get("LSP_AGENT_TEST_SCREENSHOTS") == "1"
OUTPUT_CHANNEL = "LSP Agent"


@dataclass(frozen=True)
class Build:
    code_server: Path
    vsix: Path


@pytest.fixture(scope="module")
def build() -> Build:
    """The packaged extension and code-server (both cached across runs)."""
    try:
        return Build(code_server=harness.install_code_server(), vsix=harness.build_vsix())
    except harness.SetupError as error:
        pytest.fail(str(error), pytrace=False)


@dataclass
class VSCode:
    server: harness.CodeServer
    workbench: harness.Workbench
    page: Page
    shots: Path

    def output(self) -> str:
        """The text of the extension's output channel, exactly as it was written."""
        return self.server.output_channel(OUTPUT_CHANNEL)

    def wait_for_output(self, text: str, timeout: float = 60) -> str:
        """Wait until the output channel holds `text`; return the whole channel."""

        def holds() -> str | None:
            out = self.output()
            return out if text in out else None

        return str(harness.wait_until(holds, timeout, f"the output channel to hold {text!r}"))

    def save_media(self, *shots: Path) -> None:
        """Copy screenshots to editors/vscode/media/ (when LSP_AGENT_TEST_SCREENSHOTS=1)."""
        if SAVE_MEDIA:
            MEDIA.mkdir(exist_ok=True)
            for shot in shots:
                (MEDIA / shot.name).write_bytes(shot.read_bytes())


@pytest.fixture
def extra_settings() -> dict[str, Any]:
    """User settings a test adds or overrides (parametrize it)."""
    return {}


@pytest.fixture
def extra_keybindings() -> list[dict[str, Any]]:
    """User key bindings a test adds (parametrize it)."""
    return []


@pytest.fixture
def extra_env() -> dict[str, str]:
    """Environment variables a test adds or overrides for code-server (parametrize it)."""
    return {}


@pytest.fixture
def vscode(
    build: Build,
    workspace: Path,
    model: ScriptedModel,
    state_dir: Path,
    tmp_path: Path,
    extra_settings: dict[str, Any],
    extra_env: dict[str, str],
    extra_keybindings: list[dict[str, Any]],
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> Iterator[VSCode]:
    """code-server with the extension, configured for the scripted model, open on `workspace`.

    When the test fails: a screenshot in its tmp dir, and the tail of code-server's logs."""
    failed_before = request.session.testsfailed
    server = harness.CodeServer(build.code_server, tmp_path / "vscode")
    try:
        server.install_extension(build.vsix)
        server.settings(
            {
                "lspAgent.server.command": [sys.executable, "-m", "lsp_agent", "serve"],
                "lspAgent.baseUrl": model.base_url,
                "lspAgent.model": "test-model",
                "lspAgent.review": "diff",
                **extra_settings,
            }
        )
        if extra_keybindings:
            keybindings = server.user_data / "User" / "keybindings.json"
            keybindings.write_text(json.dumps(extra_keybindings), encoding="utf-8")
        with harness.diagnostics(server, None, tmp_path, request.node.nodeid):
            server.start(
                {
                    "LSP_AGENT_STATE_DIR": str(state_dir),
                    "PYTHONPATH": str(harness.ROOT),  # the server from this checkout
                    "PYTHONUNBUFFERED": "1",
                    **extra_env,
                }
            )
        browser_env: dict[str, str | float | bool] = {**server.env()}  # its own HOME and XDG
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(harness.CHROMIUM),
                args=harness.CHROMIUM_ARGS,
                env=browser_env,
            )
            try:
                page = browser.new_page(viewport=harness.VIEWPORT)
                workbench = harness.Workbench(page)
                with harness.diagnostics(server, workbench, tmp_path, request.node.nodeid):
                    workbench.open(server.url, workspace)
                yield VSCode(server, workbench, page, tmp_path)
                if request.session.testsfailed > failed_before:
                    # What the model endpoint was asked, for a failure that turns on it.
                    asked = [r.get("messages") for r in model.requests]
                    (state_dir / "model-requests.json").write_text(
                        json.dumps(asked, indent=1, default=str), encoding="utf-8"
                    )
                    with capsys.disabled():
                        harness.report_failure(
                            server,
                            workbench,
                            tmp_path,
                            request.node.nodeid,
                            also={"lsp-agent-state": state_dir},
                        )
            finally:
                browser.close()
    finally:
        strays = server.stop()
    assert not strays, f"processes left code-server's process group: {strays}"


def tool_results(request: dict[str, Any]) -> list[str]:
    """The tool results the model was shown in one request, in order."""
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def output_lines(page: Page) -> Any:
    """The text lines of the editor in the Output panel."""
    return page.locator(".part.panel .output-view .monaco-editor .view-lines")


def review_button(page: Page, name: str) -> Any:
    """An action in the editor title of the diff review, by its accessible name."""
    return page.locator(f'.editor-actions .action-label[aria-label^="{name}"]').first


def chat_frame(page: Page) -> Any:
    """The content of the chat view's webview (VS Code nests it in two iframes, laid over the
    workbench outside the side bar's DOM; the chat is the only webview these tests open).

    Locators inside it wait and retry like any other: after a window reload they find the new
    webview."""
    view = page.locator("iframe.webview.ready").first
    return view.content_frame.locator("#active-frame").content_frame


def open_chat(vscode: VSCode) -> Any:
    """Show the chat view (LSP Agent: Open Chat) and wait until its input is there."""
    vscode.workbench.run_command("LSP Agent: Open Chat")
    chat = chat_frame(vscode.page)
    chat.locator("#input").wait_for()
    return chat


LIMITS = [
    "PORT = 8000",
    "TIMEOUT = 30",
    "RETRIES = 3",
    "WORKERS = 4",
    "BACKLOG = 128",
    "MAX_BODY = 1024",
    "CHUNK = 64",
    "QUEUE = 16",
    "IDLE = 300",
    "KEEPALIVE = 5",
    "LOG_LEVEL = 20",
    "DEBUG = False",
]


def lines_text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def ready(vscode: VSCode, text: str = "test-model") -> None:
    """The extension is up and talks to the server: its status bar item shows the model."""
    vscode.workbench.status_item(text).wait_for(state="visible")


def send(chat: Any, prompt: str) -> None:
    """Type the prompt in the chat's input and press Enter."""
    box = chat.locator("#input")
    box.click()
    box.fill(prompt)
    box.press("Enter")


def turns_ended(chat: Any, count: int) -> None:
    """Wait until `count` turns show their end in the conversation."""
    chat.locator(".item.status").nth(count - 1).wait_for()


def user_texts(request: dict[str, Any]) -> list[str]:
    """The user messages the model was sent in one request."""
    return [str(m["content"]) for m in request["messages"] if m["role"] == "user"]


def last_prompt(request: dict[str, Any]) -> str:
    """The last message of the user's in one request (the reminder that follows it aside)."""
    return [text for text in user_texts(request) if not text.startswith("<context>")][-1]


def widen_sidebar(vscode: VSCode, width: int = 460) -> None:
    """Drag the side bar's edge so the chat is roomier (for the screenshots)."""
    page = vscode.page
    box = page.locator(".part.sidebar").bounding_box()
    assert box is not None
    edge, middle = box["x"] + box["width"], box["y"] + box["height"] / 2
    page.mouse.move(edge, middle)
    page.mouse.down()
    page.mouse.move(box["x"] + width, middle, steps=5)
    page.mouse.up()


def open_file(vscode: VSCode, name: str) -> None:
    """Quick Open (Ctrl+P) the file; return once its tab shows and its editor has the keyboard
    (the tab comes first: a key pressed in between goes elsewhere)."""
    page = vscode.page
    page.locator(".monaco-workbench").click(position={"x": 900, "y": 300})
    page.keyboard.press("Control+P")
    box = vscode.workbench.quick_input.locator("input.input")
    box.wait_for(state="visible")
    box.fill(name)
    vscode.workbench.quick_input.locator(".monaco-list-row", has_text=name).first.click()
    file_tab(vscode, name).wait_for()
    page.locator(".editor-group-container .monaco-editor.focused").wait_for()


def file_tab(vscode: VSCode, name: str) -> Any:
    """The editor tab of the file itself (not its review)."""
    label = vscode.page.locator(".label-name", has_text=re.compile(f"^{re.escape(name)}$"))
    return vscode.page.locator(".tab").filter(has=label)


def reload_window(vscode: VSCode) -> None:
    """Developer: Reload Window, and wait for the new page: the old one's status bar and chat
    would otherwise answer the waits that follow while the reload has not even begun."""
    with vscode.page.expect_navigation(wait_until="load"):
        vscode.workbench.run_command("Developer: Reload Window")
    vscode.page.locator(".monaco-workbench .part.statusbar").wait_for(state="visible")


def user_settings(vscode: VSCode) -> dict[str, Any]:
    """The user's settings.json as VS Code wrote it."""
    path = vscode.server.user_data / "User" / "settings.json"
    return dict(json.loads(path.read_text(encoding="utf-8")))


def in_view(chat: Any, locator: Any) -> bool:
    """Whether the element is inside the visible part of the conversation (not scrolled away)."""
    return bool(
        locator.evaluate(
            """(el) => {
                const log = el.ownerDocument.getElementById('log').getBoundingClientRect();
                const box = el.getBoundingClientRect();
                return box.bottom > log.top && box.top < log.bottom;
            }"""
        )
    )


def pick_context(vscode: VSCode, choice: str) -> None:
    """In the `#` picker (LSP Agent: Add Context), choose `Selection`, `Problems`, `File…`."""
    widget = vscode.workbench.quick_input
    widget.locator(".quick-input-title", has_text="LSP Agent: Add Context").wait_for()
    label = re.compile(rf"^\s*{re.escape(choice)}\s*$")  # after its icon
    name = vscode.page.locator(".label-name", has_text=label)
    widget.locator(".monaco-list-row").filter(has=name).first.click()


def add_file(vscode: VSCode, name: str) -> None:
    """After `#` (or the 📎 button): File…, then the file."""
    pick_context(vscode, "File…")
    vscode.workbench.answer_input(name, "LSP Agent: Add a File as Context")


def replace_editor_text(vscode: VSCode, text: str, shown: str | None = None) -> None:
    """Replace the text of the active editor with one line, as typed, and save it. `shown`:
    text the editor must show first — an edit VS Code itself is making there ("Edit in
    settings.json" adds the setting), which would otherwise land inside the typed line."""
    page = vscode.page
    lines = page.locator(".editor-instance .monaco-editor .view-lines").first
    if shown is not None:
        lines.filter(has_text=shown).wait_for()
    lines.click()
    page.locator(".editor-instance .monaco-editor.focused").first.wait_for()
    page.keyboard.press("Control+A")
    # One line (the editor indents each new line), and what it closed for the typed `{"` goes.
    page.keyboard.insert_text(text)
    page.keyboard.press("Shift+Control+End")
    page.keyboard.press("Delete")
    page.keyboard.press("Control+S")
    page.locator(".tab.dirty").wait_for(state="detached")
