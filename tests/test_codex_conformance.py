"""Codex's own apply_patch cases, end to end over LSP.

`../shared/data/peer-suites/codex.jsonl` holds OpenAI Codex's apply_patch scenarios and unit
cases (76: the files before, the patch, the files expected after or the failure expected, and
for some our documented alternative with its reason). For each case the scripted model reads
the files and sends the patch over loopback, the real server (one for the whole suite, its
workspace emptied and refilled between cases) proposes ONE workspace edit over stdio, and the
scripted editor applies it as an editor does: creating parent folders for new files, editing,
deleting. Then the workspace must hold exactly the expected files, byte for byte, and the tool
must have failed exactly when upstream expects a failure — or the case's `alt` must hold (our
deliberate behaviour, whose reason the case records).
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.editor import Editor, start_editor
from tests.fake_model import ScriptedModel, reply, tool_call, tool_calls


def suite_path() -> Path:
    """Where the cases are: `LSP_AGENT_PEER_SUITES`, else next to the repository."""
    override = os.environ.get("LSP_AGENT_PEER_SUITES")
    base = Path(override) if override else Path(__file__).resolve().parents[2] / "shared/data"
    return base / "peer-suites" / "codex.jsonl"


def load_cases() -> list[dict[str, Any]]:
    path = suite_path()
    if not path.is_file():
        return [{"id": "suite-missing"}]  # fails below instead of skipping
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


CASES = load_cases()


@dataclass
class Suite:
    """The one server the cases share, and its scripted model."""

    editor: Editor
    model: ScriptedModel
    root: Path
    tally: Counter[str]
    """How each case passed: `upstream` (Codex's expectation) or `alternative` (ours)."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def suite(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> AsyncIterator[Suite]:
    base = tmp_path_factory.mktemp("codex")
    root, state, home = base / "workspace", base / "state", base / "home"
    for folder in (root, state, home):
        folder.mkdir()
    with ScriptedModel() as model:
        settings = {"baseUrl": model.base_url, "model": "test-model"}
        editor = await start_editor(
            root, "visual-studio-code", settings, state_dir=state, home=home
        )
        shared = Suite(editor, model, root, Counter())
        yield shared
        await editor.client.shutdown_session()
        await editor.client.stop()
    passed, alternative = shared.tally["upstream"], shared.tally["alternative"]
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if capture is not None and shared.tally:
        # The figure the suite is run for, shown however pytest captures output.
        with capture.global_and_fixture_disabled():
            print(
                f"\ncodex apply_patch suite: {passed} as upstream expects, {alternative} as our "
                f"documented alternative, {len(CASES) - passed - alternative} failing, "
                f"of {len(CASES)}"
            )


def fill(root: Path, files: dict[str, str]) -> None:
    """The workspace holds exactly `files` (written as bytes: line endings as given)."""
    for entry in root.iterdir():
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))


def snapshot(root: Path) -> dict[str, str]:
    """Every file in the workspace, by its path relative to the root."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes().decode("utf-8")
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
async def test_a_codex_case_lands_as_codex_expects_or_as_we_document(
    case: dict[str, Any], suite: Suite
) -> None:
    assert "patch" in case.get("args", {}), f"peer suite not found at {suite_path()}"
    editor, model = suite.editor, suite.model
    fill(suite.root, case["files"])
    editor.events.clear()
    session = (await editor.command("lspAgent.newSession", {})).session
    reads = [("read_file", {"path": rel}) for rel in sorted(case["files"])]
    if reads:
        model.add(tool_calls(reads))
    model.add(tool_call("apply_patch", case["args"]), reply("Done."))

    result = await editor.ask("apply this patch", session=session)

    assert result.status == "completed", result
    assert model.remaining == 0
    (outcome,) = [e for e in editor.events_of("toolResult") if e["name"] == "apply_patch"]
    told = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "tool"][-1]
    failed, files = not outcome["ok"], snapshot(suite.root)
    if failed == case.get("expect_error", False) and files == case["expected"]:
        suite.tally["upstream"] += 1
        return
    alternative = case.get("alt")
    assert alternative is not None, f"not as Codex expects, and no alternative: {told}"
    assert files == alternative.get("expected", case["expected"]), told
    assert failed == alternative.get("expect_error", case.get("expect_error", False)), told
    if "error_contains" in alternative:
        assert alternative["error_contains"] in told
    suite.tally["alternative"] += 1
