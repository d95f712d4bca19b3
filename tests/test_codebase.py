"""`#codebase`: the workspace searched for the prompt's terms before the first model call.

The terms a prompt gives, then the whole path through the real server over stdio with the
scripted model on loopback and real ripgrep: what the model is sent, what the editor is shown as
the turn runs, what `lspAgent.history` gives back, and what is never searched (a `.env` file, a
.gitignore'd folder). Without `codebase` nothing is searched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lsp_agent.agent import codebase
from lsp_agent.agent.codebase import asked, terms
from lsp_agent.tools import files
from lsp_agent.tools.workspace import Workspace
from tests.editor import Editor
from tests.fake_model import ScriptedModel, reply


def test_code_spans_and_identifiers_come_before_words_and_common_words_are_left_out() -> None:
    assert terms("#codebase where do we `retry_after` in the HTTP client? fetchModels too") == [
        "retry_after",
        "fetchModels",
        "HTTP",
        "client",
    ]
    assert terms("#codebase explain how this works, please") == []
    assert asked("what is #codebase")
    assert asked("#codebase\nwhere")
    assert not asked("see issue#codebase or #codebases")
    assert terms("Where is `Backoff` used? backoff BACKOFF") == ["Backoff"]  # once, any case


def test_at_most_six_terms_are_searched() -> None:
    assert len(terms("alpha_1 beta_2 gamma_3 delta_4 epsilon_5 zeta_6 eta_7 theta_8")) == 6


async def test_a_rare_identifier_outranks_a_word_every_file_has(tmp_path: Path) -> None:
    # Forty files say "client"; one deep in the tree has the identifier asked about: it comes
    # right after the file that has both, before any of the forty.
    for number in range(40):
        (tmp_path / "pkg").mkdir(exist_ok=True)
        (tmp_path / "pkg" / f"m{number:02d}.py").write_text("client = None\n")
    (tmp_path / "zz" / "deep").mkdir(parents=True)
    (tmp_path / "zz" / "deep" / "handler.py").write_text("def retry_after(): ...\n")
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "client.py").write_text("client.retry_after(3)\n")
    found = await codebase.search(Workspace(tmp_path), "how does the client `retry_after`?")
    assert found.terms == ["retry_after", "client"]
    shown = [line for line in found.text.splitlines() if not line.startswith((" ", "…", "The"))]
    assert shown[:2] == [
        "net/client.py (has retry_after, client)",
        "zz/deep/handler.py (has retry_after)",
    ]
    assert len(shown) == codebase.FILES_SHOWN
    assert found.summary == f"42 files match retry_after, client; {codebase.FILES_SHOWN} shown"
    assert found.text.endswith("… 34 more files match")


pytestmark_async = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def editor_name() -> str:
    return "visual-studio-code"


@pytest.fixture
def editor(shared_editor: Editor) -> Editor:
    return shared_editor


@pytest.fixture
def workspace(shared_editor: Editor) -> Path:
    return shared_editor.root


@pytest.fixture(scope="module")
def shared_workspace(shared_workspace: Path) -> Path:
    (shared_workspace / "net").mkdir()
    (shared_workspace / "net" / "client.py").write_text(
        "class Client:\n"
        "    def fetch(self):\n"
        "        return self.retry_after(3)\n"
        "\n"
        "    def retry_after(self, seconds):\n"
        "        return backoff(seconds)\n",
        encoding="utf-8",
    )
    (shared_workspace / "net" / "backoff.py").write_text(
        "def backoff(seconds):\n    return seconds * 2\n", encoding="utf-8"
    )
    (shared_workspace / "README.md").write_text("A client that retries.\n", encoding="utf-8")
    (shared_workspace / ".env").write_text("RETRY_AFTER_TOKEN=sk-secret-value\n")
    (shared_workspace / ".gitignore").write_text("build/\n")
    (shared_workspace / "build").mkdir()
    (shared_workspace / "build" / "client.py").write_text("def retry_after(): pass\n")
    return shared_workspace


def user_message(request: dict[str, Any], prompt: str) -> str:
    """The user message that carries `prompt` (the reminder follows it as another)."""
    (message,) = [
        str(m["content"])
        for m in request["messages"]
        if m["role"] == "user" and str(m["content"]).startswith(prompt)
    ]
    return message


@pytestmark_async
async def test_codebase_sends_the_files_that_match_the_most_terms_and_shows_the_search(
    editor: Editor, model: ScriptedModel, workspace: Path
) -> None:
    model.add(reply("It retries in Client.retry_after."))
    prompt = "#codebase where does the client call `retry_after`?"
    answer = await editor.ask(prompt, codebase=True)
    assert answer.status == "completed"

    sent = user_message(model.requests[-1], prompt)
    assert "searched for the prompt's terms (`retry_after`, `client`)" in sent
    # net/client.py matches both terms (one in its path), so it comes first, with its lines.
    assert sent.index("net/client.py") < sent.index("README.md")
    assert "  3: return self.retry_after(3)" in sent
    assert "  5: def retry_after(self, seconds):" in sent
    # Never searched: .env files and what .gitignore leaves out.
    assert "sk-secret-value" not in sent
    assert ".env" not in sent.split("before this turn.")[1]
    assert "build/client.py" not in sent

    # The editor saw it as a search, before the model's answer.
    (shown,) = editor.events_of("tool", session=answer.session, name="search")
    assert shown["args"] == {"codebase": True, "terms": ["retry_after", "client"]}
    (result,) = editor.events_of("toolResult", session=answer.session, name="search")
    assert result["ok"] is True
    assert result["summary"] == "2 files match retry_after, client; 2 shown"

    # And a reloaded chat shows it again.
    history = await editor.command("lspAgent.history", {"session": answer.session})
    items = [json.loads(json.dumps(item, default=vars)) for item in history]
    searches = [item for item in items if item["type"] == "tool" and item["name"] == "search"]
    assert searches[-1]["args"] == {"codebase": True, "terms": ["retry_after", "client"]}
    assert searches[-1]["summary"] == result["summary"]
    assert "net/client.py" in searches[-1]["result"]


@pytestmark_async
async def test_without_codebase_nothing_is_searched_and_no_match_is_said_plainly(
    editor: Editor, model: ScriptedModel
) -> None:
    model.add(reply("plain"), reply("nothing there"))
    searched = len(editor.events_of("tool", name="search"))
    prompt = "where does the client call `retry_after`?"
    plain = await editor.ask(prompt)
    assert plain.status == "completed"
    assert user_message(model.requests[-1], prompt) == prompt
    assert len(editor.events_of("tool", name="search")) == searched

    prompt = "where is `zebra_crossing` handled? #codebase"  # typed, as any client's user may
    missing = await editor.ask(prompt)
    assert missing.status == "completed"
    sent = user_message(model.requests[-1], prompt)
    assert (
        "no file in the workspace matches the prompt's terms (`zebra_crossing`, `handled`)" in sent
    )


@pytestmark_async
async def test_codebase_must_be_a_boolean(editor: Editor) -> None:
    with pytest.raises(Exception, match="codebase must be a boolean"):
        await editor.ask("#codebase anything", codebase="yes")


async def test_a_search_stopped_before_it_found_anything_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in for a ripgrep stopped by its time limit before its first file (a real one
    # cannot be made to be slow on demand): what the model is told must not be "no match".
    async def stopped(*_: object, **__: object) -> tuple[list[str], bool]:
        return [], True

    monkeypatch.setattr(files, "files_matching", stopped)
    found = await codebase.search(Workspace(tmp_path), "where is the `client`?")
    assert found.summary == f"stopped after {codebase.TIMEOUT:g} s"
    assert "was stopped after 10 s before any file was found" in found.text
