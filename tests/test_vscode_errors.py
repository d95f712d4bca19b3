"""An endpoint that cannot be used says so in the chat with its way out, end to end in code-server.

A `baseUrl` where nothing listens: the failed turn offers the setting and Retry; the user types
the right URL in the Settings editor and Retry sends the same prompt, which is answered. An
endpoint that refuses the request for want of a key: the failed turn offers Set API Key; the
user stores the key, says yes to sending it to that endpoint, and Retry is answered. Each test
reads facts: the DOM inside the chat's webview, the user's settings file, what the model was
sent and with which headers.
"""

from __future__ import annotations

import json

import pytest

from tests import vscode_fixtures as fixtures
from tests import vscode_harness as harness
from tests.fake_model import ScriptedModel, reply
from tests.vscode_fixtures import (
    VSCode,
    last_prompt,
    open_chat,
    ready,
    send,
    turns_ended,
    user_settings,
    widen_sidebar,
)

build, vscode = fixtures.build, fixtures.vscode
extra_settings, extra_env = fixtures.extra_settings, fixtures.extra_env
extra_keybindings = fixtures.extra_keybindings

NOWHERE = f"http://127.0.0.1:{harness.free_port()}/v1"
"""A loopback port nothing listens on (bound once to find it free, then closed)."""
KEY = "sk-story-key-7c41"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("extra_settings", [{"lspAgent.baseUrl": NOWHERE}])
def test_a_url_where_nothing_listens_offers_the_setting_and_retry_sends_the_prompt_again(
    vscode: VSCode, model: ScriptedModel
) -> None:
    model.add(reply("Reached at last."))
    page = vscode.page
    ready(vscode)
    widen_sidebar(vscode)
    chat = open_chat(vscode)

    send(chat, "what does greet return?")
    failed = chat.locator(".item.status-failed")
    failed.wait_for()
    said = failed.inner_text()
    assert "cannot reach the model endpoint" in said, said
    assert NOWHERE in said, said
    assert failed.get_by_role("button", name="Retry", exact=True).is_visible()
    # The prompt stays in the conversation, and nothing reached the scripted model.
    assert chat.locator(".item.prompt .prompt-text").all_inner_texts() == [
        "what does greet return?"
    ]
    assert model.requests == []

    # Open Settings leads to the URL; the user types the right one there.
    failed.get_by_role("button", name="Open Settings (lspAgent.baseUrl)").click()
    setting = page.locator(".settings-editor .setting-item-contents", has_text="Base Url")
    field = setting.locator("input").first
    field.wait_for()
    assert field.input_value() == NOWHERE
    field.fill(model.base_url)
    harness.wait_until(
        lambda: user_settings(vscode).get("lspAgent.baseUrl") == model.base_url, 30, "the URL"
    )
    # VS Code hands the extension a changed setting a moment after it wrote it (and a prompt
    # sent meanwhile runs with what the server had): the user checks LSP Agent: Status, which
    # names the endpoint in use, before Retry.

    def in_use() -> bool:
        vscode.workbench.run_command("LSP Agent: Status")
        return f"at {model.base_url}" in vscode.output()

    harness.wait_until(in_use, 30, "the status to name the new URL", interval=0.5)

    failed.get_by_role("button", name="Retry", exact=True).click()
    chat.locator(".item.answer", has_text="Reached at last.").wait_for()
    turns_ended(chat, 2)
    assert len(model.requests) == 1
    assert last_prompt(model.requests[0]) == "what does greet return?"


@pytest.mark.timeout(600)
def test_a_refused_key_offers_set_api_key_and_retry_goes_with_the_stored_key(
    vscode: VSCode, model: ScriptedModel
) -> None:
    model.api_key = KEY
    model.add(reply("The key works."))
    workbench = vscode.workbench
    ready(vscode)
    widen_sidebar(vscode)
    chat = open_chat(vscode)

    send(chat, "hello with a key?")
    failed = chat.locator(".item.status-failed")
    failed.wait_for()
    said = failed.inner_text()
    assert "API key" in said, said
    # Named as a VS Code user gives it (the secret storage), not as a setting VS Code has not.
    assert "set a key with LSP Agent: Set API Key or LSP_AGENT_API_KEY" in said, said
    assert "lspAgent.apiKey" not in said, said
    assert "401: You didn't provide an API key." in model.rejections
    assert "authorization" not in model.headers[0]
    for button in ("Set API Key", "Retry"):
        assert failed.get_by_role("button", name=button, exact=True).is_visible()

    failed.get_by_role("button", name="Set API Key", exact=True).click()
    workbench.answer_input(KEY, "LSP Agent: Set API Key")
    # Said once the server runs again with the key.
    workbench.notification("API key stored; the server restarted with it").wait_for()
    assert KEY not in json.dumps(user_settings(vscode))  # in the secret storage, not settings

    failed.get_by_role("button", name="Retry", exact=True).click()
    # A key from the editor goes to an endpoint only once the user says so. The question has no
    # place in the conversation: it is raised as a notification, though the chat is on screen.
    asking = "send your API key"
    workbench.notification_button(asking, "Send the key").wait_for()
    assert model.base_url in workbench.notification(asking).inner_text()
    assert chat.locator(".item.question").count() == 0
    workbench.notification_button(asking, "Send the key").click()
    chat.locator(".item.answer", has_text="The key works.").wait_for()
    first, asked = model.requests
    assert last_prompt(first) == last_prompt(asked) == "hello with a key?"
    assert model.headers[-1].get("authorization") == f"Bearer {KEY}"
    assert KEY not in chat.locator("body").inner_text()
