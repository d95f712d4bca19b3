"""A bash command line read into words, the way the permission wall needs it (pure).

Not a bash implementation. It reads exactly what bash would run for the plain subset that may
run without a question: words made of literal characters, quotes and backslash escapes, joined
by `;`, `&`, `&&`, `||`, `|` and newlines, with redirections and here-documents. For everything
beyond that subset it records WHY (a variable, a substitution, a line continuation, a subshell,
an `if` …), so that the caller asks; and it still finds the commands inside substitutions,
here-document bodies and the like, so that a network tool is denied wherever it appears.

Every difference between what this module sees and what bash runs must lean to "not plain":
that is what makes the wall hold against text written to fool it. That is also why it is one
module of some 650 lines: the reader is one state machine over the characters, and its states
(quotes, escapes, here-documents, substitutions) must be read side by side to see that none of
them can disagree with bash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_BLANKS = " \t"
_METACHARS = set(" \t\n|&;()<>")
# Longest first: the lexer takes the first operator that matches.
_OPERATORS = (
    ";;&", "&>>", "<<<", "<<-",
    "&&", "||", ";;", ";&", "|&", "&>", "<<", "<>", "<&", ">&", ">>", ">|", "<(", ">(",
    "<", ">", "|", "&", ";", "(", ")",
)  # fmt: skip
REDIRECTIONS = frozenset({"<", ">", ">>", ">|", "<>", "<&", ">&", "&>", "&>>", "<<", "<<-", "<<<"})
"""Operators that redirect a command's input or output."""
_RESERVED_THEN_COMMAND = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "time",
     "esac"}
)  # fmt: skip
"""Reserved words after which a command name may follow."""
_RESERVED_NOT_COMMAND = frozenset({"for", "select", "case", "function", "coproc", "[[", "]]"})
"""Reserved words whose following words are not a command to run."""
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL_PARAMETERS = set("@*#?-$!0123456789")
_ANSI_C = re.compile(r"\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)")
_ANSI_C_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n",
                  "r": "\r", "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"',
                  "?": "?"}  # fmt: skip
MAX_DEPTH = 8
"""Nesting of substitutions read before giving up (what is deeper is never plain)."""


@dataclass(frozen=True)
class Word:
    """One shell word."""

    raw: str
    """As written, quotes included."""
    value: str
    """After quote removal: what bash passes when `expansion` is None (and no glob matched)."""
    expansion: str | None = None
    """Why bash may pass something else than `value` (a variable, a substitution …)."""
    pattern: str | None = None
    """The glob pattern (quoted characters backslash-escaped) when the word has unquoted
    `*`, `?` or `[`; None otherwise."""
    quoted: bool = False
    """Whether any part was quoted or escaped (such a word is never a reserved word)."""


@dataclass(frozen=True)
class Redirect:
    """One redirection: `2>&1`, `> out.txt`, `< in.txt`, a here-document …"""

    operator: str
    fd: str
    """The descriptor number written before the operator ('' for the default)."""
    target: Word | None
    """The file, descriptor or here-document delimiter."""
    body: str | None = None
    """A here-document's text."""
    body_expansion: str | None = None
    """Why bash changes the here-document's text before the command reads it (None: it is
    read as written)."""


@dataclass
class Command:
    """One simple command: assignments, words and redirections."""

    words: list[Word] = field(default_factory=list)
    assignments: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    joined_by: str = ""
    """The operator before it: '', ';', '&', '&&', '||', '|' (the first has '')."""
    syntax: list[str] = field(default_factory=list)
    """What about this command is beyond the plain subset."""
    not_a_command: bool = False
    """Its words follow `for`, `case` … and are not a command to run."""


@dataclass
class Script:
    """A command line: its simple commands in order, and the scripts nested in it."""

    commands: list[Command] = field(default_factory=list)
    syntax: list[str] = field(default_factory=list)
    """Structure beyond the plain subset (a subshell, a line continuation, `if` …)."""
    nested: list[Script] = field(default_factory=list)
    """Substitutions and process substitutions: run by bash before or beside the command."""

    def all_commands(self) -> list[Command]:
        """Every command, nested ones included."""
        found = list(self.commands)
        for inner in self.nested:
            found += inner.all_commands()
        return found

    def all_syntax(self) -> list[str]:
        """Every structural reason, nested scripts' included."""
        found = list(self.syntax)
        for inner in self.nested:
            found += inner.all_syntax()
        return found


def parse(text: str, depth: int = 0) -> Script:
    """The command line `text` read into commands (never raises)."""
    return _Lexer(text, depth).script(closer=None)


@dataclass
class _PendingHeredoc:
    command: Command
    index: int
    """Where its `Redirect` sits in the command's redirects (replaced once the body is read)."""
    delimiter: str
    strip_tabs: bool
    quoted: bool


@dataclass
class _Reading:
    """Where one `_Lexer.script` call stands."""

    script: Script = field(default_factory=Script)
    """What is read so far."""
    command: Command = field(default_factory=Command)
    """The simple command being read."""
    parens: int = 0
    """`(` read and not yet closed."""
    expect_target: tuple[str, str] | None = None
    """A redirection operator and its descriptor, waiting for their word."""
    fd: str = ""
    """A descriptor number read just before a redirection operator."""

    def finish(self, joined_by: str) -> None:
        """End the command being read; the next one is joined to it by `joined_by`."""
        command = self.command
        if command.words or command.assignments or command.redirects or command.syntax:
            self.script.commands.append(command)
            self.command = Command(joined_by=joined_by)
            return
        if joined_by in ("&&", "||", "|", "&"):
            self.script.syntax.append(f"a missing command before {joined_by}")
        if not command.joined_by:
            command.joined_by = joined_by

    def drop_target(self) -> None:
        """A redirection operator waiting for its word gets none (something else came)."""
        if self.expect_target is not None:
            self.script.syntax.append(f"{self.expect_target[0]} without a target")
            self.expect_target = None


@dataclass
class _WordParts:
    """A word as `_Lexer._word` reads it, part by part."""

    value: list[str] = field(default_factory=list)
    """The text after quote removal."""
    pattern: list[str] = field(default_factory=list)
    """The text as a glob pattern: quoted characters escaped, unquoted `*?[` kept."""
    why: str | None = None
    """The first reason bash may pass something else than the value."""
    quoted: bool = False
    """Whether any part was quoted or escaped."""
    globbed: bool = False
    """Whether an unquoted `*`, `?` or `[` was read."""

    def because(self, reason: str | None) -> None:
        """Keep `reason` unless an earlier one was kept."""
        self.why = self.why or reason

    def add(self, text: str, reason: str | None = None) -> None:
        """Add `text`, taken literally (its glob characters are escaped in the pattern)."""
        self.because(reason)
        self.value.append(text)
        self.pattern.append(_escape_glob(text))


class _Lexer:
    """Reads one command line (or the inside of a `$(…)`) character by character."""

    def __init__(self, text: str, depth: int, start: int = 0) -> None:
        self.s = text
        self.i = start
        self.depth = depth
        self.pending: list[_PendingHeredoc] = []

    def script(self, closer: str | None) -> Script:
        """Read commands until the end, or until `closer` (`)` of a `$(`) at depth zero."""
        state = _Reading()
        while self.i < len(self.s):
            char = self.s[self.i]
            if self._skipped(state, char):
                continue
            if char == "\n":
                self.i += 1
                self._end_of_line(state)
                continue
            if closer == ")" and char == ")" and state.parens == 0:
                self.i += 1
                state.finish("")
                state.drop_target()
                return self._close(state.script)
            operator = self._operator()
            if operator is not None and self._apply_operator(state, operator):
                continue
            self._take_word(state, char)
        return self._end_of_text(state, closer)

    def _skipped(self, state: _Reading, char: str) -> bool:
        """Step over a blank, a line continuation or a comment at `self.i`; False if none."""
        if char in _BLANKS:
            self.i += 1
            return True
        if char == "\\" and self.s.startswith("\\\n", self.i):
            state.script.syntax.append("a line continuation (backslash-newline)")
            self.i += 2
            return True
        if char == "#" and state.expect_target is None:
            end = self.s.find("\n", self.i)
            self.i = len(self.s) if end < 0 else end
            return True
        return False

    def _end_of_line(self, state: _Reading) -> None:
        """A newline (consumed): it ends the command, then come the here-documents' bodies."""
        state.drop_target()
        state.finish(";")
        self._heredoc_bodies(state.script)

    def _apply_operator(self, state: _Reading, operator: str) -> bool:
        """Act on an operator just read; False if it is none this reader knows."""
        script = state.script
        if operator in ("<(", ">("):
            word = self._process_substitution(script, operator)
            self._add_word(state.command, word, script)
            return True
        state.drop_target()
        if operator in REDIRECTIONS:
            state.expect_target = (operator, state.fd)
            state.fd = ""
            return True
        if operator in ("&&", "||", "|", "|&", ";", "&"):
            # A command sent to the background runs like one before `;` (and dies with the
            # rest when the call ends).
            state.finish("|" if operator == "|&" else operator)
            return True
        if operator in (";;", ";&", ";;&"):
            script.syntax.append("a case statement")
        elif operator == "(":
            if len(state.command.words) == 1 and self._peek_close_paren():
                script.syntax.append("a function definition")
            else:
                script.syntax.append("a subshell or grouping ( … )")
            state.parens += 1
        elif operator == ")":
            state.parens -= 1
            script.syntax.append("a subshell or grouping ( … )")
        else:
            return False
        state.finish(";")
        return True

    def _take_word(self, state: _Reading, char: str) -> None:
        """Read a word at `self.i` (starting with `char`): a redirection's target, a
        descriptor number before an operator, or the command's next word."""
        before = self.i
        word = self._word(state.script)
        if self.i == before:  # never stuck: an unexpected character is skipped
            state.script.syntax.append(f"an unexpected character {char!r}")
            self.i += 1
            return
        if state.expect_target is not None:
            operator, fd = state.expect_target
            state.expect_target = None
            self._redirect(state.command, operator, fd, word)
            return
        if self._is_fd(word):
            state.fd = word.value
            return
        self._add_word(state.command, word, state.script)

    def _end_of_text(self, state: _Reading, closer: str | None) -> Script:
        """The text ended: finish the last command and note what was left open."""
        script = state.script
        state.drop_target()
        state.finish("")
        if state.command.joined_by in ("&&", "||", "|"):
            script.syntax.append(f"a missing command after {state.command.joined_by}")
        if self.pending:
            self._heredoc_bodies(script)
        if closer is not None:
            script.syntax.append(f"an unclosed {'$(' if closer == ')' else closer}")
        if state.parens > 0:
            script.syntax.append("an unclosed (")
        return script

    def _close(self, script: Script) -> Script:
        if self.pending:
            # A here-document opened inside $( … ) on the same line: its body follows later in
            # the outer text, which this reader does not follow.
            script.syntax.append("a here-document inside a substitution")
            self.pending = []
        return script

    def _operator(self) -> str | None:
        for operator in _OPERATORS:
            if self.s.startswith(operator, self.i):
                self.i += len(operator)
                return operator
        return None

    def _peek_close_paren(self) -> bool:
        rest = self.s[self.i :].lstrip(_BLANKS)
        return rest.startswith(")")

    def _is_fd(self, word: Word) -> bool:
        """A number right before a redirection operator is its descriptor (`2>`)."""
        return word.raw.isdigit() and self.i < len(self.s) and self.s[self.i] in "<>"

    def _add_word(self, command: Command, word: Word, script: Script) -> None:
        if not command.words and _ASSIGNMENT.match(word.raw):
            command.assignments.append(word)  # the name part is unquoted: the regex saw it raw
            return
        if not command.words and not word.quoted:
            if word.raw in _RESERVED_THEN_COMMAND:
                script.syntax.append(f"shell syntax ({word.raw})")
                return
            if word.raw in _RESERVED_NOT_COMMAND and not command.not_a_command:
                script.syntax.append(f"shell syntax ({word.raw})")
                command.not_a_command = True
                return
        command.words.append(word)

    def _redirect(self, command: Command, operator: str, fd: str, word: Word) -> None:
        command.redirects.append(Redirect(operator, fd, word))
        if operator in ("<<", "<<-"):
            self.pending.append(
                _PendingHeredoc(
                    command,
                    len(command.redirects) - 1,
                    word.value,
                    operator == "<<-",
                    word.quoted,
                )
            )
            if word.expansion is not None and "$" in word.raw:
                command.syntax.append("a here-document delimiter with an expansion")

    def _heredoc_bodies(self, script: Script) -> None:
        """Read the bodies of the here-documents opened on the line just ended."""
        pending, self.pending = self.pending, []
        for heredoc in pending:
            lines: list[str] = []
            closed = False
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                line = self.s[self.i :] if end < 0 else self.s[self.i : end]
                self.i = len(self.s) if end < 0 else end + 1
                check = line.lstrip("\t") if heredoc.strip_tabs else line
                if check == heredoc.delimiter:
                    closed = True
                    break
                lines.append(check)
            body = "".join(line + "\n" for line in lines)
            if not closed:
                heredoc.command.syntax.append("a here-document without its end line")
            why: str | None = None
            if not heredoc.quoted and any(c in body for c in "$`\\"):
                why = "a here-document whose text bash expands ($, ` or \\ in it)"
                _Lexer(body, self.depth + 1)._double_quoted_text(script, end_quote=None)
            old = heredoc.command.redirects[heredoc.index]
            heredoc.command.redirects[heredoc.index] = Redirect(
                old.operator, old.fd, old.target, body, why
            )

    def _process_substitution(self, script: Script, operator: str) -> Word:
        start = self.i - 2
        self._nested_script(script)
        raw = self.s[start : self.i]
        return Word(raw, raw, f"process substitution ({operator}…))")

    def _nested_script(self, script: Script) -> None:
        """Read a `$(…)` body (the `$(` is consumed) as a script nested in `script`."""
        if self.depth >= MAX_DEPTH:
            script.syntax.append("substitutions nested too deep to check")
            self._skip_balanced("(", ")")
            return
        inner_lexer = _Lexer(self.s, self.depth + 1, self.i)
        inner = inner_lexer.script(closer=")")
        self.i = inner_lexer.i
        script.nested.append(inner)

    def _skip_balanced(self, opener: str, closer: str) -> None:
        depth = 1
        while self.i < len(self.s) and depth:
            char = self.s[self.i]
            if char == "\\":
                self.i += 2
                continue
            if char == opener:
                depth += 1
            elif char == closer:
                depth -= 1
            self.i += 1

    def _word(self, script: Script) -> Word:
        """Read one word starting at `self.i` (not at a metacharacter)."""
        start = self.i
        parts = _WordParts()
        while self.i < len(self.s) and self.s[self.i] not in _METACHARS:
            char = self.s[self.i]
            if char == "'":
                self._single_quoted(parts)
            elif char == '"':
                parts.quoted = True
                self.i += 1
                parts.add(*self._double_quoted_text(script, end_quote='"'))
            elif char == "\\":
                self._escaped(parts)
            elif char == "$":
                text, reason = self._dollar(script, quoted_context=False)
                parts.quoted = parts.quoted or (reason is not None and reason.startswith("ANSI-C"))
                parts.add(text, reason)
            elif char == "`":
                parts.add(self._backquote(script), "command substitution (`…`)")
            else:
                self._unquoted(parts, char, at_start=self.i == start)
        raw = self.s[start : self.i]
        pattern = "".join(parts.pattern) if parts.globbed else None
        return Word(raw, "".join(parts.value), parts.why, pattern, parts.quoted)

    def _single_quoted(self, parts: _WordParts) -> None:
        """A `'…'` part (at `self.i`): every character literal."""
        parts.quoted = True
        end = self.s.find("'", self.i + 1)
        if end < 0:
            parts.because("an unclosed single quote")
            end = len(self.s)
        parts.add(self.s[self.i + 1 : end])
        self.i = end + 1

    def _escaped(self, parts: _WordParts) -> None:
        """A backslash (at `self.i`) and the character it quotes."""
        parts.quoted = True
        if self.i + 1 >= len(self.s):
            # bash keeps a backslash that ends the text, except after a single-quoted string
            # spanning lines on the same line, where it drops it (bash 5.2): not plain.
            parts.add("\\", "a backslash at the end of the command")
            self.i += 1
            return
        following = self.s[self.i + 1]
        self.i += 2
        if following == "\n":
            parts.because("a line continuation (backslash-newline)")
            return
        parts.add(following)

    def _unquoted(self, parts: _WordParts, char: str, at_start: bool) -> None:
        """An unquoted character (at `self.i`) that starts no quote nor expansion."""
        if char == "\x00":
            parts.because("a NUL character")
        if char in "*?[":
            parts.globbed = True
            parts.value.append(char)
            parts.pattern.append(char)
            self.i += 1
            return
        if char in "{}":
            parts.because("braces ({…}), which bash may expand")
        if char == "~" and (at_start or self.s[self.i - 1] in "=:"):
            parts.because("a tilde (~), which bash expands to a home folder")
        parts.add(char)
        self.i += 1

    def _double_quoted_text(self, script: Script, end_quote: str | None) -> tuple[str, str | None]:
        """The text of a double-quoted string (the opening quote consumed) or of an expanding
        here-document body (`end_quote` None: read to the end), and why it is not literal."""
        value: list[str] = []
        why: str | None = None
        while self.i < len(self.s):
            char = self.s[self.i]
            if end_quote is not None and char == end_quote:
                self.i += 1
                return "".join(value), why
            if char == "\\" and self.i + 1 < len(self.s):
                following = self.s[self.i + 1]
                if following == "\n":
                    why = why or "a line continuation (backslash-newline)"
                    self.i += 2
                    continue
                if following in '$`"\\':
                    if end_quote is None and following == '"':
                        value.append("\\")  # a here-document keeps \" as written
                    value.append(following)
                    self.i += 2
                    continue
                value.append("\\")
                self.i += 1
                continue
            if char == "$":
                text, reason = self._dollar(script, quoted_context=True)
                if reason is not None:
                    why = why or reason
                value.append(text)
                continue
            if char == "`":
                value.append(self._backquote(script))
                why = why or "command substitution (`…`)"
                continue
            if char == "\x00":
                why = why or "a NUL character"
            value.append(char)
            self.i += 1
        if end_quote is not None:
            why = why or "an unclosed double quote"
        return "".join(value), why

    def _dollar(self, script: Script, quoted_context: bool) -> tuple[str, str | None]:
        """Read what follows a `$` (at `self.i`); its text as written and why it expands."""
        start = self.i
        following = self.s[self.i + 1] if self.i + 1 < len(self.s) else ""
        if following == "(":
            if self.s.startswith("$((", self.i):
                self.i += 3
                self._arithmetic(script)
                return self.s[start : self.i], "arithmetic expansion ($((…)))"
            self.i += 2
            self._nested_script(script)
            return self.s[start : self.i], "command substitution ($(…))"
        if following == "{":
            self.i += 2
            self._braced_parameter(script)
            return self.s[start : self.i], "a parameter expansion (${…})"
        if following == "'" and not quoted_context:
            self.i += 2
            end = self.i
            while end < len(self.s) and self.s[end] != "'":
                if self.s[end] == "\\" and end + 1 < len(self.s):
                    end += 2
                    continue
                end += 1
            body = self.s[self.i : end]
            self.i = min(end + 1, len(self.s))
            return _ansi_c(body), "ANSI-C quoting ($'…')"
        if following == '"' and not quoted_context:
            self.i += 2
            inner, why = self._double_quoted_text(script, end_quote='"')
            return inner, why or 'locale translation ($"…")'
        if following and (following in _SPECIAL_PARAMETERS):
            self.i += 2
            return self.s[start : self.i], "a variable ($…)"
        match = _NAME.match(self.s, self.i + 1)
        if match:
            self.i = match.end()
            return self.s[start : self.i], "a variable ($…)"
        self.i += 1
        return "$", None  # a lone dollar is literal

    def _arithmetic(self, script: Script) -> None:
        """Skip an arithmetic expansion's body (`$((` consumed), reading substitutions in it."""
        depth = 2
        while self.i < len(self.s) and depth > 0:
            char = self.s[self.i]
            if (
                char == "$"
                and self.s.startswith("$(", self.i)
                and not self.s.startswith("$((", self.i)
            ):
                self.i += 2
                self._nested_script(script)
                continue
            if char == "`":
                self._backquote(script)
                continue
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
            self.i += 1

    def _braced_parameter(self, script: Script) -> None:
        """Skip a `${…}` body (`${` consumed), reading substitutions in it."""
        depth = 1
        while self.i < len(self.s) and depth > 0:
            char = self.s[self.i]
            if char == "\\":
                self.i += 2
                continue
            if char == "'":
                end = self.s.find("'", self.i + 1)
                self.i = len(self.s) if end < 0 else end + 1
                continue
            if char == '"':
                self.i += 1
                self._double_quoted_text(script, end_quote='"')
                continue
            if char == "$":
                self._dollar(script, quoted_context=True)
                continue
            if char == "`":
                self._backquote(script)
                continue
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            self.i += 1

    def _backquote(self, script: Script) -> str:
        """Read a `` `…` `` substitution (at `self.i`); its body is parsed as a nested script."""
        start = self.i
        self.i += 1
        body: list[str] = []
        while self.i < len(self.s) and self.s[self.i] != "`":
            if self.s[self.i] == "\\" and self.i + 1 < len(self.s):
                following = self.s[self.i + 1]
                body.append(following if following in "$`\\" else "\\" + following)
                self.i += 2
                continue
            body.append(self.s[self.i])
            self.i += 1
        if self.i >= len(self.s):
            script.syntax.append("an unclosed backquote")
        self.i = min(self.i + 1, len(self.s))
        if self.depth >= MAX_DEPTH:
            script.syntax.append("substitutions nested too deep to check")
        else:
            script.nested.append(parse("".join(body), self.depth + 1))
        return self.s[start : self.i]


def _escape_glob(text: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def _ansi_c(body: str) -> str:
    """The text of `$'…'` (what bash passes), for the network check."""

    def replace(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] in "xuU" and len(code) > 1:
            try:
                return chr(int(code[1:], 16))
            except (ValueError, OverflowError):
                return ""
        if code[0] in "01234567":
            return chr(int(code, 8) & 0xFF)
        if code[0] == "c" and len(code) == 2:
            return chr(ord(code[1]) & 0x1F)
        return _ANSI_C_SIMPLE.get(code, "\\" + code)

    return _ANSI_C.sub(replace, body)
