"""The adversarial corpus end to end: a real `lsp-agent serve`, an editor (the real LSP client of
tests/editor.py) answering every question Deny, the scripted model sending the corpus as bash
tool calls (a batch per turn, one server for the whole corpus), the real sandbox.

Effects are checked from outside, after the run: the workspace, the folder beside it and the
home folder are unchanged (every file's mode, mtime and bytes), no canary file exists anywhere,
nothing reached the loopback listener, no secret reached the model. The checks are shown to see
an effect when the user allows a few of the same commands."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest_asyncio
from lsprotocol import types

from tests.conftest import settings_for
from tests.editor import Editor, start_editor
from tests.fake_model import ScriptedModel, reply, tool_calls
from tests.permission_corpus import (
    ATTACKS,
    HARMLESS,
    MARKERS,
    AttackWorkspace,
    attack_workspace,
    canary_name,
    fill,
    harmless_workspace,
)
from tests.permission_corpus import DENY as MUST_DENY
from tests.test_attacks import Listener, snapshot

BATCH = 40
"""Tool calls per model reply: one turn runs a batch."""


@dataclass
class Outcome:
    """What became of one command, as the model was told."""

    command: str
    text: str

    @property
    def refused(self) -> bool:
        return self.text.startswith("error: refused by policy")

    @property
    def denied_by_user(self) -> bool:
        return self.text.startswith("error: not run:") and "the user denied it" in self.text

    @property
    def ran(self) -> bool:
        return self.text.startswith(("exit code", "timed out", "killed"))


async def run_commands(
    editor: Editor, model: ScriptedModel, commands: Sequence[str]
) -> list[Outcome]:
    """Send `commands` as bash calls, `BATCH` per turn in a fresh session each; what the model
    was told about each, in order."""
    told: dict[str, str] = {}
    for start in range(0, len(commands), BATCH):
        batch = commands[start : start + BATCH]
        calls = [("bash", {"command": c}, f"call-{start + i}") for i, c in enumerate(batch)]
        model.add(tool_calls(calls), reply("done"))
        session = await editor.command("lspAgent.newSession")
        result = await editor.ask("run these commands", session=session.session)
        assert result.status == "completed", result
        for message in model.requests[-1]["messages"]:
            if message["role"] == "tool":
                told[message["tool_call_id"]] = message["content"]
    return [Outcome(command, told[f"call-{i}"]) for i, command in enumerate(commands)]


def deny_all(_: types.ShowMessageRequestParams) -> str:
    return "Deny"


def allow_all(_: types.ShowMessageRequestParams) -> str:
    return "Allow"


@pytest_asyncio.fixture
async def attacked(
    tmp_path: Path, model: ScriptedModel, state_dir: Path
) -> AsyncIterator[tuple[AttackWorkspace, Editor, Listener]]:
    workspace = attack_workspace(tmp_path / "attacked")
    listener = Listener(tmp_path)
    editor = await start_editor(
        workspace.root,
        "visual-studio-code",
        settings_for(model),
        state_dir=state_dir,
        home=workspace.home,
    )
    try:
        yield workspace, editor, listener
    finally:
        await editor.client.shutdown_session()
        await editor.client.stop()
        listener.close()


def everything(workspace: AttackWorkspace) -> dict[str, tuple[int, int, bytes]]:
    return snapshot(workspace.root, workspace.outside, workspace.home)


def canaries(workspace: AttackWorkspace) -> list[Path]:
    found: list[Path] = []
    for top in (workspace.root, workspace.outside, workspace.home, Path("/tmp")):
        pattern = "canary-*" if top == Path("/tmp") else "**/canary-*"
        found += [p for p in top.glob(pattern) if p.name != "--output=canary-glob"]
    return found


def secrets_told(model: ScriptedModel) -> list[str]:
    sent = json.dumps(model.requests)
    return [name for name, marker in MARKERS.items() if marker in sent]


def filled(workspace: AttackWorkspace, port: int) -> list[str]:
    return [
        fill(
            attack.command,
            canary=canary_name(index),
            outside=workspace.outside,
            home=workspace.home,
            port=port,
        )
        for index, attack in enumerate(ATTACKS)
    ]


async def test_every_attack_is_asked_or_denied_and_nothing_happens_when_the_user_denies(
    attacked: tuple[AttackWorkspace, Editor, Listener], model: ScriptedModel
) -> None:
    workspace, editor, listener = attacked
    editor.answer = deny_all
    before = everything(workspace)
    commands = filled(workspace, listener.port)

    outcomes = await run_commands(editor, model, commands)

    allowed_unasked = [o for o in outcomes if o.ran]
    escaped = {
        "changed files": sorted(set(everything(workspace).items()) ^ set(before.items()))[:5],
        "canaries": canaries(workspace),
        "connections": listener.hits,
        "secrets told": secrets_told(model),
    }
    asked = [o for o in outcomes if o.denied_by_user]
    refused = [o for o in outcomes if o.refused]
    print(
        f"\ncorpus end to end: tried {len(outcomes)}, allowed unasked {len(allowed_unasked)}, "
        f"asked {len(asked)}, refused {len(refused)}, "
        f"escaped {sum(1 for v in escaped.values() if v)}"
    )
    assert allowed_unasked == [], [o.command for o in allowed_unasked]
    assert not any(escaped.values()), escaped
    assert len(asked) + len(refused) == len(outcomes)
    assert len(editor.questions) == len(asked)  # one question per asked command, no more
    for attack, outcome in zip(ATTACKS, outcomes, strict=True):
        if attack.expected == MUST_DENY:
            assert outcome.refused, outcome


async def test_the_checks_see_the_effects_when_the_user_allows(
    attacked: tuple[AttackWorkspace, Editor, Listener], model: ScriptedModel
) -> None:
    workspace, editor, _ = attacked
    editor.answer = allow_all
    before = everything(workspace)
    commands = [
        "touch canary-allowed",
        "cat <<EOF\n$(touch canary-heredoc)\nEOF",
        "cat .env",
        "rm README.md",
    ]

    outcomes = await run_commands(editor, model, commands)

    assert all(o.ran for o in outcomes), outcomes
    assert {p.name for p in canaries(workspace)} == {"canary-allowed", "canary-heredoc"}
    assert "env" in secrets_told(model)
    changed = set(everything(workspace).items()) ^ set(before.items())
    assert any(path.endswith("README.md") for path, _ in changed)


@pytest_asyncio.fixture
async def harmless(
    tmp_path: Path, model: ScriptedModel, state_dir: Path, home: Path
) -> AsyncIterator[Editor]:
    root = harmless_workspace(tmp_path / "harmless")
    editor = await start_editor(root, "neovim", settings_for(model), state_dir=state_dir, home=home)
    try:
        yield editor
    finally:
        await editor.client.shutdown_session()
        await editor.client.stop()


async def test_harmless_commands_run_without_a_question(
    harmless: Editor, model: ScriptedModel
) -> None:
    harmless.answer = deny_all

    outcomes = await run_commands(harmless, model, HARMLESS)

    asked = [o.command for o in outcomes if not o.ran]
    print(f"\nharmless end to end: tried {len(outcomes)}, asked {len(asked)}")
    assert asked == []
    assert harmless.questions == []
    failing = [o for o in outcomes if not o.text.startswith("exit code 0")]
    # every one ran in the sandbox; the few that exit non-zero do so for a reason of their own
    assert len(failing) <= 3, [(o.command, o.text[:160]) for o in failing]
    assert not secrets_told(model)
