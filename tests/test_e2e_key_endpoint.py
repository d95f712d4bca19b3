"""The API key goes only where the user sent it, through a real `lsp-agent serve`.

Each story starts a server of its own, with the keys in its environment or its settings, and
two scripted endpoints on loopback: the one the key was set for, and a canary standing for the
host a cloned workspace names (its `.vscode/settings.json`, a `didChangeConfiguration`, a
provider). The canary must never see the key; the question names its host; the legitimate
endpoint does get the key (the controls), so a check that saw nothing is not a check that could
not see.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests import editor as editor_module
from tests.conftest import new_workspace, stop
from tests.editor import Editor, start_editor
from tests.fake_model import ScriptedAnthropic, ScriptedModel, reply

KEY = "sk-canary-key-5f1e0c"
SEND = "Send the key"


def carried_key(endpoint: ScriptedModel | ScriptedAnthropic) -> bool:
    """Whether any request the endpoint received carried the key, in any header."""
    return any(KEY in value for headers in endpoint.headers for value in headers.values())


class Story:
    """A server of the story's own: its environment, its settings, its user's answers."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root = new_workspace(tmp_path / "project")
        self.state_dir = tmp_path / "state"
        self.home = tmp_path / "home"
        self.state_dir.mkdir()
        (self.home / ".agents").mkdir(parents=True)
        self.monkeypatch = monkeypatch
        self.answers: list[str | None] = []
        """How the user answers each question, in order (None: dismissed); then dismissed."""

    @asynccontextmanager
    async def serve(
        self, settings: dict[str, Any], environ: dict[str, str] | None = None
    ) -> AsyncIterator[Editor]:
        plain = editor_module.server_env

        def with_keys(state_dir: Path, home: Path) -> dict[str, str]:
            return {**plain(state_dir, home), **(environ or {})}

        self.monkeypatch.setattr(editor_module, "server_env", with_keys)
        started = await start_editor(
            self.root, "visual-studio-code", settings, state_dir=self.state_dir, home=self.home
        )
        started.answer = self._answer
        try:
            yield started
        finally:
            await stop(started)

    def _answer(self, _: types.ShowMessageRequestParams) -> str | None:
        return self.answers.pop(0) if self.answers else None


@pytest.fixture
def story(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Story:
    return Story(tmp_path, monkeypatch)


def key_questions(editor: Editor) -> list[str]:
    return [q.message for q in editor.questions if "API key" in q.message]


async def move_endpoint(editor: Editor, settings: dict[str, Any]) -> None:
    """The settings change mid-session (`didChangeConfiguration`); returns once the server
    reports the new endpoint (a round trip per look, a hang guard of 20 s)."""
    editor.client.set_configuration({"lspAgent": settings})
    editor.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings=None)
    )
    async with asyncio.timeout(20):
        while (await editor.command("lspAgent.status", {})).baseUrl != settings["baseUrl"]:
            pass


def host_of(endpoint: ScriptedModel | ScriptedAnthropic) -> str:
    return f"127.0.0.1:{endpoint.port}"


async def test_a_key_and_endpoint_from_the_environment_reach_the_endpoint_unasked(
    story: Story,
) -> None:
    with ScriptedModel([reply("hi")], api_key=KEY) as mine:
        environ = {"LSP_AGENT_API_KEY": KEY, "LSP_AGENT_BASE_URL": mine.base_url}
        async with story.serve({"model": "test-model"}, environ) as editor:
            result = await editor.ask("hello")

    assert result.status == "completed", result
    assert carried_key(mine)  # the control: the key does go where it was set for
    assert key_questions(editor) == []


async def test_a_workspace_setting_that_moves_the_endpoint_gets_a_question_not_the_key(
    story: Story,
) -> None:
    # 3: the key is the environment's; the editor's settings (a cloned .vscode/settings.json,
    # applied by VS Code to a setting without a machine scope) name another host.
    with ScriptedModel([reply("hi")]) as mine, ScriptedModel([reply("stolen")]) as canary:
        environ = {"LSP_AGENT_API_KEY": KEY, "LSP_AGENT_BASE_URL": mine.base_url}
        settings = {"model": "test-model", "baseUrl": canary.base_url}
        async with story.serve(settings, environ) as editor:
            result = await editor.ask("hello")

    assert not carried_key(canary)
    assert canary.requests == []  # nothing at all: neither the key nor the conversation
    assert result.status == "failed"
    assert f"not sent to {host_of(canary)}" in result.error
    (question,) = key_questions(editor)
    assert host_of(canary) in question
    assert f"set for {host_of(mine)}" in question


async def test_a_key_in_the_editor_s_settings_is_asked_once_per_endpoint_and_kept(
    story: Story,
) -> None:
    # 1: the key and the endpoint both come from the editor, where a workspace's settings file
    # may have put the endpoint: asked once, showing the host; a yes is kept for later servers.
    with ScriptedModel([reply("one"), reply("two"), reply("three")], api_key=KEY) as mine:
        settings = {"model": "test-model", "apiKey": KEY, "baseUrl": mine.base_url}
        story.answers = [SEND]
        async with story.serve(settings) as editor:
            first = await editor.ask("hello")
            second = await editor.ask("again")
        async with story.serve(settings) as later:
            third = await later.ask("and again")

    assert [first.status, second.status, third.status] == ["completed"] * 3
    assert carried_key(mine)
    (question,) = key_questions(editor)
    assert host_of(mine) in question
    assert key_questions(later) == []  # the yes was kept
    assert KEY not in (story.state_dir / "endpoints.json").read_text()


async def test_a_key_from_the_editor_never_approved_is_not_sent_when_the_question_is_dismissed(
    story: Story,
) -> None:
    with ScriptedModel([reply("stolen")]) as canary:
        settings = {"model": "test-model", "apiKey": KEY, "baseUrl": canary.base_url}
        async with story.serve(settings) as editor:
            result = await editor.ask("hello")
            with pytest.raises(JsonRpcException) as listing:
                await editor.command("lspAgent.models", {})

    assert not carried_key(canary)
    assert canary.requests == []
    assert result.status == "failed"
    assert f"not sent to {host_of(canary)}" in str(listing.value)
    assert len(key_questions(editor)) == 1  # asked once: the model list is not asked again


async def test_a_mid_session_change_of_host_is_asked_before_the_key_goes(story: Story) -> None:
    # 2: a didChangeConfiguration moves baseUrl while the session runs.
    with (
        ScriptedModel([reply("one"), reply("two")], api_key=KEY) as mine,
        ScriptedModel([reply("stolen")]) as canary,
    ):
        settings = {"model": "test-model", "apiKey": KEY, "baseUrl": mine.base_url}
        story.answers = [SEND, "Do not send it"]
        async with story.serve(settings) as editor:
            first = await editor.ask("hello")
            await move_endpoint(editor, {**settings, "baseUrl": canary.base_url})
            moved = await editor.ask("again", session=first.session)
            once_more = await editor.ask("and again", session=first.session)

    assert first.status == "completed"
    assert carried_key(mine)
    assert not carried_key(canary)
    assert canary.requests == []
    assert (moved.status, once_more.status) == ("failed", "failed")
    questions = key_questions(editor)
    assert len(questions) == 2  # the first endpoint, then the new one, once
    assert host_of(canary) in questions[1]


async def test_a_provider_named_by_the_workspace_does_not_carry_the_key_to_its_api(
    story: Story,
) -> None:
    # 4: the environment sets the key for an OpenAI-compatible endpoint; the editor's settings
    # switch the provider (and with it the default URL) to Anthropic's dialect.
    with ScriptedModel([reply("hi")]) as mine, ScriptedAnthropic([reply("stolen")]) as canary:
        environ = {"LSP_AGENT_API_KEY": KEY, "OPENAI_BASE_URL": mine.base_url}
        settings = {"model": "test-model", "provider": "anthropic", "baseUrl": canary.base_url}
        async with story.serve(settings, environ) as editor:
            result = await editor.ask("hello")

    assert not carried_key(canary)
    assert canary.requests == []
    assert result.status == "failed"
    (question,) = key_questions(editor)
    assert host_of(canary) in question


async def test_a_key_in_the_users_env_file_stays_with_the_env_file_s_endpoint(
    story: Story,
) -> None:
    # 5: the key lives in ~/.agents/env with its endpoint; a workspace names another host.
    with ScriptedModel([reply("stolen")]) as canary, ScriptedModel([reply("hi")]) as mine:
        (story.home / ".agents" / "env").write_text(
            f"LSP_AGENT_API_KEY={KEY}\nLSP_AGENT_BASE_URL={mine.base_url}\n"
        )
        async with story.serve({"model": "test-model", "baseUrl": canary.base_url}) as editor:
            result = await editor.ask("hello")

    assert not carried_key(canary)
    assert canary.requests == []
    assert result.status == "failed"
    assert host_of(canary) in key_questions(editor)[0]
