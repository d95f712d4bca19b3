"""Allow, ask or deny, decided in code (DESIGN §6.1): the wall no text can argue with.

Rules `{tool, match?, decision}` come from the settings first (first match wins), then the
built-in defaults. A command is parsed (bashlex), never matched as a substring: every simple
command of a pipeline or a `;`/`&&`/`||` list, and every command nested in a substitution, a
subshell, a loop or an `sh -c`/`eval` string, is decided on its own; the strictest decision wins.
What cannot be checked (command substitution, parameter expansion in arguments, redirection to a
file, syntax the parser does not know) is at least `ask`. Network tools are `deny`.

Everything here is pure: no process runs, no question is asked. `decide()` returns a `Verdict`;
the toolbox asks the user when it says `ask`, and remembers `Allow for this session` as a session
rule for that exact command (or path).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import bashlex  # type: ignore[import-untyped]

Decision = Literal["allow", "ask", "deny"]
ALLOW: Decision = "allow"
ASK: Decision = "ask"
DENY: Decision = "deny"
_STRICTNESS = {ALLOW: 0, ASK: 1, DENY: 2}

ANSWER_ALLOW = "Allow"
ANSWER_SESSION = "Allow for this session"
ANSWER_DENY = "Deny"
ANSWERS = (ANSWER_ALLOW, ANSWER_SESSION, ANSWER_DENY)
"""The actions of a permission question, in this order (DESIGN §3)."""

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
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "fish"})

# Read-only commands allowed with any arguments (paths are still checked).
_READ_ONLY = frozenset(
    {
        "ls",
        "cat",
        "head",
        "tail",
        "wc",
        "grep",
        "egrep",
        "fgrep",
        "pwd",
        "echo",
        "printf",
        "true",
        "false",
        "which",
        "type",
        "stat",
        "du",
        "df",
        "cut",
        "tr",
        "diff",
        "cmp",
        "comm",
        "basename",
        "dirname",
        "realpath",
        "readlink",
        "uname",
        "whoami",
        "id",
        "nl",
        "test",
        "[",
        "sleep",
        "tac",
        "rev",
        "seq",
        "od",
        "strings",
        "md5sum",
        "sha1sum",
        "sha256sum",
        "column",
        "paste",
        "fold",
        "expand",
        "jq",
        "printenv",
        "pytest",
    }
)
# Read-only commands with options that write or run something: refused options listed.
_REFUSED_OPTIONS: dict[str, tuple[str, ...]] = {
    "find": ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
             "-fls"),
    "rg": ("--pre",),
    "sort": ("-o", "--output", "--compress-program"),
    "tree": ("-o",),
    "file": ("-C", "--compile"),
    "date": ("-s", "--set"),
}  # fmt: skip
# Read-only commands whose arguments are not files they read.
_NO_PATHS = frozenset(
    {"echo", "printf", "true", "false", "sleep", "seq", "which", "type", "test", "[", "pwd",
     "uname", "whoami", "id", "printenv"}
)  # fmt: skip
_PATTERN_FIRST = frozenset({"grep", "egrep", "fgrep", "rg", "sed", "jq"})
_GIT_SUBCOMMANDS = frozenset({"status", "diff", "log", "show", "branch"})
_GIT_GLOBAL_OK = frozenset({"--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs"})
_GIT_REFUSED = ("--output", "--ext-diff", "-c", "--config-env", "--exec-path")
_GIT_BRANCH_FLAGS = frozenset(
    {"-a", "--all", "-r", "--remotes", "-v", "-vv", "--verbose", "-l", "--list",
     "--show-current", "--merged", "--no-merged", "--contains", "--no-contains",
     "--no-color", "--color", "--column", "--no-column", "-i", "--ignore-case"}
)  # fmt: skip
_SED_QUIET = frozenset({"-n", "--quiet", "--silent"})
_SED_SAFE_FLAGS = frozenset(
    {"-n", "--quiet", "--silent", "-E", "-r", "--regexp-extended", "-s", "--separate", "-u",
     "--unbuffered", "-z", "--null-data"}
)  # fmt: skip
_SED_ADDRESS = r"(?:\d+|\$|/(?:[^/\\]|\\.)*/)"
_SED_PRINT = re.compile(rf"\s*(?:{_SED_ADDRESS}(?:\s*,\s*(?:{_SED_ADDRESS}|\+\d+))?)?\s*p\s*")

_OUTPUT_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
_GLOB_CHARS = re.compile(r"[*?\[]")
_BRACE = re.compile(r"\{[^}]*(?:,|\.\.)[^}]*\}")
_MAX_DEPTH = 4

PATH_KEYS = ("path",)
"""Argument names holding a workspace path, matched by path rules."""


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


@dataclass(frozen=True)
class _Places:
    """Where a command's paths are judged from."""

    root: Path
    home: Path
    readable: tuple[Path, ...]
    """Folders outside the workspace that may be read without asking."""


@dataclass(frozen=True)
class Part:
    """One thing a command does that is decided on its own."""

    text: str | None
    """The simple command as shell words (`ls -la src`); None for what cannot be checked."""
    words: tuple[str, ...] = ()
    redirects: tuple[tuple[str, str], ...] = ()
    """`(operator, target)` of each redirection to or from a file."""
    assignments: tuple[str, ...] = ()
    opaque: str | None = None
    """Why this part cannot be checked (`command substitution`, `eval`, ...)."""


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
) -> Verdict:
    """Allow, ask or deny one tool call.

    `rules` are the user's (first match wins, before the built-in defaults); `session` holds what
    the user allowed for this session; `sandboxed` says whether commands run inside the kernel
    sandbox: without one, a command that would be allowed is asked instead. `readable` are
    folders outside the workspace that commands may read without asking (the spill files).
    """
    if tool == "bash":
        verdict = decide_command(
            str(args.get("command", "")),
            rules=rules,
            root=root,
            sandboxed=sandboxed,
            home=home,
            readable=readable,
        )
    else:
        verdict = _decide_other(tool, args, rules)
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
) -> Verdict:
    """The decision for a `bash` command string."""
    shape = command_shape(command)
    if not command.strip():
        return Verdict(DENY, "the command is empty", shape)
    parts = parse_command(command)
    bash_rules = [rule for rule in rules if rule.applies_to("bash")]
    worst: tuple[Decision, str] | None = None
    for part in parts:
        places = _Places(root, home or _home(), tuple(readable))
        decision, reason = _decide_part(part, bash_rules, places)
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
    try:
        trees = bashlex.parse(command)
    except Exception as error:  # bashlex raises its own errors and NotImplementedError
        detail = str(error).split("\n", 1)[0][:80]
        return [Part(None, opaque=f"shell syntax the checker does not follow ({detail})")]
    parts: list[Part] = []
    for tree in trees:
        _walk(tree, command, parts, depth)
    return parts or [Part(None, opaque="nothing recognisable to run")]


def _walk(node: Any, source: str, parts: list[Part], depth: int) -> None:
    kind = getattr(node, "kind", "")
    if kind == "command":
        _command(node, source, parts, depth)
        return
    if kind in ("commandsubstitution", "processsubstitution"):
        parts.append(Part(None, opaque=kind.replace("substitution", " substitution")))
        _walk(node.command, source, parts, depth)
        return
    if kind == "function":
        parts.append(Part(None, opaque="a function definition"))
    for child in _children(node):
        _walk(child, source, parts, depth)


def _children(node: Any) -> Iterable[Any]:
    for name in ("parts", "list"):
        value = getattr(node, name, None)
        if isinstance(value, list):
            yield from value
    body = getattr(node, "body", None)
    if body is not None and hasattr(body, "kind"):
        yield body


def _command(node: Any, source: str, parts: list[Part], depth: int) -> None:
    words: list[str] = []
    redirects: list[tuple[str, str]] = []
    assignments: list[str] = []
    opaque: str | None = None
    for child in node.parts:
        kind = child.kind
        if kind == "word":
            for nested in _nested(child):
                _walk(nested, source, parts, depth)
            word, why = _word(child, source)
            if why is not None:
                opaque = opaque or why
            words.append(word)
        elif kind == "assignment":
            for nested in _nested(child):
                _walk(nested, source, parts, depth)
            assignments.append(child.word)
        elif kind == "redirect":
            operator = str(child.type)
            target: Any = getattr(child, "output", None)
            if getattr(target, "kind", None) == "word":
                for nested in _nested(target):
                    _walk(nested, source, parts, depth)
                word, why = _word(target, source)
                if why is not None:
                    opaque = opaque or f"{why} in a redirection"
                redirects.append((operator, word))
            # `2>&1`, `>&2`, here-documents: no file involved.
    text = shlex.join(words) if words else None
    if text is not None and assignments:
        text = " ".join(assignments) + " " + text
    part = Part(text, tuple(words), tuple(redirects), tuple(assignments), opaque)
    parts.append(part)
    if opaque is None and words:
        _inline_scripts(part, parts, depth)


def _nested(word: Any) -> Iterable[Any]:
    for child in getattr(word, "parts", []) or []:
        if child.kind in ("commandsubstitution", "processsubstitution"):
            yield child


def _word(node: Any, source: str) -> tuple[str, str | None]:
    """The word as the shell would pass it, or why that cannot be known without running it."""
    for child in getattr(node, "parts", []) or []:
        if child.kind in ("commandsubstitution", "processsubstitution"):
            return node.word, "command substitution"
        if child.kind == "parameter":
            return node.word, "a variable expansion"
    start, end = node.pos
    raw = source[start:end]
    if "$" in raw or "`" in raw:
        return node.word, "an expansion"
    # bashlex's own quote removal is wrong on mixed quoting (`"-e"x'ec'`): redo it.
    try:
        split = shlex.split(raw, comments=False, posix=True)
    except ValueError:
        return node.word, "unbalanced quotes"
    if len(split) != 1:
        return node.word, "a word the checker cannot read"
    word = split[0]
    unquoted = re.sub(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"|\\.", "", raw)
    if _BRACE.search(unquoted):
        return word, "a brace expansion"
    if _GLOB_CHARS.search(unquoted) and word.startswith("-"):
        return word, "an option spelled with a wildcard"
    return word, None


def _inline_scripts(part: Part, parts: list[Part], depth: int) -> None:
    """Look inside `sh -c STRING` and `eval STRING`: they are unknown, but a denied command in
    them is still denied."""
    words = list(part.words)
    name = os.path.basename(words[0])
    script: str | None = None
    if name in _SHELLS and "-c" in words[1:]:
        index = words.index("-c", 1)
        script = words[index + 1] if index + 1 < len(words) else None
    elif name in _SHELLS and len(words) == 1:
        script = None
    elif name == "eval":
        script = " ".join(words[1:])
    elif name in _WRAPPERS:
        inner = _wrapped_command(words)
        if inner:
            parts.append(Part(None, opaque=f"a command run through {name}"))
            parts.extend(parse_command(shlex.join(inner), depth + 1))
        return
    if script is None:
        return
    if depth >= _MAX_DEPTH:
        parts.append(Part(None, opaque="nested shell strings too deep to check"))
        return
    parts.extend(parse_command(script, depth + 1))


def _wrapped_command(words: Sequence[str]) -> list[str]:
    """The command a wrapper runs (`timeout 5 curl x` → `curl x`), skipping its options."""
    rest = list(words[1:])
    while rest and (rest[0].startswith("-") or "=" in rest[0] or _is_number(rest[0])):
        rest.pop(0)
    return rest


def _is_number(word: str) -> bool:
    return bool(re.fullmatch(r"\d+(\.\d+)?[smhd]?", word))


def _decide_part(part: Part, rules: Sequence[Rule], places: _Places) -> tuple[Decision, str]:
    for rule in rules:
        if rule.matches(part.text if part.opaque is None else None):
            what = part.text or part.opaque or "the command"
            return rule.decision, f"your rule {_rule_text(rule)} matches {what}"
    if part.words:
        name = os.path.basename(part.words[0])
        if name in NETWORK_TOOLS:
            return DENY, f"{name} reaches the network, which lsp-agent does not allow"
        if name in _WRAPPERS or name in _SHELLS:
            for word in part.words[1:]:
                if os.path.basename(word) in NETWORK_TOOLS:
                    return DENY, f"{word} reaches the network, which lsp-agent does not allow"
    if part.opaque is not None:
        return ASK, f"it uses {part.opaque}, which cannot be checked before it runs"
    return _builtin(part, places)


def _rule_text(rule: Rule) -> str:
    match = f", match {rule.match!r}" if rule.match is not None else ""
    return f"{{tool {rule.tool!r}{match}: {rule.decision}}}"


def _builtin(part: Part, places: _Places) -> tuple[Decision, str]:
    """The built-in decision for one simple command that could be read."""
    for operator, target in part.redirects:
        if operator in _OUTPUT_REDIRECTS and target not in _HARMLESS_TARGETS:
            where = _outside(target, places.root, places.home)
            if where is not None:
                return ASK, f"it writes to {target}, outside the workspace"
            return ASK, f"it writes to {target} (changes made by bash skip the editor's preview)"
        if operator == "<":
            why = _path_concern(target, places)
            if why is not None:
                return ASK, why
    if not part.words:
        if part.assignments:
            return ALLOW, "only sets shell variables"
        return ALLOW, ""
    if part.assignments:
        return ASK, "it sets environment variables for the command, which can change what runs"
    name = part.words[0]
    args = list(part.words[1:])
    if name == "cd":
        if len(args) != 1 or args[0] == "-":
            return ASK, "cd without a folder of the workspace goes elsewhere"
        if _outside(args[0], places.root, places.home) is not None:
            return ASK, f"it moves to {args[0]}, outside the workspace"
        return ALLOW, "moves within the workspace"
    if "/" in name:
        return ASK, f"{name} is a program given by path, not a known read-only command"
    refusal = _argument_refusal(name, args)
    if refusal is not None:
        return ASK, refusal
    if not _known(name, args):
        return ASK, f"{name} is not on the list of read-only commands"
    if name not in _NO_PATHS:
        for word in _path_arguments(name, args):
            why = _path_concern(word, places)
            if why is not None:
                return ASK, why
    return ALLOW, "read-only command"


def _known(name: str, args: Sequence[str]) -> bool:
    if name in _READ_ONLY or name in _REFUSED_OPTIONS:
        return True
    if name in ("git", "sed", "uniq", "tree", "env"):
        return True
    if name in ("python", "python3") and args[:2] == ["-m", "pytest"]:
        return True
    return name == "ruff" and args[:1] == ["check"]


def _argument_refusal(name: str, args: Sequence[str]) -> str | None:
    """Why the arguments make a read-only command unsafe, or None."""
    refused = _REFUSED_OPTIONS.get(name)
    if refused is not None:
        for arg in args:
            if any(arg == flag or arg.startswith(flag + "=") for flag in refused):
                return f"{name} {arg} can write files or run programs"
            if (name == "sort" and arg.startswith("-o")) or (
                name == "tree" and arg.startswith("-o")
            ):
                return f"{name} {arg} writes to a file"
    if name == "git":
        return _git_refusal(args)
    if name == "sed":
        return _sed_refusal(args)
    if name == "uniq" and len([a for a in args if not a.startswith("-")]) > 1:
        return "uniq with two file names writes the second one"
    if name == "env" and args:
        return "env runs another command"
    if name == "ruff" and any(a.startswith(("--fix", "--unsafe-fixes")) for a in args):
        return "ruff check --fix changes files"
    return None


def _git_refusal(args: Sequence[str]) -> str | None:
    rest = list(args)
    while rest and rest[0].startswith("-"):
        option = rest.pop(0)
        if option not in _GIT_GLOBAL_OK:
            return f"git {option} can change what git runs or where it writes"
    if not rest:
        return "git without a subcommand"
    subcommand, options = rest[0], rest[1:]
    if subcommand not in _GIT_SUBCOMMANDS:
        return (
            f"git {subcommand} is not one of the read-only git commands (status, diff, log, "
            "show, branch)"
        )
    for option in options:
        if any(option == flag or option.startswith(flag + "=") for flag in _GIT_REFUSED):
            return f"git {subcommand} {option} can run programs or write files"
    if subcommand == "branch":
        for option in options:
            if option.startswith(("--sort=", "--format=", "--color=", "--contains=",
                                  "--merged=", "--no-merged=", "--points-at=")):  # fmt: skip
                continue
            if option not in _GIT_BRANCH_FLAGS:
                return f"git branch {option} can create, rename or delete branches"
    return None


def _sed_refusal(args: Sequence[str]) -> str | None:
    scripts: list[str] = []
    quiet = False
    rest = list(args)
    positional: list[str] = []
    while rest:
        arg = rest.pop(0)
        if arg in ("-e", "--expression"):
            if not rest:
                return "sed -e without a script"
            scripts.append(rest.pop(0))
        elif arg.startswith("--expression="):
            scripts.append(arg.split("=", 1)[1])
        elif arg in _SED_QUIET:
            quiet = True
        elif arg.startswith("-") and arg != "-":
            if arg not in _SED_SAFE_FLAGS:
                return f"sed {arg} can edit files in place or run a script file"
        else:
            positional.append(arg)
    if not quiet:
        return "sed is allowed only as sed -n (printing lines)"
    if not scripts:
        if not positional:
            return "sed without a script"
        scripts.append(positional.pop(0))
    for script in scripts:
        for command in script.split(";"):
            if command.strip() and not _SED_PRINT.fullmatch(command):
                return f"sed script {script!r} does more than print lines"
    return None


def _path_arguments(name: str, args: Sequence[str]) -> list[str]:
    """The arguments that may be files read: not the pattern or script some commands take
    first (`grep PATTERN FILE`, `sed -n SCRIPT FILE`)."""
    if name not in _PATTERN_FIRST:
        return list(args)
    rest = list(args)
    for index, arg in enumerate(rest):
        if arg in ("-e", "--regexp", "--expression"):
            return rest  # the pattern is an option's value: every positional is a file
        if not arg.startswith("-") or arg == "-":
            return rest[:index] + rest[index + 1 :]
    return rest


def _path_concern(word: str, places: _Places) -> str | None:
    """Why reading `word` (when it is a path) needs the user's word, or None."""
    value = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
    if not value or value.startswith("-"):
        return None
    outside = _outside(value, places.root, places.home)
    if outside is not None and not any(outside.is_relative_to(p) for p in places.readable):
        return f"it reads {value}, outside the workspace"
    parts = Path(value).parts
    if any(part.casefold().startswith(".env") for part in parts):
        return f"it reads {value}, which may hold secrets"
    return None


def _outside(value: str, root: Path, home: Path) -> Path | None:
    """The resolved path when `value` names a path outside the workspace (symlinks followed),
    else None."""
    if value in _HARMLESS_TARGETS:
        return None
    if value.startswith("~"):
        if value != "~" and not value.startswith("~/"):
            return Path(value)  # another user's home
        value = str(home) + value[1:]
    try:
        resolved = (root / value).resolve(strict=False)
    except (OSError, RuntimeError, ValueError):
        return Path(value)
    if resolved == root or resolved.is_relative_to(root):
        return None
    return resolved


def _home() -> Path:
    try:
        return Path.home()
    except RuntimeError:
        return Path("/nonexistent-home")


def _decide_other(tool: str, args: Mapping[str, Any], rules: Sequence[Rule]) -> Verdict:
    """Tools other than bash: the user's rules on the path, else allowed.

    Edits are allowed here because the mode already puts the question: in `review` the editor's
    preview asks the user, in `auto` the user chose not to be asked. Reads are allowed.
    """
    subjects = [str(args[key]) for key in PATH_KEYS if isinstance(args.get(key), str)]
    subject = _normal_path(subjects[0]) if subjects else None
    shape = subject or ""
    for rule in rules:
        if rule.applies_to(tool) and rule.matches(subject):
            target = f" on {subject}" if subject else ""
            return Verdict(rule.decision, f"your rule {_rule_text(rule)} matches {tool}{target}",
                           shape)  # fmt: skip
    return Verdict(ALLOW, "allowed by default", shape)


def _normal_path(path: str) -> str:
    """A path as rules see it: relative to the workspace, `/`-separated, no `./`."""
    normal = os.path.normpath(path.replace("\\", "/")).replace(os.sep, "/")
    return "" if normal == "." else normal.removeprefix("./")
