"""Settings and where each one came from (docs/protocol.md, Settings).

Sources, strongest first: the editor (`initializationOptions` and the `lspAgent` section of
`workspace/configuration`), environment variables, `~/.agents/env`, defaults. A bad value never
stops the server: it is skipped with a warning sentence and the next source decides, the way
jedi-language-server treats its initialization options.

An API key is bound to the endpoint it was set for (`Settings.key_endpoint`): a key from the
environment or `~/.agents/env` goes unasked only to the URL those sources give on their own
(provider included), never to one the editor's settings point elsewhere, which a workspace's
settings file may have written; a key from the editor's settings is bound to no URL until the
user says so (`safety.endpoints`).
"""

from __future__ import annotations

import difflib
import errno
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import urlsplit

from lsp_agent.errors import UserError

Provider = Literal["openai", "anthropic"]
Mode = Literal["review", "auto"]

EDITOR = "editor"
"""Source label for a value from the editor's settings."""
ENV_FILE = "~/.agents/env"
"""Source label for a value from the env file (whatever path was read)."""
DEFAULT = "default"
"""Source label for a built-in default."""

DEFAULT_BASE_URL = "http://localhost:11434/v1"
"""A local Ollama's OpenAI-compatible endpoint."""
ANTHROPIC_BASE_URL = "https://api.anthropic.com"
"""Used instead of `DEFAULT_BASE_URL` when the provider is `anthropic` and no URL is set."""

DECISIONS = ("allow", "ask", "deny")
"""The decisions a permission rule may take (README, Safety)."""

DEFAULT_CODE_ACTIONS: tuple[dict[str, str], ...] = (
    {
        "title": "lsp-agent: fix this problem",
        "prompt": "Fix this problem in {file} at line {line}: {diagnostic}",
    },
    {"title": "lsp-agent: explain this", "prompt": "Explain what this code in {file} does."},
    {"title": "lsp-agent: write tests for this", "prompt": "Write tests for this code in {file}."},
)
"""The code actions offered when the `codeActions` setting is not set."""


def _default_memory_mb() -> int:
    """Half the machine's memory, at most 8 GiB (4 GiB where the machine cannot say)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError, AttributeError):
        return 4096
    return max(256, min(8192, total // 2))


DEFAULT_MEMORY_MB = _default_memory_mb()
"""The default `commandMemoryMB`."""

NO_MODEL = (
    "no model configured: set lspAgent.model in the editor or LSP_AGENT_MODEL in the environment "
    "(e.g. LSP_AGENT_MODEL=qwen2.5-coder:7b for Ollama)"
)


@dataclass(frozen=True)
class Settings:
    """Every setting of docs/protocol.md, validated, and the source each value came from."""

    base_url: str = DEFAULT_BASE_URL
    """The model endpoint, without a trailing slash."""
    model: str | None = None
    """The model name; None until configured (`require_model` turns that into a sentence)."""
    api_key: str | None = field(default=None, repr=False)
    """The credential sent to the endpoint; never logged, shown, or written to a transcript."""
    provider: Provider = "openai"
    """`openai` for any OpenAI-compatible endpoint, `anthropic` for the Messages API."""
    context_window: int = 128_000
    """The model's context window, in tokens."""
    compact_at: float = 0.85
    """Share of the window past which old tool results are dropped, then the history compacted."""
    compact_to: float = 0.35
    """Share of the window a compacted request is cut back to."""
    strip_at: float = 0.5
    """Share of the window past which old tool results shrink to stubs at the end of a turn."""
    tool_output_cap: int = 10_000
    """Characters of a tool result kept inline; the rest goes to a spill file."""
    stub_chars: int = 300
    """Characters an old tool result keeps when stripped."""
    command_timeout: float = 60.0
    """Seconds before a `bash` command's process group is killed."""
    question_timeout: float = 120.0
    """Seconds a permission question waits for the user; no answer by then counts as Deny."""
    command_memory_mb: int = DEFAULT_MEMORY_MB
    """Memory a `bash` command may use, in MiB: its whole process tree where a memory cgroup
    can be made, else each process's address space."""
    command_file_mb: int = 1024
    """The largest file a `bash` command may write, in MiB."""
    command_disk_mb: int = 2048
    """How much a `bash` command may grow the disk under the workspace (and its private
    temporary folder), in MiB, before it is stopped."""
    max_turns: int = 50
    """Model calls allowed in one `ask`."""
    mode: Mode = "review"
    """`review`: the editor asks before applying an edit; `auto`: edits apply directly."""
    permissions: list[dict[str, str]] = field(default_factory=list)
    """User rules `{tool, match?, decision}`, checked before the built-in ones; first match wins."""
    read_only_paths: list[str] = field(default_factory=list)
    """Globs the agent may read but never edit."""
    code_actions: list[dict[str, str]] = field(
        default_factory=lambda: [dict(action) for action in DEFAULT_CODE_ACTIONS]
    )
    """What the editor's code-action menu offers: `{title, prompt}`, the prompt a template with
    `{file}`, `{line}`, `{selection}` and `{diagnostic}` (an action whose prompt names
    `{diagnostic}` is offered once for each problem the editor reports there)."""
    prices: Mapping[str, float] = field(default_factory=dict)
    """What the endpoint charges per million tokens: `input`, `output`, and `cachedInput` when
    cached input costs less; empty when unknown (no cost is shown)."""
    key_endpoint: str | None = field(default=None, repr=False)
    """The endpoint the API key was set for: the base URL the key's own source and the weaker
    ones give (the environment's, `~/.agents/env`'s, the default), or None for a key from the
    editor's settings, which the user must approve for an endpoint (`safety.endpoints`)."""
    mcp_servers: Mapping[str, Any] | None = field(default=None, repr=False)
    """The user's MCP servers in the common `mcpServers` shape, by name, or None (each entry
    is checked when a session starts them: `lsp_agent/mcp/servers.py`); hidden in `describe`,
    since their headers and environments hold tokens."""
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    """Setting name (camelCase, as in `lspAgent.*`) → where its value came from: `editor`,
    `env:<VARIABLE>`, `~/.agents/env` or `default`. A name missing here counts as `default`."""

    def describe(self) -> dict[str, dict[str, Any]]:
        """Each setting's value and source, for `doctor` and `lspAgent.status` (key masked)."""
        described: dict[str, dict[str, Any]] = {}
        for spec in _SPECS:
            source = self.sources.get(spec.name, DEFAULT)
            value: Any = getattr(self, spec.attr)
            if spec.secret:
                value = f"set (from {source})" if value is not None else None
            elif isinstance(value, list):
                value = [dict(item) if isinstance(item, dict) else item for item in value]
            elif isinstance(value, Mapping):
                value = dict(value)
            described[spec.name] = {"value": value, "source": source}
        return described


def require_model(settings: Settings) -> str:
    """The configured model name; raises `UserError` saying how to set one when there is none."""
    if settings.model is None:
        raise UserError(NO_MODEL)
    return settings.model


def load_settings(
    editor: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    env_file: Path | None = None,
) -> tuple[Settings, list[str]]:
    """Resolve every setting from the editor, the environment, the env file and the defaults.

    `editor` holds the camelCase keys of the `lspAgent` section, either flat or nested under
    `"lspAgent"`; a None value there means "not set". `environ` defaults to `os.environ` and
    `env_file` to `~/.agents/env` (a missing file is fine). Returns the settings and one warning
    sentence per value that was ignored.
    """
    warnings: list[str] = []
    section = _editor_section(editor, warnings)
    env = os.environ if environ is None else environ
    path = env_file if env_file is not None else _default_env_file()
    file_vars: dict[str, str] = {}
    if path is not None:
        file_vars, file_warnings = read_env_file(path)
        warnings.extend(file_warnings)

    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    # The provider decides which variables baseUrl and apiKey are read from, so it goes first.
    provider_spec = _BY_NAME["provider"]
    provider_candidates = _candidates(provider_spec, "openai", section, env, file_vars)
    resolved_provider = _resolve(provider_spec, provider_candidates, "openai", warnings)
    provider = cast(Provider, resolved_provider[0])
    for spec in _SPECS:
        if spec is provider_spec:
            value, source = resolved_provider
        else:
            candidates = _candidates(spec, provider, section, env, file_vars)
            value, source = _resolve(spec, candidates, provider, warnings)
        values[spec.attr] = value
        sources[spec.name] = source

    values["key_endpoint"] = _key_endpoint(sources["apiKey"], values["api_key"], env, file_vars)
    if values["compact_to"] >= values["compact_at"]:
        warnings.append(
            f"Ignoring compactTo = {values['compact_to']} ({sources['compactTo']}) and "
            f"compactAt = {values['compact_at']} ({sources['compactAt']}): compactTo must be "
            f"below compactAt; using the defaults {_default('compact_to')} and "
            f"{_default('compact_at')}."
        )
        for name, attr in (("compactAt", "compact_at"), ("compactTo", "compact_to")):
            values[attr] = _default(attr)
            sources[name] = DEFAULT

    return Settings(**values, sources=sources), warnings


def _key_endpoint(
    key_source: str,
    api_key: str | None,
    environ: Mapping[str, str],
    file_vars: Mapping[str, str],
) -> str | None:
    """The base URL the key's own source, and those weaker than it, give: the endpoint it was
    set for. The provider is resolved the same way: a provider the editor names must not carry
    a key set for another vendor's endpoint to its default URL."""
    if api_key is None or key_source in (EDITOR, DEFAULT):
        return None
    weaker_env = environ if key_source.startswith("env:") else {}
    silent: list[str] = []
    provider_spec, url_spec = _BY_NAME["provider"], _BY_NAME["baseUrl"]
    provider = cast(
        Provider,
        _resolve(
            provider_spec,
            _candidates(provider_spec, "openai", {}, weaker_env, file_vars),
            "openai",
            silent,
        )[0],
    )
    # A vendor's own variable names its vendor: ANTHROPIC_API_KEY was set for Anthropic's API.
    vendor = {"env:ANTHROPIC_API_KEY": "anthropic", "env:OPENAI_API_KEY": "openai"}
    provider = cast(Provider, vendor.get(key_source, provider))
    url, _ = _resolve(
        url_spec, _candidates(url_spec, provider, {}, weaker_env, file_vars), provider, silent
    )
    return str(url)


def read_env_file(path: Path) -> tuple[dict[str, str], list[str]]:
    """Parse a file of `KEY=VALUE` lines (shell style); returns the variables and warnings.

    Handles blank lines, `#` comments (whole-line, or after whitespace in an unquoted value), an
    optional `export ` prefix and single or double quotes. A missing file gives no warning.
    """
    shown = _display_path(path)
    try:
        text = _read_small_text(path)
    except FileNotFoundError:
        return {}, []
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        return {}, [f"Could not read {shown} ({reason}); its settings are ignored."]

    variables: dict[str, str] = {}
    warnings: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parsed = _parse_env_line(line)
        if isinstance(parsed, str):
            warnings.append(f"Ignoring line {number} of {shown}: {parsed}.")
            continue
        key, value = parsed
        variables[key] = value
    return variables, warnings


ENV_FILE_BYTES = 1024 * 1024
"""More than any env file holds: a larger one is refused, not read whole."""


def _read_small_text(path: Path) -> str:
    """A small regular file's UTF-8 text: never waits on a FIFO, never reads a device or more
    than `ENV_FILE_BYTES`; raises OSError (or UnicodeDecodeError) saying why not."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        data = handle.read(ENV_FILE_BYTES + 1)
    if len(data) > ENV_FILE_BYTES:
        raise OSError(errno.EFBIG, f"larger than {ENV_FILE_BYTES // 1024} KB")
    return data.decode("utf-8")


@dataclass(frozen=True)
class _Spec:
    """How one setting is named, read from each source, and checked."""

    name: str
    attr: str
    env: tuple[str, ...]
    parse: Callable[[object, bool], Any]
    """Turns a raw value into the setting's value or raises ValueError (with an optional detail);
    the flag says the raw value is text from the environment, so numbers must be parsed."""
    expected: str
    secret: bool = False


_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _parse_env_line(line: str) -> tuple[str, str] | str:
    """`(key, value)` for one non-blank, non-comment line, or what is wrong with it."""
    if line.startswith("export") and line[6:7].isspace():
        line = line[7:].lstrip()
    key, equals, rest = line.partition("=")
    key = key.strip()
    if not equals:
        return "expected KEY=VALUE"
    if not _VAR_NAME.fullmatch(key):
        return f"{key!r} is not a variable name"
    rest = rest.strip()
    if rest[:1] in ("'", '"'):
        quote = rest[0]
        end = _closing_quote(rest, quote)
        if end < 0:
            return f"the value of {key} has no closing {quote}"
        tail = rest[end + 1 :].strip()
        if tail and not tail.startswith("#"):
            return f"unexpected text after the quoted value of {key}"
        inner = rest[1:end]
        if quote == '"':
            inner = re.sub(r'\\(["\\$`])', r"\1", inner).replace("\\n", "\n")
        return key, inner
    return key, re.split(r"\s+#", rest, maxsplit=1)[0].strip()


def _closing_quote(text: str, quote: str) -> int:
    """Index of the quote closing `text[0]`; a backslash escapes it inside double quotes."""
    index = 1
    while index < len(text):
        char = text[index]
        if char == "\\" and quote == '"':
            index += 2
            continue
        if char == quote:
            return index
        index += 1
    return -1


def _default_env_file() -> Path | None:
    try:
        return Path.home() / ".agents" / "env"
    except RuntimeError:  # no home directory to speak of (HOME unset, unknown user)
        return None


def _default(attr: str) -> Any:
    """The dataclass default of a field (a fresh list each time for the list settings)."""
    return getattr(Settings(), attr)


def _display_path(path: Path) -> str:
    try:
        return "~/" + path.relative_to(Path.home()).as_posix()
    except (ValueError, RuntimeError):
        return str(path)


def _editor_section(editor: Mapping[str, Any] | None, warnings: list[str]) -> dict[str, Any]:
    """The flat `lspAgent` section, whether the editor sent it flat or nested."""
    if editor is None:
        return {}
    if not isinstance(editor, Mapping):
        warnings.append(
            f"Ignoring the editor's settings: expected an object, got {_type_name(editor)}."
        )
        return {}
    section = {key: value for key, value in editor.items() if key != "lspAgent"}
    nested = editor.get("lspAgent")
    if isinstance(nested, Mapping):
        section.update(nested)
    elif nested is not None:
        warnings.append(
            "Ignoring the editor's lspAgent settings: expected an object of settings, "
            f"got {_type_name(nested)}."
        )
    for key in section:
        if key in _BY_NAME:
            continue
        # Editors send extension-only keys too (trace, server paths): only a near miss is a typo.
        lowered = {name.lower(): name for name in _BY_NAME}
        close = difflib.get_close_matches(str(key).lower(), lowered, n=1, cutoff=0.8)
        if close:
            warnings.append(
                f"Ignoring unknown setting lspAgent.{key} from the editor: did you mean "
                f"lspAgent.{lowered[close[0]]}?"
            )
    return section


def _candidates(
    spec: _Spec,
    provider: Provider,
    section: Mapping[str, Any],
    environ: Mapping[str, str],
    file_vars: Mapping[str, str],
) -> list[tuple[str, object, bool]]:
    """`(source, raw value, is_text)` for every source that sets this setting, strongest first."""
    found: list[tuple[str, object, bool]] = []
    editor_value = section.get(spec.name)
    if editor_value is not None and editor_value != "":
        found.append((EDITOR, editor_value, False))
    names = _env_names(spec, provider)
    for variable in names:
        if environ.get(variable, "").strip():
            found.append((f"env:{variable}", environ[variable], True))
    for variable in names:
        if file_vars.get(variable, "").strip():
            found.append((ENV_FILE, file_vars[variable], True))
    return found


def _env_names(spec: _Spec, provider: Provider) -> tuple[str, ...]:
    # The other vendor's variables would point at the wrong endpoint or leak the wrong key.
    if spec.attr == "base_url":
        vendor = "ANTHROPIC_BASE_URL" if provider == "anthropic" else "OPENAI_BASE_URL"
        return (*spec.env, vendor)
    if spec.attr == "api_key":
        vendor = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
        return (*spec.env, vendor)
    return spec.env


def _resolve(
    spec: _Spec,
    candidates: Sequence[tuple[str, object, bool]],
    provider: Provider,
    warnings: list[str],
) -> tuple[Any, str]:
    rejected: list[tuple[str, object, str]] = []
    chosen: tuple[Any, str] | None = None
    for source, raw, is_text in candidates:
        try:
            chosen = (spec.parse(raw, is_text), source)
            break
        except ValueError as error:
            rejected.append((source, raw, str(error)))
    if chosen is None:
        default = _default(spec.attr)
        if spec.attr == "base_url" and provider == "anthropic":
            default = ANTHROPIC_BASE_URL
        chosen = (default, DEFAULT)
    value, source = chosen
    using = "nothing" if value is None else _show(spec, value)
    for bad_source, raw, detail in rejected:
        expected = f"{spec.expected} ({detail})" if detail else spec.expected
        warnings.append(
            f"Ignoring {spec.name} = {_show(spec, raw)} from {bad_source}: expected {expected}; "
            f"using {using} from {source}."
        )
    return value, source


def _show(spec: _Spec, value: object) -> str:
    if spec.secret:
        return f"a {_type_name(value)} (hidden)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_name(value: object) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__


def _text(raw: object, is_text: bool) -> str:
    del is_text
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError("")
    return raw.strip()


def _url(raw: object, is_text: bool) -> str:
    url = _text(raw, is_text)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("")
    return url.rstrip("/")


def _choice(*options: str) -> Callable[[object, bool], str]:
    def parse(raw: object, is_text: bool) -> str:
        value = _text(raw, is_text).lower()
        if value not in options:
            raise ValueError("")
        return value

    return parse


def _number(raw: object, is_text: bool) -> float:
    if isinstance(raw, str) and is_text:
        try:
            return float(raw.strip())
        except ValueError:
            raise ValueError("") from None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ValueError("")
    return float(raw)


def _integer(minimum: int) -> Callable[[object, bool], int]:
    def parse(raw: object, is_text: bool) -> int:
        number = _number(raw, is_text)
        if not number.is_integer() or number < minimum:
            raise ValueError("")
        return int(number)

    return parse


def _fraction(raw: object, is_text: bool) -> float:
    number = _number(raw, is_text)
    if not 0 < number <= 1:
        raise ValueError("")
    return number


def _seconds(raw: object, is_text: bool) -> float:
    number = _number(raw, is_text)
    if not 0 < number < float("inf"):
        raise ValueError("")
    return number


def _globs(raw: object, is_text: bool) -> list[str]:
    del is_text
    if not isinstance(raw, list):
        raise ValueError("")
    for index, item in enumerate(raw, start=1):
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"item {index} is {item!r}")
    return [item.strip() for item in raw]


def _prices(raw: object, is_text: bool) -> dict[str, float]:
    del is_text
    if not isinstance(raw, Mapping):
        raise ValueError("")
    prices: dict[str, float] = {}
    for key, value in raw.items():
        if key not in ("input", "output", "cachedInput"):
            raise ValueError(f"unknown price {key!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{key} is {value!r}")
        prices[key] = float(value)
    if "input" not in prices or "output" not in prices:
        raise ValueError("input and output are needed")
    return prices


def _actions(raw: object, is_text: bool) -> list[dict[str, str]]:
    del is_text
    if not isinstance(raw, list):
        raise ValueError("")
    actions = []
    for index, item in enumerate(raw, start=1):
        if not isinstance(item, Mapping):
            raise ValueError(f"action {index} is not an object")
        title, prompt = item.get("title"), item.get("prompt")
        if not isinstance(title, str) or not title.strip():
            raise ValueError(f"action {index} has no title")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"action {index} has no prompt")
        actions.append({"title": title.strip(), "prompt": prompt})
    return actions


def _rules(raw: object, is_text: bool) -> list[dict[str, str]]:
    # One bad rule rejects the whole list: dropping a `deny` rule could let a later `allow` win.
    del is_text
    if not isinstance(raw, list):
        raise ValueError("")
    rules: list[dict[str, str]] = []
    for index, item in enumerate(raw, start=1):
        if not isinstance(item, Mapping):
            raise ValueError(f"rule {index} is not an object")
        tool, match, decision = item.get("tool"), item.get("match"), item.get("decision")
        if not isinstance(tool, str) or not tool.strip():
            raise ValueError(f"rule {index} has no tool name")
        if match is not None and not isinstance(match, str):
            raise ValueError(f"rule {index} has a match that is not a string")
        if not isinstance(decision, str) or decision.strip().lower() not in DECISIONS:
            raise ValueError(f"rule {index} has decision {decision!r}")
        rule = {"tool": tool.strip(), "decision": decision.strip().lower()}
        if match is not None:
            rule["match"] = match
        rules.append(rule)
    return rules


def _servers(raw: object, is_text: bool) -> dict[str, Any]:
    # Each entry is checked on its own when a session starts the servers: one bad server must
    # not hide the others (lsp_agent/mcp/servers.py).
    del is_text
    if isinstance(raw, Mapping) and set(raw) == {"mcpServers"}:
        raw = raw["mcpServers"]  # a whole mcp.json pasted into the setting
    if not isinstance(raw, Mapping):
        raise ValueError("")
    return {str(name): entry for name, entry in raw.items()}


_FRACTION = "a number greater than 0 and at most 1"

_SPECS: tuple[_Spec, ...] = (
    _Spec("baseUrl", "base_url", ("LSP_AGENT_BASE_URL",), _url, "an http:// or https:// URL"),
    _Spec("model", "model", ("LSP_AGENT_MODEL",), _text, "a model name"),
    _Spec("apiKey", "api_key", ("LSP_AGENT_API_KEY",), _text, "a non-empty string", secret=True),
    _Spec(
        "provider",
        "provider",
        ("LSP_AGENT_PROVIDER",),
        _choice("openai", "anthropic"),
        '"openai" or "anthropic"',
    ),
    _Spec(
        "contextWindow",
        "context_window",
        ("CONTEXT_WINDOW",),
        _integer(1),
        "a positive whole number of tokens",
    ),
    _Spec("compactAt", "compact_at", ("COMPACT_AT",), _fraction, _FRACTION),
    _Spec("compactTo", "compact_to", ("COMPACT_TO",), _fraction, _FRACTION),
    _Spec("stripAt", "strip_at", ("STRIP_AT",), _fraction, _FRACTION),
    _Spec(
        "toolOutputCap",
        "tool_output_cap",
        ("TOOL_OUTPUT_CAP",),
        _integer(1),
        "a positive whole number of characters",
    ),
    _Spec(
        "stubChars",
        "stub_chars",
        ("STUB_CHARS",),
        _integer(0),
        "a whole number of characters, 0 or more",
    ),
    _Spec(
        "commandTimeout",
        "command_timeout",
        ("COMMAND_TIMEOUT",),
        _seconds,
        "a positive number of seconds",
    ),
    _Spec(
        "questionTimeout",
        "question_timeout",
        ("LSP_AGENT_QUESTION_TIMEOUT",),
        _seconds,
        "a positive number of seconds",
    ),
    _Spec(
        "commandMemoryMB",
        "command_memory_mb",
        ("LSP_AGENT_COMMAND_MEMORY_MB",),
        _integer(64),
        "a whole number of MiB, 64 or more",
    ),
    _Spec(
        "commandFileMB",
        "command_file_mb",
        ("LSP_AGENT_COMMAND_FILE_MB",),
        _integer(1),
        "a positive whole number of MiB",
    ),
    _Spec(
        "commandDiskMB",
        "command_disk_mb",
        ("LSP_AGENT_COMMAND_DISK_MB",),
        _integer(1),
        "a positive whole number of MiB",
    ),
    _Spec(
        "maxTurns",
        "max_turns",
        ("LSP_AGENT_MAX_TURNS",),
        _integer(1),
        "a positive whole number of model calls",
    ),
    _Spec("mode", "mode", (), _choice("review", "auto"), '"review" or "auto"'),
    _Spec(
        "permissions",
        "permissions",
        (),
        _rules,
        'a list of rules {tool, match, decision} with decision "allow", "ask" or "deny"',
    ),
    _Spec("readOnlyPaths", "read_only_paths", (), _globs, "a list of glob strings"),
    _Spec(
        "codeActions",
        "code_actions",
        (),
        _actions,
        "a list of {title, prompt}",
    ),
    _Spec(
        "prices",
        "prices",
        (),
        _prices,
        "{input, output, cachedInput?}: dollars per million tokens",
    ),
    _Spec(
        "mcpServers",
        "mcp_servers",
        (),
        _servers,
        "an object of MCP servers by name, each {command, args?, env?, cwd?} or {url, headers?}",
        secret=True,
    ),
)

_BY_NAME = {spec.name: spec for spec in _SPECS}
