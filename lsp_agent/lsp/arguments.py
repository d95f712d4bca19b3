"""Checking the argument object of each `lspAgent.*` command (docs/protocol.md, Commands).

Unknown keys are ignored; a wrong type or a missing key is an `ArgumentError` whose message names
the key, which the server sends back as a JSON-RPC "invalid params" error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class ArgumentError(ValueError):
    """A command argument is missing or has the wrong type; the message names the key."""


@dataclass(frozen=True)
class Position:
    line: int
    character: int


@dataclass(frozen=True)
class Range:
    start: Position
    end: Position


@dataclass(frozen=True)
class AskArguments:
    """`lspAgent.ask`."""

    prompt: str
    """What the user asks, as typed."""
    session: str | None = None
    """The session to continue; the workspace's latest when omitted."""
    uri: str | None = None
    """The document the user is looking at."""
    range: Range | None = None
    """The selection in `uri`, in the negotiated position encoding."""
    mode: str | None = None
    """`review` (the editor asks before applying) or `auto`; the `mode` setting when omitted.
    `ask`: an answer without changes (no edit or command is offered to the model)."""
    folder: str | None = None
    """The workspace folder to run in (a URI), when the editor has several open."""
    codebase: bool = False
    """The user added `#codebase`: the workspace is searched for the prompt's terms and what
    matches goes to the model with the prompt."""


@dataclass(frozen=True)
class UndoArguments:
    """`lspAgent.undoTurn`."""

    session: str
    turn: int | None = None
    """The turn to undo; the session's last turn with accepted edits when omitted."""
    mode: str | None = None
    rewind: bool = False
    """Undo every later turn too: the files as they were before the turn's prompt."""
    conversation: bool = False
    """Rewind the conversation as well: it continues from before the turn's prompt (implies
    `rewind`)."""


@dataclass(frozen=True)
class ClientOptions:
    """What a client says of itself in `initializationOptions.lspAgentClient`."""

    events: bool = False
    """Send it `lspAgent/event` notifications (our plugins ask for them; others would only log
    an unknown method)."""
    shows_answers: bool = False
    """It shows answers and progress itself: no `window/showMessage` with the answer."""
    setting_name: str = "lspAgent.%s"
    """How a setting is named to this client's user, `%s` standing for the key (`lspAgent.%s`
    in VS Code and plain clients, `setup({ settings = { %s = … } })` in the Neovim plugin)."""
    api_key_name: str | None = None
    """How this client's user gives the API key when it is not a setting of theirs (VS Code
    keeps it in its secret storage: `a key with LSP Agent: Set API Key`)."""

    def setting(self, key: str) -> str:
        """The setting `key` in the words of this client's user."""
        if key == "apiKey" and self.api_key_name:
            return self.api_key_name
        if "%s" not in self.setting_name:
            return f"lspAgent.{key}"
        return self.setting_name.replace("%s", key)


def client_options(raw: Any) -> ClientOptions:
    """The client's options; anything of the wrong shape is ignored (a default is fine)."""
    if not isinstance(raw, dict):
        return ClientOptions()
    name = raw.get("settingName")
    key_name = raw.get("apiKeyName")
    return ClientOptions(
        events=raw.get("events") is True,
        shows_answers=raw.get("showsAnswers") is True,
        setting_name=name if isinstance(name, str) and name.strip() else "lspAgent.%s",
        api_key_name=key_name if isinstance(key_name, str) and key_name.strip() else None,
    )


def single_object(command: str, arguments: Sequence[Any]) -> dict[str, Any]:
    """The one argument object every command takes (absent means `{}`)."""
    if len(arguments) == 0:
        return {}
    if len(arguments) > 1 or not isinstance(arguments[0], dict):
        raise ArgumentError(
            f"{command} takes one argument object, e.g. "
            + ('{"prompt": "..."}' if command.endswith(".ask") else '{"session": "..."}')
        )
    return arguments[0]


ASK_SHAPE = (
    'the prompt as a string, or one object {"prompt": "...", "session"?, "uri"?, "range"?, '
    '"mode"?, "folder"?, "codebase"?}'
)


def ask_arguments(command: str, arguments: Sequence[Any]) -> AskArguments:
    """Check the arguments of `lspAgent.ask` / `lspAgent.start`: an object, or the prompt as
    one or several strings (clients that cannot send an object: several strings are words)."""
    if arguments and all(isinstance(item, str) for item in arguments):
        raw: dict[str, Any] = {"prompt": " ".join(arguments)}
    elif len(arguments) == 1 and isinstance(arguments[0], dict):
        raw = arguments[0]
    elif not arguments:
        raise ArgumentError(f"missing key 'prompt': {command} takes {ASK_SHAPE}")
    else:
        raise ArgumentError(f"{command} takes {ASK_SHAPE}")
    prompt = _string(raw, "prompt", required=True)
    assert prompt is not None
    if not prompt.strip():
        raise ArgumentError("prompt must not be empty: say what the agent should do")
    mode = _mode(raw, ("review", "auto", "ask"))
    uri = _string(raw, "uri")
    selection = None
    if raw.get("range") is not None:
        if uri is None:
            raise ArgumentError("range needs uri: say which document the range is in")
        selection = _range(raw["range"], "range")
    folder = _string(raw, "folder")
    codebase = raw.get("codebase", False)
    if not isinstance(codebase, bool):
        raise ArgumentError(
            "codebase must be a boolean: true searches the workspace for the prompt's terms first"
        )
    return AskArguments(prompt, _string(raw, "session"), uri, selection, mode, folder, codebase)


def undo_arguments(arguments: Sequence[Any]) -> UndoArguments:
    """Check `lspAgent.undoTurn`'s argument object."""
    raw = single_object("lspAgent.undoTurn", arguments)
    session = _string(raw, "session", required=True)
    assert session is not None
    turn = raw.get("turn")
    if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int) or turn < 1):
        raise ArgumentError("turn must be a whole number from 1, the turn to undo")
    rewind = raw.get("rewind", False)
    if not isinstance(rewind, bool):
        raise ArgumentError("rewind must be a boolean: true undoes every later turn too")
    if rewind and turn is None:
        raise ArgumentError("rewind needs turn: the turn whose prompt to rewind to")
    conversation = raw.get("conversation", False)
    if not isinstance(conversation, bool):
        raise ArgumentError(
            "conversation must be a boolean: true rewinds the conversation to before the turn's "
            "prompt as well as the files"
        )
    if conversation and turn is None:
        raise ArgumentError("conversation needs turn: the turn whose prompt to rewind to")
    if conversation and raw.get("rewind") is False:
        raise ArgumentError(
            "conversation needs rewind: the conversation goes back with the files of every later "
            "turn; leave rewind out or set it to true"
        )
    return UndoArguments(session, turn, _mode(raw), rewind or conversation, conversation)


def folder_argument(command: str, arguments: Sequence[Any]) -> str | None:
    """The `folder` key of the commands that act on one workspace folder."""
    return _string(single_object(command, arguments), "folder")


def _mode(raw: dict[str, Any], allowed: Sequence[str] = ("review", "auto")) -> str | None:
    mode = _string(raw, "mode")
    if mode is not None and mode not in allowed:
        choices = ", ".join(f'"{choice}"' for choice in allowed[:-1])
        raise ArgumentError(f'mode must be {choices} or "{allowed[-1]}", not {mode!r}')
    return mode


def session_argument(command: str, arguments: Sequence[Any], *, required: bool) -> str | None:
    """The `session` key of `lspAgent.cancel` / `lspAgent.status`."""
    return _string(single_object(command, arguments), "session", required=required)


def _string(raw: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = raw.get(key)
    if value is None:
        if required:
            raise ArgumentError(f"missing key {key!r}: it must be a string")
        return None
    if not isinstance(value, str):
        raise ArgumentError(f"{key} must be a string, not {_kind(value)}")
    return value


def _range(value: Any, key: str) -> Range:
    if not isinstance(value, dict):
        raise ArgumentError(f"{key} must be an object {{start, end}}, not {_kind(value)}")
    start = _position(value.get("start"), f"{key}.start")
    end = _position(value.get("end"), f"{key}.end")
    if (end.line, end.character) < (start.line, start.character):
        raise ArgumentError(f"{key}.end is before {key}.start")
    return Range(start, end)


def _position(value: Any, key: str) -> Position:
    if not isinstance(value, dict):
        raise ArgumentError(f"{key} must be an object {{line, character}}, not {_kind(value)}")
    numbers = []
    for part in ("line", "character"):
        number = value.get(part)
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise ArgumentError(f"{key}.{part} must be a non-negative integer")
        numbers.append(number)
    return Position(numbers[0], numbers[1])


def _kind(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
    }.get(type(value), type(value).__name__)
