"""Allow, ask or deny, decided in code (README, Safety: wall 1): the wall no text can argue with.

Rules `{tool, match?, decision}` come from the settings first (first match wins), then the
built-in defaults. A command is read by `shellwords` and never matched as a substring: every
simple command of a pipeline or a `;`/`&`/`&&`/`||` list, every command nested in a
substitution, a here-document, a subshell, a loop or an `sh -c`/`eval` string, is decided on its
own; the strictest decision wins.

The principle: a command runs without a question only when it is understood completely — plain
words (no expansion, substitution, assignment, line continuation or here-document that bash
rewrites), commands of the closed list in `allowlist` with options it knows, every path it reads
resolved inside the workspace and no secret. Anything else is asked. Network tools are denied
wherever they appear, here-document bodies and shell strings included. A command too long to
be shown whole in a question (`MAX_COMMAND_CHARS`) is refused.

No question is asked here and no command runs; the judge looks at the workspace (paths, globs,
folders) and may ask git, once per state of the repository, whether a secret is in its history:
call `decide()` off the event loop. It returns a `Verdict`; the gate asks the user when it says
`ask`, and remembers `Allow for this session` as a session rule for that exact command (or path).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

from lsp_agent.safety import allowlist, paths, shellwords, symlinks
from lsp_agent.safety.paths import Ask, Places, Situation
from lsp_agent.safety.protected import Scanner, edit_protection, is_secret_name
from lsp_agent.safety.readers import shell_command_string

Decision = Literal["allow", "ask", "deny"]
ALLOW: Decision = "allow"
ASK: Decision = "ask"
DENY: Decision = "deny"
_STRICTNESS = {ALLOW: 0, ASK: 1, DENY: 2}

ANSWER_ALLOW = "Allow"
ANSWER_SESSION = "Allow for this session"
ANSWER_DENY = "Deny"
ANSWERS = (ANSWER_ALLOW, ANSWER_SESSION, ANSWER_DENY)
"""The actions of a permission question, in this order (docs/protocol.md, Questions)."""

NETWORK_TOOLS = frozenset(
    {
        "curl",
        "wget",
        "ssh",
        "scp",
        "sftp",
        "nc",
        "ncat",
        "netcat",
        "socat",
        "telnet",
        "ftp",
        "rsync",
        "aria2c",
        "httpie",
        "http",
        "https",
        "xh",
    }
)
"""Commands that exist to reach other machines: denied wherever they appear as a command."""

# Commands that run another command given as their arguments: the network check looks inside.
_WRAPPERS = frozenset(
    {
        "env",
        "sudo",
        "doas",
        "nice",
        "nohup",
        "timeout",
        "xargs",
        "command",
        "exec",
        "builtin",
        "stdbuf",
        "setsid",
        "ionice",
        "busybox",
        "watch",
        "strace",
        "unbuffer",
        "parallel",
        "flock",
        "chroot",
        "time",
        "nsenter",
        "unshare",
        "script",
    }
)
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "fish", "busybox"})
"""Shells: their `-c` string and the here-documents they read are commands too."""
_OUTPUTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_HARMLESS_OUTPUTS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_MAX_DEPTH = 4

MAX_COMMAND_CHARS = 8_000
"""Longer commands are refused: they cannot be shown whole in a question, and reading them
would keep the judge busy (put a long script in a file and run the file)."""

PATH_KEYS = ("path",)
"""Argument names holding a workspace path, matched by path rules."""
EDIT_TOOLS = frozenset({"edit_file", "write_file", "apply_patch"})
"""Tools that change files: asked for protected paths when no preview asks the user."""


@dataclass(frozen=True)
class Rule:
    """One permission rule: for `tool` (a name or a glob such as `*`), when `match` matches the
    call's subject (a simple command for `bash`, a path for file tools), decide `decision`."""

    tool: str
    decision: Decision
    match: str | None = None

    @classmethod
    def from_setting(cls, raw: Mapping[str, str]) -> Rule:
        """A rule from `lspAgent.permissions` (already validated by the settings)."""
        return cls(raw["tool"], cast(Decision, raw["decision"]), raw.get("match"))

    def applies_to(self, tool: str) -> bool:
        return fnmatch.fnmatchcase(tool, self.tool)

    def matches(self, subject: str | None) -> bool:
        """Whether the rule covers `subject`; a rule without `match` covers everything, a rule
        with one never covers what could not be checked (`subject` None)."""
        if self.match is None:
            return True
        return subject is not None and fnmatch.fnmatchcase(subject, self.match)


@dataclass(frozen=True)
class Verdict:
    """The decision on one tool call, and why (a sentence for the user or the model)."""

    decision: Decision
    reason: str
    shape: str = ""
    """What `Allow for this session` allows from now on: the command, or the path."""
    unattended: bool = True
    """Whether an `ask` may be answered by the terminal's --yes flags (False: a person must
    answer, e.g. an edit of a protected path that no preview showed)."""


@dataclass(frozen=True)
class Part:
    """One thing a command does that is decided on its own."""

    text: str | None
    """The simple command as shell words (`ls -la src`); None for what cannot be checked."""
    words: tuple[str, ...] = ()
    """Its words as bash would pass them when plain (as written otherwise)."""
    opaque: str | None = None
    """Why this part cannot be checked (`a variable`, `command substitution` …)."""
    command: shellwords.Command | None = None
    top: bool = True
    """A command of the line itself (not nested in a substitution or a shell string)."""
    network_only: bool = False
    """Text a command only reads (a here-document of `cat`): looked at for network tools."""


@dataclass
class SessionRules:
    """What the user allowed for this session: exact command shapes and paths, per tool."""

    allowed: set[tuple[str, str]] = field(default_factory=set)

    def allow(self, tool: str, shape: str) -> None:
        self.allowed.add((tool, shape))

    def allows(self, tool: str, shape: str) -> bool:
        return (tool, shape) in self.allowed


def decide(
    tool: str,
    args: Mapping[str, Any],
    *,
    rules: Sequence[Rule] = (),
    session: SessionRules | None = None,
    root: Path,
    sandboxed: bool = True,
    home: Path | None = None,
    readable: Sequence[Path] = (),
    scanner: Scanner | None = None,
    history: Callable[[], bool | None] | None = None,
    path: str | None = None,
    previewed: bool = True,
) -> Verdict:
    """Allow, ask or deny one tool call.

    `rules` are the user's (first match wins, before the built-in defaults); `session` holds what
    the user allowed for this session; `sandboxed` says whether commands run inside the kernel
    sandbox: without one, a command that would be allowed is asked instead. `readable` are
    folders outside the workspace that commands may read without asking (the spill files);
    `scanner` walks the workspace for recursive searches, `history` says whether git's history
    holds a secret, `path` is the PATH commands run with. `previewed` says whether the user sees
    an edit before it lands (mode `review`): when not, edits of protected paths are asked.
    """
    if tool == "bash":
        verdict = decide_command(
            str(args.get("command", "")),
            rules=rules,
            root=root,
            sandboxed=sandboxed,
            home=home,
            readable=readable,
            scanner=scanner,
            history=history,
            path=path,
        )
    else:
        verdict = _decide_other(tool, args, rules, root, previewed)
    if verdict.decision == ASK and session is not None and session.allows(tool, verdict.shape):
        return Verdict(ALLOW, "allowed for this session by the user", verdict.shape)
    return verdict


def decide_command(
    command: str,
    *,
    rules: Sequence[Rule] = (),
    root: Path,
    sandboxed: bool = True,
    home: Path | None = None,
    readable: Sequence[Path] = (),
    scanner: Scanner | None = None,
    history: Callable[[], bool | None] | None = None,
    path: str | None = None,
) -> Verdict:
    """The decision for a `bash` command string."""
    shape = command_shape(command)
    if not command.strip():
        return Verdict(DENY, "the command is empty", shape)
    bash_rules = [rule for rule in rules if rule.applies_to("bash")]
    if len(command) > MAX_COMMAND_CHARS:
        for rule in bash_rules:
            if rule.match is None and rule.decision != ASK:
                return Verdict(rule.decision, f"your rule {_rule_text(rule)} matches it", shape)
        return Verdict(
            DENY,
            f"the command is {len(command):,} characters long, more than can be checked and "
            f"shown whole in a question ({MAX_COMMAND_CHARS:,}): write the script to a file "
            "and run the file",
            shape,
        )
    places = Places(
        root=root.resolve(),
        home=home or _home(),
        readable=tuple(readable),
        scanner=scanner,
        history=history,
        path=os.environ.get("PATH", os.defpath) if path is None else path,
    )
    situation = Situation({places.root})
    worst: tuple[Decision, str] | None = None
    for part in parse_command(command):
        decision, reason = _decide_part(part, bash_rules, places, situation)
        if worst is None or _STRICTNESS[decision] > _STRICTNESS[worst[0]]:
            worst = (decision, reason)
    assert worst is not None  # parse_command always gives a part
    decision, reason = worst
    if decision == ALLOW and not sandboxed:
        return Verdict(ASK, "no sandbox is available here, so the command would run unsandboxed",
                       shape)  # fmt: skip
    if decision == ALLOW:
        return Verdict(ALLOW, reason or "read-only command", shape)
    return Verdict(decision, reason, shape)


def command_shape(command: str) -> str:
    """The command as `Allow for this session` remembers it: its text, whitespace folded."""
    return " ".join(command.split())


def parse_command(command: str, depth: int = 0) -> list[Part]:
    """Every part of `command` to decide on, nested commands included."""
    parts: list[Part] = []
    _script_parts(shellwords.parse(command, depth), parts, depth, top=True)
    return parts or [Part(None, opaque="nothing recognisable to run")]


def _script_parts(script: shellwords.Script, parts: list[Part], depth: int, top: bool) -> None:
    for reason in script.syntax:
        parts.append(Part(None, opaque=reason, top=top))
    for command in script.commands:
        _command_parts(command, parts, depth, top)
    for nested in script.nested:
        _script_parts(nested, parts, depth, top=False)


def _command_parts(command: shellwords.Command, parts: list[Part], depth: int, top: bool) -> None:
    words = tuple(word.value for word in command.words)
    why: str | None = command.syntax[0] if command.syntax else None
    if command.assignments and why is None:
        why = "an assignment (NAME=value), which changes what later commands do"
    for word in command.words:
        why = why or word.expansion
    for redirect in command.redirects:
        if redirect.target is not None and redirect.target.expansion is not None:
            why = why or f"{redirect.target.expansion} in a redirection"
        why = why or redirect.body_expansion
    if command.not_a_command:
        words = ()
    text: str | None = None
    if words:
        text = shlex.join(words)
        if command.assignments:
            text = " ".join(word.raw for word in command.assignments) + " " + text
    parts.append(Part(text if why is None else None, words, why, command, top))
    if words:
        _inline_scripts(command, words, parts, depth)


def _inline_scripts(
    command: shellwords.Command, words: tuple[str, ...], parts: list[Part], depth: int
) -> None:
    """Look inside `sh -c STRING`, `eval STRING`, a here-document fed to a shell, and what a
    wrapper (`timeout`, `env`, `xargs`, `find -exec` …) runs: unknown, but a denied command in
    them is still denied."""
    name = os.path.basename(words[0])
    for script in _scripts_run_by(name, command, words):
        if depth >= _MAX_DEPTH:
            parts.append(Part(None, opaque="nested shell strings too deep to check", top=False))
            return
        # Decided like the line's own commands (the wrapper itself is judged on its own:
        # only `xargs` with a command that prints names or counts is on the list).
        parts.extend(parse_command(script, depth + 1))
    if name in _SHELLS or depth >= _MAX_DEPTH:
        return
    # Any here-document may end up in a shell (`cat <<EOF | sh`): a network tool in one is
    # denied, whatever reads it; nothing else in it counts.
    for redirect in command.redirects:
        text = _fed_text(redirect)
        if text:
            for part in parse_command(text, depth + 1):
                parts.append(Part(None, part.words, part.opaque, part.command, False, True))


def _scripts_run_by(name: str, command: shellwords.Command, words: tuple[str, ...]) -> list[str]:
    """The command lines that the program `name` runs as a script: a shell's `-c` string and
    the text fed to its input, `eval`'s words, the command a wrapper runs."""
    scripts: list[str] = []
    if name in _SHELLS:
        script, _ = shell_command_string(words[1:])
        if script is not None:
            scripts.append(script)
        for redirect in command.redirects:
            text = _fed_text(redirect)
            if text is not None:
                scripts.append(text)
    elif name == "eval":
        scripts.append(" ".join(words[1:]))
    elif name in _WRAPPERS or name == "find":
        inner = _wrapped_command(list(words))
        if inner:
            scripts.append(shlex.join(inner))
    return scripts


def _fed_text(redirect: shellwords.Redirect) -> str | None:
    """The text a redirection feeds to the command's input: a here-document's body or a
    here-string's word; None for the others."""
    if redirect.body is not None:
        return redirect.body
    if redirect.operator == "<<<" and redirect.target is not None:
        return redirect.target.value
    return None


def _wrapped_command(words: list[str]) -> list[str]:
    """The command a wrapper runs (`timeout 5 curl x` → `curl x`, `find . -exec curl {} ;`
    → `curl {} ;`), skipping its options."""
    if os.path.basename(words[0]) == "find":
        for index, word in enumerate(words):
            if word in ("-exec", "-execdir", "-ok", "-okdir"):
                return words[index + 1 :]
        return []
    rest = list(words[1:])
    while rest and (rest[0].startswith("-") or "=" in rest[0] or _is_number(rest[0])):
        rest.pop(0)
    return rest


def _is_number(word: str) -> bool:
    return word.replace(".", "", 1).rstrip("smhd").isdigit()


def _decide_part(
    part: Part, rules: Sequence[Rule], places: Places, situation: Situation
) -> tuple[Decision, str]:
    network = _network(part)
    if part.network_only:
        return (DENY, network) if network is not None else (ALLOW, "")
    for rule in rules:
        if rule.matches(part.text if part.opaque is None else None):
            what = part.text or part.opaque or "the command"
            return rule.decision, f"your rule {_rule_text(rule)} matches {what}"
    if network is not None:
        return DENY, network
    if part.opaque is not None:
        return ASK, f"it uses {part.opaque}, which cannot be checked before it runs"
    if not part.top:
        return ASK, "it runs a command nested in another one, which cannot be checked"
    assert part.command is not None
    try:
        return ALLOW, _judge(part.command, places, situation)
    except Ask as ask:
        return ASK, str(ask)


def _network(part: Part) -> str | None:
    """Why the part reaches the network (a network tool, a /dev/tcp redirection), or None."""
    if part.command is not None:
        for redirect in part.command.redirects:
            target = redirect.target.value if redirect.target is not None else ""
            if target.startswith(("/dev/tcp/", "/dev/udp/")):
                return f"it connects to {target}, and lsp-agent does not allow the network"
    if not part.words:
        return None
    name = os.path.basename(part.words[0])
    if name in NETWORK_TOOLS:
        return f"{name} reaches the network, which lsp-agent does not allow"
    asks_where = name in ("command", "type") and part.words[1:2] in (("-v",), ("-V",))
    if (name in _WRAPPERS or name in _SHELLS or name == "find") and not asks_where:
        for word in part.words[1:]:
            if os.path.basename(word) in NETWORK_TOOLS:
                return f"{word} reaches the network, which lsp-agent does not allow"
    return None


def _judge(command: shellwords.Command, places: Places, situation: Situation) -> str:
    """Why the plain simple command may run unasked; raises `Ask` otherwise."""
    for redirect in command.redirects:
        _redirect(redirect, places, situation)
    if not command.words:
        return "only redirects"
    words: list[str] = []
    for index, word in enumerate(command.words):
        if word.pattern is None:
            words.append(word.value)
            continue
        if situation.wrote:
            raise Ask(
                f"its glob {word.value} is expanded after an earlier command ran the project's "
                "code, which may have made files"
            )
        if index == 0:
            raise Ask(f"its program name {word.value} is a glob")
        words.extend(paths.expand(word.pattern, word.value, situation))
    return allowlist.judge(words, places, situation)


def _redirect(redirect: shellwords.Redirect, places: Places, situation: Situation) -> None:
    if redirect.operator in ("<<", "<<-", "<<<"):
        return  # the text is the command's input (its expansions were judged already)
    target = redirect.target
    assert target is not None
    if target.pattern is not None:
        raise Ask(f"its redirection target {target.value} is a glob")
    value = target.value
    if redirect.operator in (">&", "<&") and (value.isdigit() or value == "-"):
        return  # a descriptor copied or closed: no file involved
    if redirect.operator in _OUTPUTS:
        if value in _HARMLESS_OUTPUTS:
            return
        try:
            paths.path_concern(value, places, situation, verb="writes")
        except Ask as outside:
            raise Ask(f"{outside}; it writes there") from None
        raise Ask(f"it writes to {value} (changes made by bash skip the editor's preview)")
    if redirect.operator == "<":
        paths.path_concern(value, places, situation)
        return
    raise Ask(f"it uses the redirection {redirect.operator} {value}")


def _rule_text(rule: Rule) -> str:
    match = f", match {rule.match!r}" if rule.match is not None else ""
    return f"{{tool {rule.tool!r}{match}: {rule.decision}}}"


def _home() -> Path:
    try:
        return Path.home()
    except RuntimeError:
        return Path("/nonexistent-home")


def _decide_other(
    tool: str, args: Mapping[str, Any], rules: Sequence[Rule], root: Path, previewed: bool
) -> Verdict:
    """Tools other than bash: the user's rules on the path, then the protected paths for edits
    nobody previews, else allowed.

    Edits are allowed here because the mode already puts the question: in `review` the editor's
    preview asks the user, in `auto` the user chose not to be asked — except for the paths the
    sandbox protects from commands (editor tasks, rc files, git's config …), which something
    runs later: those are asked when no preview does. Reads are allowed.
    """
    subjects = [str(args[key]) for key in PATH_KEYS if isinstance(args.get(key), str)]
    subject = _normal_path(subjects[0]) if subjects else None
    shape = subject or ""
    for rule in rules:
        if rule.applies_to(tool) and rule.matches(subject):
            target = f" on {subject}" if subject else ""
            return Verdict(rule.decision, f"your rule {_rule_text(rule)} matches {tool}{target}",
                           shape)  # fmt: skip
    if tool in EDIT_TOOLS and not previewed and subject is not None:
        why = protected_edit(root, subject)
        if why is not None:
            return Verdict(ASK, f"{why}, and no preview shows you this edit", shape,
                           unattended=False)  # fmt: skip
    return Verdict(ALLOW, "allowed by default", shape)


def protected_edit(root: Path, subject: str) -> str | None:
    """Why an edit of `subject` (relative to `root`, or absolute) changes a protected path."""
    top = root.resolve()
    try:
        resolved = symlinks.resolved(top / subject)
    except (OSError, RuntimeError, ValueError):
        return f"{subject} cannot be resolved"
    lexical = Path(os.path.normpath(top / subject))
    for path in (lexical, resolved):
        why = edit_protection(top, path)
        if why is not None:
            return why
    return None


def _normal_path(path: str) -> str:
    """A path as rules see it: relative to the workspace, `/`-separated, no `./`."""
    normal = os.path.normpath(path.replace("\\", "/")).replace(os.sep, "/")
    return "" if normal == "." else normal.removeprefix("./")


MCP_PREFIX = "mcp__"
"""The names of MCP servers' tools: `mcp__<server>__<tool>`, the server part without `__`."""
MCP_READ_ONLY = "readOnly"
"""What a rule's `match` meets for a tool its server marks read-only: `{tool: "mcp__docs__*",
match: "readOnly", decision: "allow"}` allows the read-only tools of the server `docs`."""
MAX_ARGUMENT_STRINGS = 1_000
"""Strings of an MCP call's arguments looked at for secret paths; a call with more is asked."""


def decide_mcp(
    tool: str,
    args: Mapping[str, Any],
    *,
    rules: Sequence[Rule] = (),
    session: SessionRules | None = None,
    root: Path,
    read_only: bool = False,
    home: Path | None = None,
) -> Verdict:
    """Allow, ask or deny a call of an MCP server's tool: a rule of its own kind.

    Such a tool is code of someone else's, outside the sandbox: every call is asked unless a
    rule of the user's allows it by name — the tool (`mcp__docs__search`), the server's tools
    (`mcp__docs__*`, or `mcp__docs`), or the server's read-only tools (`match: "readOnly"`). A
    wider glob (`*`, `mcp__*`) may deny or ask, never allow. An allowed call is still asked when
    its arguments name a path that may hold secrets, and a person must answer it. The question
    shows the arguments whole: arguments too long for that are refused unless a rule allows
    them. Looks at the file system (paths named in the arguments): call it off the event loop.
    """
    server_rule = tool.split("__", 2)
    server_rule_name = "__".join(server_rule[:2]) if len(server_rule) == 3 else tool
    subject = MCP_READ_ONLY if read_only else None
    secret = secret_argument(args, root, home)
    shape = "" if secret is None else json.dumps(args, sort_keys=True, ensure_ascii=False)
    for rule in rules:
        if not (rule.applies_to(tool) or rule.tool == server_rule_name):
            continue
        if not rule.matches(subject):
            continue
        if rule.decision == ALLOW and not _names_one_server(rule.tool):
            continue
        why = f"your rule {_rule_text(rule)} matches {tool}"
        if rule.decision == ALLOW and secret is not None:
            return Verdict(ASK, f"{why}, but {secret}", shape, unattended=False)
        return Verdict(rule.decision, why, shape)
    if secret is None and session is not None and session.allows(tool, shape):
        return Verdict(ALLOW, "allowed for this session by the user", shape)
    shown = json.dumps(args, indent=2, ensure_ascii=False)
    if len(shown) > MAX_COMMAND_CHARS:
        return Verdict(
            DENY,
            f"its arguments are {len(shown):,} characters long, more than can be shown whole "
            f"in a question ({MAX_COMMAND_CHARS:,})",
            shape,
        )
    reason = "it is a tool of an MCP server, and no rule of yours allows it"
    return Verdict(ASK, f"{reason}; {secret}" if secret else reason, shape, unattended=False)


def secret_argument(args: Mapping[str, Any], root: Path, home: Path | None = None) -> str | None:
    """Why an MCP call's arguments touch secrets — a string among them names a path with a
    secret name in it (`.env`, `.ssh/…`, `.git/config` …), as written or once its symlinks are
    followed — or None."""
    strings: list[str] = []
    _strings_of(args, strings)
    if len(strings) > MAX_ARGUMENT_STRINGS:
        return f"its arguments hold more than {MAX_ARGUMENT_STRINGS:,} strings to check"
    top = root.resolve()
    user_home = home if home is not None else _home()
    for value in strings:
        if "\n" in value or len(value) > 4_096 or not value.strip():
            continue
        path = value.removeprefix("file://")
        named = next((p for p in re.split(r"[\\/]", path) if is_secret_name(p)), None)
        if named is not None:
            return f"its arguments name {value!r}, which may hold secrets ({named})"
        candidate = Path(path.replace("~", str(user_home), 1) if path.startswith("~") else path)
        candidate = candidate if candidate.is_absolute() else top / candidate
        if not os.path.lexists(candidate):  # False, too, for what cannot be a path
            continue
        try:
            target = symlinks.resolved(candidate)
        except (OSError, RuntimeError, ValueError):
            return f"its arguments name {value!r}, which cannot be resolved"
        parts = target.relative_to(top).parts if target.is_relative_to(top) else target.parts
        named = next((p for p in parts if is_secret_name(p)), None)
        if named is not None:
            return f"its arguments name {value!r}, which leads to a file that may hold secrets"
    return None


def _strings_of(value: Any, found: list[str]) -> None:
    """Every string value inside `value` (keys aside), depth first, stopping past the limit."""
    if len(found) > MAX_ARGUMENT_STRINGS:
        return
    if isinstance(value, str):
        found.append(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            _strings_of(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _strings_of(item, found)


def _names_one_server(pattern: str) -> bool:
    """Whether a rule's tool pattern names one MCP server by its exact name (`mcp__docs__*`,
    `mcp__docs__search`, `mcp__docs`): only such a rule may allow MCP tools."""
    if not pattern.startswith(MCP_PREFIX):
        return False
    server = pattern[len(MCP_PREFIX) :].split("__", 1)[0]
    return bool(server) and not any(char in server for char in "*?[]")
