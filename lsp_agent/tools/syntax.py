"""The syntax guard: refuse an edit that breaks a file's syntax, never one that was broken before.

`check(path, before, after)` parses the new text with tree-sitter (the grammars of
`tree-sitter-language-pack`, chosen by file extension) and, when it has syntax errors, the old
text too: an error is new when the old text has no error of the same kind on a line with the same
text. New errors make the message the model gets (line, excerpt, what is missing); none, or a
language we do not check, gives None. tree-sitter is imported on the first check, not with this
module, so the server starts without paying for it.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Language, Node

LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".json": "json",
    ".jsonc": "json",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".lua": "lua",
    ".rs": "rust",
    ".go": "go",
    ".java": "java",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
}
"""File extension (lower case) → tree-sitter-language-pack grammar. Others are not checked.

A false alarm blocks a valid edit, so only grammars that parsed real code without spurious
errors are here. Left out after such a trial: C and C++ (macros such as `local void f()` parse
as errors), CSS (unquoted `url(...)`), HTML (templates, `<?xml`), shell (some `$(...)` forms).
"""

DISPLAY: dict[str, str] = {
    "python": "Python",
    "json": "JSON",
    "toml": "TOML",
    "yaml": "YAML",
    "javascript": "JavaScript",
    "typescript": "TypeScript",
    "tsx": "TSX",
    "lua": "Lua",
    "rust": "Rust",
    "go": "Go",
    "java": "Java",
    "csharp": "C#",
    "ruby": "Ruby",
    "php": "PHP",
}

MAX_BYTES = 2 * 1024 * 1024
"""Larger texts are not checked: the guard must stay cheap."""
TIME_BUDGET_S = 1.0
"""A parse that takes longer is abandoned and the text passes."""
_EXCERPT_CHARS = 120
_MAX_REPORTED = 3


@dataclass(frozen=True)
class SyntaxProblem:
    """One syntax error tree-sitter found."""

    line: int
    """1-based."""
    column: int
    """1-based, in characters."""
    missing: str | None
    """The token tree-sitter had to invent (`)`, `end`, …), or None for unexpected text."""
    text: str
    """The line's text, stripped: with `missing`, the key that pairs old and new errors."""
    unexpected: str
    """The start of the text tree-sitter could not place (empty for a missing token)."""


def language_for(path: str | PurePath) -> str | None:
    """The grammar checked for `path`, by its extension; None when it is not checked."""
    return LANGUAGES.get(PurePath(path).suffix.lower())


def check(path: str | PurePath, before: str | None, after: str) -> str | None:
    """The message refusing `after` when it has syntax errors that `before` did not have.

    `before` is None for a new file (then every error counts). None when `after` is fine, the
    language is not checked, the text is too large, tree-sitter is missing or too slow.
    """
    language = language_for(path)
    if language is None or len(after) > MAX_BYTES:
        return None
    problems_after = problems(language, after)
    if not problems_after:
        return None
    known: Counter[tuple[str | None, str]] = Counter()
    if before:
        for problem in problems(language, before) or ():
            known[(problem.missing, problem.text)] += 1
    new: list[SyntaxProblem] = []
    for problem in problems_after:
        key = (problem.missing, problem.text)
        if known[key]:
            known[key] -= 1
        else:
            new.append(problem)
    if not new:
        return None
    return _message(PurePath(path).as_posix(), DISPLAY.get(language, language), new)


def problems(language: str, text: str) -> list[SyntaxProblem] | None:
    """The syntax errors in `text`, in order; None when it could not be parsed (no grammar,
    tree-sitter missing, over the time budget)."""
    grammar = _grammar(language)
    if grammar is None:
        return None
    from tree_sitter import Parser

    data = text.encode("utf-8", "surrogatepass")
    deadline = time.monotonic() + TIME_BUDGET_S
    timed_out = False

    def read(offset: int, _point: object) -> bytes:
        return data[offset : offset + 65536]

    def progress(_offset: int, _has_error: bool) -> bool:
        nonlocal timed_out
        timed_out = time.monotonic() > deadline
        return timed_out

    # A parser per call: parsers are not thread-safe, and checks run in worker threads.
    parser = Parser(grammar)
    try:
        tree = parser.parse(read, progress_callback=progress)
    except ValueError:  # what tree-sitter raises when `progress` stops the parse
        return None
    if timed_out or tree is None:
        return None
    root = tree.root_node
    if not root.has_error:
        return []
    lines = text.split("\n")
    found: list[SyntaxProblem] = []
    for node in _error_nodes(root):
        row, byte_column = node.start_point
        line = lines[row] if row < len(lines) else ""
        prefix = line.encode("utf-8", "surrogatepass")[:byte_column]
        column = len(prefix.decode("utf-8", "replace")) + 1
        if node.is_missing:
            found.append(SyntaxProblem(row + 1, column, node.type, line.strip(), ""))
        else:
            raw = (node.text or b"").decode("utf-8", "replace")
            found.append(
                SyntaxProblem(row + 1, column, None, line.strip(), raw.split("\n", 1)[0][:40])
            )
    return found


@functools.cache
def _grammar(language: str) -> Language | None:
    """The tree-sitter grammar, loaded once per process; None when it cannot be loaded."""
    try:
        from tree_sitter_language_pack import get_language
    except ImportError:
        return None
    try:
        return get_language(language)  # type: ignore[arg-type]
    except (LookupError, OSError, ValueError):
        return None


def _error_nodes(root: Node) -> Iterator[Node]:
    """ERROR and MISSING nodes, outermost only, in document order."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            yield node
            continue
        if node.has_error:
            stack.extend(reversed(node.children))


def _message(path: str, language: str, new: list[SyntaxProblem]) -> str:
    first = new[0]
    more = f" (and {len(new) - 1} more)" if len(new) > 1 else ""
    lines = [
        f"refused: this change would introduce a {language} syntax error in {path} at line "
        f"{first.line}{more}; nothing was changed. Fix the code and send the edit again:"
    ]
    for problem in new[:_MAX_REPORTED]:
        excerpt = problem.text
        if len(excerpt) > _EXCERPT_CHARS:
            excerpt = excerpt[: _EXCERPT_CHARS - 1] + "…"
        if problem.missing is not None:
            what = f"missing {problem.missing!r}"
        elif problem.unexpected.strip():
            what = f"unexpected {problem.unexpected.strip()!r}"
        else:
            what = "cannot be parsed"
        lines.append(f"  line {problem.line}, column {problem.column}: {what}: {excerpt}")
    return "\n".join(lines)
