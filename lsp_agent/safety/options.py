"""Command-line options read like the program reads them (pure): GNU `getopt_long` by default.

A `Spec` lists every option a program knows, each with what its value is: nothing, text, or a
path the program reads; options that write files or run programs are listed too, as refused, so
that an abbreviation (`--o=FILE` for `--output`) is recognised for what it is. `parse()` returns
the options and the positional arguments, or why the arguments cannot be read safely: an
unknown option, an ambiguous abbreviation, a refused option.

Specs are written in a small notation, one token per option::

    -n        a flag                     --all      a long flag
    -n=       a value (text)             --lines=   a value (text)
    -f@       a value that is a path     --file@    a path
    -I=?      an optional attached value --color=?  an optional `=value`
    -i!       refused                    --output!  refused (whatever its value)
    …:tag     sets `tag` in the result (`-r:recursive`)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_TOKEN = re.compile(r"^(--?[^=@!:]+)(=\?|=|@|!)?(?::([a-z_]+))?$")

FLAG = "flag"
TEXT = "text"
PATH = "path"
OPTIONAL = "optional"
REFUSED = "refused"


@dataclass(frozen=True)
class Option:
    """One option of a program."""

    name: str
    """As written: `-n` or `--lines`."""
    kind: str
    """FLAG, TEXT, PATH, OPTIONAL or REFUSED."""
    tag: str | None = None


@dataclass(frozen=True)
class Spec:
    """Everything a program accepts before its positional arguments are judged."""

    options: dict[str, Option]
    refused_why: str = "can write files or run programs"
    abbreviations: bool = True
    """GNU getopt_long: an unambiguous prefix of a long option is that option."""
    clusters: bool = True
    """Short options may be joined (`-la`)."""
    numbers: bool = False
    """`-5` is accepted (head, tail, grep: a count)."""
    permute: bool = True
    """Options may follow positional arguments (GNU); False: the first positional ends them."""


def spec(notation: str, **kwargs: object) -> Spec:
    """A `Spec` from the notation of the module docstring."""
    options: dict[str, Option] = {}
    for token in notation.split():
        match = _TOKEN.match(token)
        if match is None:
            raise ValueError(f"bad option token {token!r}")
        name, suffix, tag = match.groups()
        kind = {None: FLAG, "=": TEXT, "=?": OPTIONAL, "@": PATH, "!": REFUSED}[suffix]
        options[name] = Option(name, kind, tag)
    return Spec(options, **kwargs)  # type: ignore[arg-type]


@dataclass
class Parsed:
    """The arguments as the program reads them."""

    options: list[tuple[Option, str | None]] = field(default_factory=list)
    positionals: list[str] = field(default_factory=list)
    tags: set[str] = field(default_factory=set)

    def values(self, tag: str) -> list[str]:
        """The values of the options carrying `tag`."""
        return [value for option, value in self.options if option.tag == tag and value]

    def paths(self) -> list[str]:
        """Values of the options that name a file the program reads."""
        return [value for option, value in self.options if option.kind == PATH and value]


class Refusal(Exception):
    """The arguments cannot run without a question; the message says why."""


def parse(program: str, spec: Spec, args: list[str]) -> Parsed:
    """Read `args` as `program` does; raises `Refusal` with a sentence when they cannot be
    allowed without a question."""
    parsed = Parsed()
    index = 0
    only_positionals = False
    while index < len(args):
        arg = args[index]
        index += 1
        if only_positionals or arg == "-" or not arg.startswith("-"):
            parsed.positionals.append(arg)
            if not spec.permute:
                only_positionals = True
            continue
        if arg == "--":
            only_positionals = True
            continue
        if spec.numbers and arg[1:].isdigit():
            parsed.options.append((Option("-NUM", TEXT), arg[1:]))
            continue
        if arg.startswith("--"):
            index = _long(program, spec, args, index, arg, parsed)
        else:
            index = _short(program, spec, args, index, arg, parsed)
    return parsed


def _long(program: str, spec: Spec, args: list[str], index: int, arg: str, parsed: Parsed) -> int:
    name, equals, value = arg.partition("=")
    option = resolve(program, spec, name)
    if option.kind == REFUSED:
        raise Refusal(f"{program} {option.name} {spec.refused_why}")
    if option.kind == FLAG:
        if equals:
            raise Refusal(f"{program} {option.name} takes no value")
        _record(parsed, option, None)
        return index
    if equals:
        _record(parsed, option, value)
        return index
    if option.kind == OPTIONAL:
        _record(parsed, option, None)
        return index
    if index >= len(args):
        raise Refusal(f"{program} {option.name} is missing its value")
    _record(parsed, option, args[index])
    return index + 1


def _short(program: str, spec: Spec, args: list[str], index: int, arg: str, parsed: Parsed) -> int:
    position = 1
    while position < len(arg):
        name = "-" + arg[position]
        option = spec.options.get(name)
        if option is None or (position > 1 and not spec.clusters):
            shown = arg if option is None else name
            raise Refusal(f"{program} {shown} is not an option lsp-agent knows to be read-only")
        if option.kind == REFUSED:
            raise Refusal(f"{program} {name} {spec.refused_why}")
        rest = arg[position + 1 :]
        if option.kind == FLAG:
            _record(parsed, option, None)
            position += 1
            continue
        if rest or option.kind == OPTIONAL:
            _record(parsed, option, rest or None)
            return index
        if index >= len(args):
            raise Refusal(f"{program} {name} is missing its value")
        _record(parsed, option, args[index])
        return index + 1
    return index


def _record(parsed: Parsed, option: Option, value: str | None) -> None:
    parsed.options.append((option, value))
    if option.tag is not None:
        parsed.tags.add(option.tag)


def resolve(program: str, spec: Spec, name: str) -> Option:
    """The long option `name` means: exact, else (GNU) its unambiguous prefix."""
    exact = spec.options.get(name)
    if exact is not None:
        return exact
    if spec.abbreviations and len(name) > 2:
        matches = [option for key, option in spec.options.items() if key.startswith(name)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            names = ", ".join(sorted(option.name for option in matches))
            raise Refusal(f"{program} {name} is an ambiguous abbreviation ({names})")
    raise Refusal(f"{program} {name} is not an option lsp-agent knows to be read-only")


COMMON = "--help --version"
"""Options every program on the list takes (and that only print)."""
