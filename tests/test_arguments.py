"""Command arguments: every mistake names the key, unknown keys are ignored."""

from __future__ import annotations

import pytest

from lsp_agent.lsp.arguments import (
    ArgumentError,
    ask_arguments,
    client_options,
    session_argument,
    undo_arguments,
)


def test_a_full_ask_is_parsed() -> None:
    args = ask_arguments(
        "lspAgent.ask",
        [
            {
                "prompt": "explain",
                "session": "s1",
                "uri": "file:///x.py",
                "range": {"start": {"line": 1, "character": 2}, "end": {"line": 3, "character": 0}},
                "mode": "auto",
                "futureKey": True,
            }
        ],
    )
    assert args.prompt == "explain"
    assert args.session == "s1"
    assert args.mode == "auto"
    assert args.range is not None
    assert args.range.start.character == 2


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ([], "prompt"),
        ([{"prompt": ""}], "prompt"),
        ([{"prompt": "  "}], "prompt"),
        ([{"prompt": ["x"]}], "prompt"),
        ([{"prompt": "x", "session": 3}], "session"),
        ([{"prompt": "x", "mode": "fast"}], "mode"),
        ([{"prompt": "x", "uri": "file:///a", "range": [0, 1]}], "range"),
        ([{"prompt": "x", "uri": "file:///a", "range": {"start": {"line": 0}}}], "range.start"),
        (
            [
                {
                    "prompt": "x",
                    "uri": "file:///a",
                    "range": {
                        "start": {"line": 2, "character": 0},
                        "end": {"line": 1, "character": 0},
                    },
                }
            ],
            "range.end",
        ),
        ([{"prompt": "x"}, {"prompt": "y"}], "the prompt as a string, or one object"),
        ([["x"]], "the prompt as a string, or one object"),
    ],
)
def test_a_wrong_ask_names_the_key(raw: list[object], named: str) -> None:
    with pytest.raises(ArgumentError) as raised:
        ask_arguments("lspAgent.ask", raw)
    assert named in str(raised.value)


@pytest.mark.parametrize(
    "raw",
    [["fix the add function"], ["fix", "the", "add", "function"]],
    ids=["a string", "words"],
)
def test_the_prompt_may_come_as_strings(raw: list[object]) -> None:
    assert ask_arguments("lspAgent.start", raw).prompt == "fix the add function"


def test_cancel_needs_a_session_and_status_does_not() -> None:
    with pytest.raises(ArgumentError, match="session"):
        session_argument("lspAgent.cancel", [{}], required=True)
    assert session_argument("lspAgent.status", [], required=False) is None
    assert session_argument("lspAgent.cancel", [{"session": "a"}], required=True) == "a"


def test_ask_mode_is_a_mode_of_ask_but_not_of_undo() -> None:
    assert ask_arguments("lspAgent.ask", [{"prompt": "why?", "mode": "ask"}]).mode == "ask"
    with pytest.raises(ArgumentError, match='mode must be "review" or "auto"'):
        undo_arguments([{"session": "s", "mode": "ask"}])


def test_a_rewind_names_the_turn_to_rewind_to() -> None:
    assert undo_arguments([{"session": "s", "turn": 2, "rewind": True}]).rewind is True
    assert undo_arguments([{"session": "s"}]).rewind is False
    with pytest.raises(ArgumentError, match="rewind needs turn"):
        undo_arguments([{"session": "s", "rewind": True}])
    with pytest.raises(ArgumentError, match="rewind must be a boolean"):
        undo_arguments([{"session": "s", "turn": 1, "rewind": "yes"}])


def test_a_client_may_say_how_its_user_gives_the_api_key() -> None:
    vscode = client_options({"settingName": "lspAgent.%s", "apiKeyName": "a key with Set API Key"})
    assert vscode.setting("apiKey") == "a key with Set API Key"
    assert vscode.setting("model") == "lspAgent.model"
    plain = client_options({"apiKeyName": "  "})
    assert plain.setting("apiKey") == "lspAgent.apiKey"
