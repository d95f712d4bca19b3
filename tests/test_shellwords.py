"""The command reader: whenever it calls a command line plain, bash runs exactly the words it
read (checked against real bash on generated lines), and everything beyond the plain subset
says why."""

from __future__ import annotations

import subprocess

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from lsp_agent.safety.shellwords import Script, parse

# Characters that matter to bash's reading of a line, and some that do not: the ones that stay
# in the plain subset come often, the others now and then.
PLAINISH = st.sampled_from([*"ab-=./:~ \t'\"\\$#!%^,@+;|&", "é", "x y", "\\\\", "\\'"])
SPECIAL = st.sampled_from([*"`()<>{}*?[]\n", "EOF", "x\\\ny", "${", "$(", "<<", "$x"])
ALPHABET = st.one_of(PLAINISH, PLAINISH, PLAINISH, PLAINISH, SPECIAL)


def words_by_bash(line: str) -> list[list[str]] | None:
    """The words of each simple command of `line` as bash passes them (printf as the program),
    or None when bash rejects the line."""
    program = "p() { printf '%s\\0' \"$@\"; printf '\\1'; }\n"
    # Every command of the line is run by `p`, which prints its arguments.
    script = parse(line)
    rewritten = "\n".join(
        "p " + " ".join(word.raw for word in command.words) for command in script.commands
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program + rewritten],
        capture_output=True,
        timeout=10,
        check=False,
        env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"},
        cwd="/",
    )
    if done.returncode != 0 or done.stderr:
        return None
    groups = done.stdout.decode("utf-8", "surrogateescape").split("\1")[:-1]
    return [group.split("\0")[:-1] for group in groups]


def plain(script: Script) -> bool:
    if script.all_syntax() or script.nested:
        return False
    for command in script.commands:
        if command.syntax or command.assignments or command.redirects or command.not_a_command:
            return False
        if any(word.expansion is not None or word.pattern is not None for word in command.words):
            return False
    return True


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(st.lists(ALPHABET, min_size=1, max_size=14).map("".join))
def test_what_the_reader_calls_plain_is_what_bash_runs(line: str) -> None:
    script = parse(line)
    assume(plain(script) and bool(script.commands))
    expected = [[word.value for word in command.words] for command in script.commands]
    by_bash = words_by_bash(line)
    assert by_bash is not None, f"bash rejects {line!r}, which the reader calls plain"
    assert by_bash == expected, line


def test_a_backslash_that_ends_the_text_is_not_plain_because_bash_may_drop_it() -> None:
    """Found by the property above: bash 5.2 keeps `x\\` at the end of a command, but drops the
    backslash after a single-quoted string that spans lines (`'<newline>'\\` runs as a bare
    newline): the reader cannot say which word bash will run, so it asks."""
    assert words_by_bash("printf x\\") == [["printf", "x\\"]]
    assert words_by_bash("printf '\n'\\") == [["printf", "\n"]]
    for line in ("printf x\\", "printf '\n'\\", "'\n'\\"):
        assert not plain(parse(line)), line


def test_the_plain_subset_reads_quotes_and_escapes_like_bash() -> None:
    line = "grep -n 'a b' \"c d\" e\\ f 'x'\"y\"z -- '$HOME' \"it's\""
    script = parse(line)
    assert plain(script)
    assert words_by_bash(line) == [[w.value for w in script.commands[0].words]]
    assert script.commands[0].words[-2].value == "$HOME"  # single quotes: literal


def test_everything_beyond_the_subset_says_why() -> None:
    reasons = {
        "echo $HOME": "a variable",
        "echo ${HOME}": "a parameter expansion",
        "echo $(date)": "command substitution",
        "echo `date`": "command substitution",
        "echo $((1+2))": "arithmetic expansion",
        "ls -l\\\na": "line continuation",
        "cat ~/x": "tilde",
        "echo {a,b}": "braces",
        "echo $'\\x41'": "ANSI-C",
        'echo $"x"': "locale translation",
        "echo 'open": "unclosed single quote",
        "ls foo\\": "a backslash at the end",
        "printf '\n'\\": "a backslash at the end",
    }
    for line, reason in reasons.items():
        (command,) = parse(line).commands
        found = [w.expansion for w in command.words if w.expansion]
        assert found, line
        assert reason in found[0], (line, found)
    structural = {
        "( ls )": "subshell",
        "if true; then ls; fi": "shell syntax (if)",
        "for i in a; do ls; done": "shell syntax (for)",
        "f() { ls; }": "function definition",
        "ls &&": "missing command after &&",
        "ls \\\n -l": "line continuation",
        "cat <<EOF\nno end": "without its end line",
    }
    for line, reason in structural.items():
        script = parse(line)
        found = script.all_syntax() + [s for c in script.commands for s in c.syntax]
        assert any(reason in why for why in found), (line, found)


def test_assignments_are_told_apart_from_arguments() -> None:
    (command,) = parse("FOO=1 BAR='x y' make X=2").commands
    assert [a.raw for a in command.assignments] == ["FOO=1", "BAR='x y'"]
    assert [w.value for w in command.words] == ["make", "X=2"]
    (quoted,) = parse("'FOO'=1 ls").commands
    assert quoted.assignments == []
    assert quoted.words[0].value == "FOO=1"


def test_here_documents_quoted_or_not() -> None:
    (quoted,) = parse("cat <<'EOF'\n$(touch x) `id`\nEOF").commands
    (redirect,) = quoted.redirects
    assert redirect.body == "$(touch x) `id`\n"
    assert redirect.body_expansion is None
    script = parse("cat <<EOF\n$(curl x)\nEOF")
    (redirect,) = script.commands[0].redirects
    assert redirect.body_expansion is not None
    assert "expands" in redirect.body_expansion
    assert [w.value for c in script.all_commands()[1:] for w in c.words] == ["curl", "x"]
    stripped = parse("cat <<-END\n\t\tbody\n\tEND\necho after").commands
    assert stripped[0].redirects[0].body == "body\n"
    assert [w.value for w in stripped[1].words] == ["echo", "after"]


def test_commands_hidden_in_substitutions_are_found_at_any_depth() -> None:
    script = parse('echo "$(echo `echo $(wget x)`)"')
    names = [c.words[0].value for c in script.all_commands() if c.words]
    assert "wget" in names


def test_globs_keep_their_pattern_and_quoted_characters_stay_literal() -> None:
    (command,) = parse("ls *.py '*.txt' \\*.md .e?v").commands
    assert [w.pattern for w in command.words] == [None, "*.py", None, None, ".e?v"]
    assert command.words[2].value == "*.txt"
    assert command.words[3].value == "*.md"


def test_redirections_with_descriptors() -> None:
    (command,) = parse("ls 2>/dev/null >&2 <in 3<>x").commands
    found = [(r.operator, r.fd, r.target.value if r.target else None) for r in command.redirects]
    assert found == [
        (">", "2", "/dev/null"),
        (">&", "", "2"),
        ("<", "", "in"),
        ("<>", "3", "x"),
    ]
