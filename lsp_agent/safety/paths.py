"""Judging what a command reads: every path it names resolved (symlinks followed) and inside the
workspace (or a spill folder), no secret among them, a glob judged by every file it matches, a
recursive read by every folder it would enter; and where the shell finds the program itself.

A judgement that cannot be passed raises `Ask` with the sentence the user sees.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lsp_agent.safety import options as opt
from lsp_agent.safety import symlinks
from lsp_agent.safety.options import Parsed, Refusal, Spec
from lsp_agent.safety.protected import ScannedFolder, Scanner, git_dir, secret_part, whitelists

HARMLESS_FILES = frozenset({"/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr"})


MAX_GLOB_MATCHES = 5_000


@dataclass(frozen=True)
class Places:
    """Where a command's paths are judged from, and what the judge may look at."""

    root: Path
    home: Path
    readable: tuple[Path, ...] = ()
    """Folders outside the workspace that may be read without asking (the spill files)."""
    scanner: Scanner | None = None
    """The workspace walk (recursive searches); None: every recursive search is asked."""
    history: Callable[[], bool | None] | None = None
    """Whether the repository's index or history holds a secret-named file (None: unknown)."""
    path: str = ""
    """The PATH commands run with, to find where a program name leads."""


@dataclass
class Situation:
    """What earlier commands of the same line changed."""

    cwds: set[Path]
    """The folders the command may be running in (a `cd` adds one)."""
    wrote: bool = False
    """An earlier command ran the project's code (pytest), which may have made files."""


class Ask(Exception):
    """The command must be asked; the message says why."""


def path_concern(value: str, places: Places, situation: Situation, verb: str = "reads") -> None:
    """Raise `Ask` when the path `value` (as the program gets it) is outside the workspace or a
    secret, from any of the folders the command may run in."""
    if value in HARMLESS_FILES or value == "-" or value == "":
        return
    if value.startswith(("/dev/tcp/", "/dev/udp/")):
        raise Ask(f"it {verb} {value}, a network connection")
    for cwd in situation.cwds:
        candidate = Path(value) if os.path.isabs(value) else cwd / value
        try:
            resolved = symlinks.resolved(candidate)
        except (OSError, RuntimeError, ValueError):
            raise Ask(f"it {verb} {value}, which cannot be resolved") from None
        lexical = Path(os.path.normpath(candidate))
        inside = resolved == places.root or resolved.is_relative_to(places.root)
        if not inside:
            if any(resolved.is_relative_to(folder) for folder in places.readable):
                continue
            raise Ask(f"it {verb} {value}, outside the workspace")
        parts = list(resolved.relative_to(places.root).parts)
        if lexical.is_relative_to(places.root):
            parts += lexical.relative_to(places.root).parts
        secret = secret_part(parts)
        if secret is not None:
            raise Ask(f"it {verb} {value}, which may hold secrets ({secret})")


def folder_concern(
    value: str,
    places: Places,
    situation: Situation,
    *,
    hidden: bool,
    follow: bool,
    exclude: Sequence[str] = (),
    exclude_dirs: Sequence[str] = (),
    only: Sequence[str] = (),
) -> None:
    """Raise `Ask` when searching `value` recursively would read a secret: a secret-named file
    or folder below it (hidden ones only when `hidden`), or, when `follow`, a symlink out of the
    workspace or to a secret. `exclude` and `exclude_dirs` are globs of names skipped; `only`,
    when given, are the globs of the only file names searched (folders are then skipped)."""
    path_concern(value, places, situation)
    if places.scanner is None:
        raise Ask("it searches folders recursively, which lsp-agent cannot check here")
    scanner = places.scanner
    found: list[str] = []

    def visit(where: str, seen: ScannedFolder) -> bool:
        for name in seen.secrets:
            folder = name in seen.subfolders
            if only and (folder or not any(_name_matches(name, glob) for glob in only)):
                continue
            if not hidden and not only and name.startswith("."):
                continue
            skip = exclude_dirs if folder else exclude
            if any(fnmatch.fnmatchcase(name, glob) for glob in skip):
                continue
            found.append(os.path.relpath(os.path.join(where, name), places.root))
            return True
        if follow and seen.symlinks:
            path = Path(where)
            for name in seen.symlinks:
                shown = f"{(path / name).relative_to(places.root)} (a symlink)"
                try:
                    target = symlinks.resolved(path / name)
                except (OSError, RuntimeError):
                    found.append(shown)
                    return True
                if not target.is_relative_to(places.root) or secret_part(
                    target.relative_to(places.root).parts
                ):
                    found.append(shown)
                    return True
        return False

    for cwd in situation.cwds:
        top = (Path(value) if os.path.isabs(value) else cwd / value).resolve()
        if not top.is_dir():
            continue
        complete = scanner.walk(top, visit)
        if found:
            raise Ask(f"it searches {value} recursively, which holds {found[0]} (secrets)")
        if not complete:
            raise Ask(f"it searches {value} recursively, too large a tree to check for secrets")


def _name_matches(name: str, glob: str) -> bool:
    """Whether a file called `name` matches a search tool's glob (its last component)."""
    return fnmatch.fnmatchcase(name, glob.rsplit("/", 1)[-1])


def whitelisted(value: str, places: Places, situation: Situation) -> bool:
    """Whether an ignore file under (or above, up to the repository) `value` has `!` lines,
    which make ripgrep search hidden files."""
    if places.scanner is None:
        return True
    found = git_dir(places.root)
    candidates: list[Path] = []
    if found is not None:
        top, folder = found
        candidates.append(folder / "info" / "exclude")
        for parent in (places.root, *places.root.parents):
            candidates += [parent / name for name in (".gitignore", ".ignore", ".rgignore")]
            if parent == top:
                break
    if any(whitelists(path) for path in candidates if path.is_file()):
        return True
    hit = False

    def visit(path: str, seen: ScannedFolder) -> bool:
        nonlocal hit
        hit = any(whitelists(Path(path, name)) for name in seen.ignore_files)
        return hit

    for cwd in situation.cwds:
        top_folder = (Path(value) if os.path.isabs(value) else cwd / value).resolve()
        if top_folder.is_dir() and (not places.scanner.walk(top_folder, visit) or hit):
            return True
    return False


_CLASS = re.compile(r"\[\[?[:=.]")


def expand(pattern: str, literal: str, situation: Situation) -> list[str]:
    """The words bash makes of a glob `pattern` (quoted characters backslash-escaped), in any of
    the folders the command may run in; `[literal]` when nothing matches. Raises `Ask` for a
    glob the judge does not follow or that could become an option."""
    if _CLASS.search(pattern):
        raise Ask("it uses a glob with a character class ([[:…:]]), which the judge does not read")
    words: list[str] = []
    for cwd in situation.cwds:
        matches = _glob(pattern, cwd)
        if len(matches) > MAX_GLOB_MATCHES:
            raise Ask(f"its glob {literal} matches too many files to check")
        words += matches
    if not words:
        if literal.startswith("-"):
            raise Ask(f"{literal} is an option spelled with a wildcard")
        return [literal]
    for word in words:
        if word.startswith("-"):
            raise Ask(f"its glob {literal} matches {word}, which the program takes for an option")
    return sorted(set(words))


def _glob(pattern: str, cwd: Path) -> list[str]:
    absolute = pattern.startswith("/")
    parts = [part for part in _split_unescaped(pattern) if part != ""]
    bases: list[tuple[str, Path]] = [("/" if absolute else "", Path("/") if absolute else cwd)]
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        following: list[tuple[str, Path]] = []
        for shown, folder in bases:
            if not _has_magic(part):
                literal = _unescape(part)
                path = folder / literal
                if last and not os.path.lexists(path):
                    continue
                following.append((shown + literal + ("" if last else "/"), path))
                continue
            regex = _pattern_regex(part)
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                continue
            for name in names:
                # A leading dot is matched only by a dot written as such (bash's rule).
                if name.startswith(".") and not _unescape(part).startswith("."):
                    continue
                if regex.fullmatch(name) and (last or (folder / name).is_dir()):
                    following.append((shown + name + ("" if last else "/"), folder / name))
        bases = following
    trailing = pattern.endswith("/")
    return [shown + ("/" if trailing else "") for shown, _ in bases]


def _split_unescaped(pattern: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            current.append(pattern[index : index + 2])
            index += 2
            continue
        if char == "/":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    parts.append("".join(current))
    return parts


def _has_magic(part: str) -> bool:
    return bool(re.search(r"(?<!\\)[*?\[]", part))


def _unescape(part: str) -> str:
    return re.sub(r"\\(.)", r"\1", part)


def _pattern_regex(part: str) -> re.Pattern[str]:
    out: list[str] = []
    index = 0
    while index < len(part):
        char = part[index]
        if char == "\\" and index + 1 < len(part):
            out.append(re.escape(part[index + 1]))
            index += 2
            continue
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            negated = part[index + 1 : index + 2] in ("!", "^")
            end = part.find("]", index + 2 if negated else index + 1)
            if end < 0:
                out.append(re.escape("["))
            else:
                body = part[index + 1 : end]
                body = body[1:] if negated else body
                escaped = body.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
                out.append(f"[{'^' if negated else ''}{escaped}]")
                index = end + 1
                continue
        else:
            out.append(re.escape(char))
        index += 1
    return re.compile("".join(out), re.DOTALL)


def parse_or_ask(name: str, program: Spec, args: list[str]) -> Parsed:
    try:
        return opt.parse(name, program, args)
    except Refusal as refusal:
        raise Ask(str(refusal)) from None


def program_place(name: str, places: Places, situation: Situation) -> None:
    """Where the shell finds `name`: a program the workspace holds could be anything."""
    for cwd in situation.cwds:
        for entry in places.path.split(os.pathsep):
            folder = Path(entry) if os.path.isabs(entry) else cwd / (entry or ".")
            candidate = folder / name
            if not (candidate.is_file() and os.access(candidate, os.X_OK)):
                continue
            try:
                resolved = symlinks.resolved(candidate)
            except (OSError, RuntimeError):
                raise Ask(f"{name} cannot be located safely") from None
            inside = resolved.is_relative_to(places.root) or candidate.is_relative_to(places.root)
            if inside and not in_protected_venv(candidate, places.root):
                raise Ask(f"{name} runs {candidate}, a program in the workspace")
            break


def in_protected_venv(path: Path, root: Path) -> bool:
    for parent in path.parents:
        if parent == root or not parent.is_relative_to(root):
            return False
        if (parent / "pyvenv.cfg").is_file():
            return True
    return False
