"""Where MCP servers come from: the editor's setting, `~/.agents/mcp.json`, the workspace's
`.mcp.json` — checked entry by entry, the workspace's file read as data only, and the user's
answers about the workspace's servers remembered outside it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lsp_agent.config import load_settings
from lsp_agent.mcp.approvals import Approvals, confirmation_text
from lsp_agent.mcp.servers import (
    MAX_FILE_BYTES,
    USER_FILE,
    USER_SETTING,
    WORKSPACE_FILE,
    MissingVariable,
    configured,
    expand,
    server_key,
)


def write_json(path: Path, document: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document), encoding="utf-8")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def test_the_setting_takes_the_common_shape_and_a_whole_pasted_file() -> None:
    entry = {"command": "uvx", "args": ["mcp-server-git"]}
    flat, warnings = load_settings({"mcpServers": {"git": entry}}, environ={})
    pasted, _ = load_settings({"mcpServers": {"mcpServers": {"git": entry}}}, environ={})
    assert warnings == []
    assert flat.mcp_servers == pasted.mcp_servers == {"git": entry}
    # Headers and environments hold tokens: status and doctor never show the setting's value.
    assert flat.describe()["mcpServers"] == {"value": "set (from editor)", "source": "editor"}
    assert load_settings({}, environ={})[0].describe()["mcpServers"]["value"] is None


def test_a_setting_that_is_not_an_object_is_skipped_with_a_sentence() -> None:
    settings, warnings = load_settings({"mcpServers": ["git"]}, environ={})
    assert settings.mcp_servers is None
    assert any("mcpServers" in w and "object of MCP servers" in w for w in warnings)


def test_the_three_places_strongest_first(root: Path, home: Path) -> None:
    write_json(
        home / ".agents" / "mcp.json",
        {"mcpServers": {"docs": {"url": "https://docs.example/mcp"}, "git": {"command": "b"}}},
    )
    write_json(
        root / WORKSPACE_FILE, {"mcpServers": {"git": {"command": "c"}, "db": {"command": "d"}}}
    )
    found = configured(root, {"git": {"command": "a"}}, home)
    by_name = {spec.name: spec for spec in found.servers}
    assert [spec.name for spec in found.servers] == ["git", "docs", "db"]
    assert (by_name["git"].command, by_name["git"].source) == ("a", USER_SETTING)
    assert (by_name["docs"].transport, by_name["docs"].source) == ("http", USER_FILE)
    assert by_name["db"].source == WORKSPACE_FILE
    assert by_name["db"].from_workspace
    # The workspace cannot take over a name the user gave a server of theirs.
    assert any("names a server 'git'" in problem for problem in found.problems)


def test_each_entry_is_checked_on_its_own(root: Path) -> None:
    servers = {
        "good": {"command": "server", "args": ["--x"], "env": {"A": "1"}, "cwd": "sub"},
        "no command": {"args": []},
        "bad args": {"command": "x", "args": "--x"},
        "old sse": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
        "ftp": {"url": "ftp://example.com"},
        "slow": {"command": "x", "timeout": -1},
        "off": {"command": "x", "disabled": True},
        "???": {"command": "x"},
        "list": ["x"],
    }
    found = configured(root, servers, None)
    assert [spec.name for spec in found.servers] == ["good"]
    good = found.servers[0]
    assert good.cwd == root / "sub"
    assert good.env == {"A": "1"}
    assert len(found.problems) == 7  # "off" is left out without a word
    joined = "\n".join(found.problems)
    for name in ("no command", "bad args", "old sse", "ftp", "slow", "???", "list"):
        assert repr(name) in joined


def test_server_names_become_tool_name_parts_without_double_underscores(root: Path) -> None:
    assert server_key("github") == "github"
    assert server_key("my.server name") == "my_server_name"
    assert server_key("a__b") == "a_b"
    assert server_key("x" * 40) == "x" * 20
    found = configured(root, {"a.b": {"command": "x"}, "a b": {"command": "y"}}, None)
    assert [spec.name for spec in found.servers] == ["a.b"]
    assert "mcp__a_b__" in found.problems[0]


def test_the_workspace_file_is_read_as_data_only(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.json"
    write_json(outside, {"mcpServers": {"evil": {"command": "evil"}}})
    (root / WORKSPACE_FILE).symlink_to(outside)
    found = configured(root, None, None)
    assert found.servers == ()
    assert found.problems == (f"{WORKSPACE_FILE} links outside the workspace: not read",)

    (root / WORKSPACE_FILE).unlink()
    write_json(root / "tools" / "mcp.json", {"mcpServers": {"inside": {"command": "x"}}})
    (root / WORKSPACE_FILE).symlink_to(root / "tools" / "mcp.json")  # inside: fine
    assert [spec.name for spec in configured(root, None, None).servers] == ["inside"]

    (root / WORKSPACE_FILE).unlink()
    os.mkfifo(root / WORKSPACE_FILE)  # a read would block for ever
    found = configured(root, None, None)
    assert found.servers == ()
    assert found.problems == (f"{WORKSPACE_FILE} is a pipe (FIFO), not a regular file: not read",)

    (root / WORKSPACE_FILE).unlink()
    padding = " " * MAX_FILE_BYTES
    (root / WORKSPACE_FILE).write_text('{"mcpServers": {"x": {"command": "x"}}}' + padding)
    found = configured(root, None, None)
    assert found.servers == ()
    assert "larger than" in found.problems[0]

    (root / WORKSPACE_FILE).write_text("{not json")
    assert "not valid JSON" in configured(root, None, None).problems[0]


def test_variables_are_looked_up_when_the_server_starts() -> None:
    lookup = {"TOKEN": "s3cret"}.get
    assert expand("Bearer ${TOKEN}", lookup) == "Bearer s3cret"
    assert expand("Bearer ${env:TOKEN}", lookup) == "Bearer s3cret"
    assert expand("no $TOKEN here", lookup) == "no $TOKEN here"
    with pytest.raises(MissingVariable) as missing:
        expand("${NOPE}", lookup)
    assert missing.value.name == "NOPE"


def test_what_status_shows_never_holds_a_secret(root: Path) -> None:
    servers = {
        "api": {"url": "https://api.example/mcp", "headers": {"Authorization": "Bearer abc123"}},
        "local": {"command": "srv", "env": {"API_TOKEN": "xyz789"}},
    }
    found = configured(root, servers, None)
    shown = json.dumps([spec.describe() for spec in found.servers])
    assert "abc123" not in shown
    assert "xyz789" not in shown
    assert "Authorization" in shown
    assert "API_TOKEN" in shown


def test_the_question_shows_what_would_run_and_which_variables_it_gets(root: Path) -> None:
    write_json(
        root / WORKSPACE_FILE,
        {
            "mcpServers": {
                "tool": {
                    "command": "npx",
                    "args": ["-y", "pkg; rm -rf ~"],
                    "env": {"K": "${SECRET}"},
                },
                "remote": {"url": "https://x.example/mcp", "headers": {"X": "${env:GITHUB_TOKEN}"}},
            }
        },
    )
    tool, remote = configured(root, None, None).servers
    asked = confirmation_text(tool)
    assert "npx -y 'pkg; rm -rf ~'" in asked
    assert str(root) in asked
    assert "SECRET" in asked
    assert "outside the sandbox" in asked
    asked = confirmation_text(remote)
    assert "https://x.example/mcp" in asked
    assert "GITHUB_TOKEN" in asked


def test_answers_are_remembered_per_server_definition(root: Path, tmp_path: Path) -> None:
    write_json(root / WORKSPACE_FILE, {"mcpServers": {"db": {"command": "db-server"}}})
    (spec,) = configured(root, None, None).servers
    approvals = Approvals(tmp_path / "state")
    assert approvals.answer(spec) is None
    approvals.remember(spec, "start")
    assert Approvals(tmp_path / "state").answer(spec) == "start"
    # A changed command line is another server: asked again.
    changed_entry = {"command": "db-server", "args": ["-x"]}
    write_json(root / WORKSPACE_FILE, {"mcpServers": {"db": changed_entry}})
    (changed,) = configured(root, None, None).servers
    assert approvals.answer(changed) is None
    approvals.remember(changed, "never")
    assert approvals.answer(changed) == "never"
    assert approvals.answer(spec) == "start"
