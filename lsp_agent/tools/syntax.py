"""The syntax guard: refuse an edit that breaks a file's syntax, never one that was broken before.

`check(path, before, after)` parses the new text with tree-sitter (the grammars of
`tree-sitter-language-pack`, chosen by file name) and, when it has syntax errors, the old text
too: an error is new when the old text has no error of the same kind on a line with the same
text. New errors make the message the model gets (line, excerpt, what is missing); none, or a
language we do not check, gives None. tree-sitter is imported on the first check, not with this
module, so the server starts without paying for it.

A large file is not parsed whole twice: the last trees are kept (`_TREES`, by text, within a
memory bound), and a text that differs from a kept one is parsed incrementally from it, told
the edited range, so tree-sitter re-reads only what changed (the next edit of a 50 000-line
file costs milliseconds).

JSONC (JSON with comments and trailing commas: `*.jsonc`, `tsconfig.json`, `.vscode/*.json`,
`devcontainer.json`, and any JSON file that already has a comment) is checked as JSON once its
trailing commas are read as spaces.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tree_sitter import Language, Node, Tree

LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".json": "json",
    ".jsonc": "jsonc",
    ".code-workspace": "jsonc",
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

JSONC_NAMES = re.compile(
    r"(^|/)(tsconfig(\.[^/]*)?\.json|jsconfig(\.[^/]*)?\.json|\.?devcontainer\.json"
    r"|\.devcontainer/.*\.json|\.vscode/[^/]*\.json|\.eslintrc\.json|\.babelrc\.json"
    r"|api-extractor\.json|tslint\.json)$"
)
"""JSON files their tools read as JSONC (comments and trailing commas allowed)."""

DISPLAY: dict[str, str] = {
    "python": "Python",
    "json": "JSON",
    "jsonc": "JSONC",
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


def language_for(path: str | PurePath, text: str | None = None) -> str | None:
    """The grammar checked for `path`, by its name; None when it is not checked.

    `jsonc` for the JSON files read as JSONC (`JSONC_NAMES`), and for a `.json` file whose
    current `text` already has a comment: whoever reads it reads JSONC.
    """
    pure = PurePath(path)
    language = LANGUAGES.get(pure.suffix.lower())
    if language == "json" and (
        JSONC_NAMES.search(pure.as_posix()) or (text is not None and _has_comment(text))
    ):
        return "jsonc"
    return language


def check(path: str | PurePath, before: str | None, after: str) -> str | None:
    """The message refusing `after` when it has syntax errors that `before` did not have.

    `before` is None for a new file (then every error counts). None when `after` is fine, the
    language is not checked, the text is too large, tree-sitter is missing or too slow.
    """
    language = language_for(path, before)
    if language is None or len(after) > MAX_BYTES:
        return None
    problems_after = problems(language, after, previous=before)
    if not problems_after:
        return None
    known: Counter[tuple[str | None, str]] = Counter()
    if before:
        for problem in problems(language, before, previous=after) or ():
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


def problems(
    language: str, text: str, *, previous: str | None = None
) -> list[SyntaxProblem] | None:
    """The syntax errors in `text`, in order; None when it could not be parsed (no grammar,
    tree-sitter missing, over the time budget).

    When a tree of `text` or of `previous` (the same file before or after an edit) is kept,
    the parse starts from it and re-reads only the edited range.
    """
    source = _as_json(text) if language == "jsonc" else text
    grammar = _grammar("json" if language == "jsonc" else language)
    if grammar is None:
        return None
    tree = _TREES.get(language, source)
    if tree is None:
        base = None
        if previous is not None:
            old_source = _as_json(previous) if language == "jsonc" else previous
            kept = _TREES.get(language, old_source)
            if kept is not None:
                base = _edited(kept, old_source, source)
        tree = _parse(grammar, source, base)
        if tree is None:
            return None
        _TREES.put(language, source, tree)
    root = tree.root_node
    if not root.has_error:
        return []
    lines = source.split("\n")
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


def parsed(language: str, text: str) -> Tree | None:
    """`text` parsed with the grammar of `language` (a kept tree of the same text reused, and
    kept for the next call); None when it cannot be parsed (no grammar, tree-sitter missing,
    over the time budget). For readers of the tree other than the guard (`definitions.py`)."""
    grammar = _grammar(language)
    if grammar is None:
        return None
    tree = _TREES.get(language, text)
    if tree is None:
        tree = _parse(grammar, text, None)
        if tree is not None:
            _TREES.put(language, text, tree)
    return tree


def _parse(grammar: Language, text: str, base: Tree | None) -> Tree | None:
    """`text` parsed, from `base` (an edited tree of a nearby text) when given; None past the
    time budget."""
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
        if base is None:
            tree = parser.parse(read, progress_callback=progress)
        else:
            tree = parser.parse(read, base, progress_callback=progress)
    except ValueError:  # what tree-sitter raises when `progress` stops the parse
        return None
    return None if timed_out else tree


def _edited(tree: Tree, old: str, new: str) -> Tree:
    """A copy of `old`'s tree told that the text between the common head and tail of `old`
    and `new` changed: what an incremental parse of `new` starts from."""
    head = _common_prefix(old, new)
    tail = _common_suffix(old, new, head)
    copy = tree.copy()
    start_byte, start_point = _byte_point(old, head)
    old_end_byte, old_end_point = _byte_point(old, len(old) - tail)
    new_end_byte, new_end_point = _byte_point(new, len(new) - tail)
    copy.edit(start_byte, old_end_byte, new_end_byte, start_point, old_end_point, new_end_point)
    return copy


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix, by binary search on slices (compared at C speed)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _common_suffix(a: str, b: str, head: int) -> int:
    """Length of the common suffix that does not reach into the first `head` characters."""
    low, high = 0, min(len(a), len(b)) - head
    while low < high:
        mid = (low + high + 1) // 2
        if a[len(a) - mid : len(a) - low] == b[len(b) - mid : len(b) - low]:
            low = mid
        else:
            high = mid - 1
    return low


def _byte_point(text: str, offset: int) -> tuple[int, tuple[int, int]]:
    """The UTF-8 byte offset of `offset`, and its (row, byte column) as tree-sitter counts."""
    row = text.count("\n", 0, offset)
    line_start = text.rfind("\n", 0, offset) + 1
    column = len(text[line_start:offset].encode("utf-8", "surrogatepass"))
    return len(text[:offset].encode("utf-8", "surrogatepass")), (row, column)


class _TreeCache:
    """The last parse trees, by language and text: a memo of pure results shared by the
    worker threads that run checks (hence the lock).

    A tree takes about 30 times its text in memory (a 1 MB Python file: ~30 MB), so the kept
    trees are bounded by the size of their texts, the oldest going first.
    """

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        """How many characters of text the kept trees may stand for, together."""
        self._trees: OrderedDict[tuple[str, int, int], tuple[str, Tree]] = OrderedDict()
        """(language, len, hash of the text) → (the text, its tree), oldest first."""
        self._chars = 0
        """The characters of the texts kept."""
        self._lock = threading.Lock()

    def get(self, language: str, text: str) -> Tree | None:
        key = (language, len(text), hash(text))
        with self._lock:
            found = self._trees.get(key)
            if found is None or found[0] != text:
                return None
            self._trees.move_to_end(key)
            return found[1]

    def put(self, language: str, text: str, tree: Tree) -> None:
        if len(text) > self.max_chars:
            return
        key = (language, len(text), hash(text))
        with self._lock:
            if key not in self._trees:
                self._chars += len(text)
            self._trees[key] = (text, tree)
            while self._chars > self.max_chars:
                _, (old, _) = self._trees.popitem(last=False)
                self._chars -= len(old)

    def clear(self) -> None:
        with self._lock:
            self._trees.clear()
            self._chars = 0


_TREES = _TreeCache(max_chars=1_500_000)
"""Room for the trees of one 40 000-line file, or of many small ones (tens of MB at most)."""


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|//[^\n]*|/\*.*?(?:\*/|\Z)|,', re.DOTALL)
_JSON_SKIP = re.compile(r"(?:\s|//[^\n]*|/\*.*?(?:\*/|\Z))*", re.DOTALL)


def _as_json(text: str) -> str:
    """JSONC read as JSON for the grammar: each trailing comma (before `]` or `}`, comments and
    whitespace between) a space, so that lines and columns stay where they are."""
    pieces: list[str] = []
    at = 0
    for match in _JSON_TOKEN.finditer(text):
        if match.group() != ",":
            continue
        after = _JSON_SKIP.match(text, match.end())
        end = after.end() if after else match.end()
        if end < len(text) and text[end] in "]}":
            pieces += [text[at : match.start()], " "]
            at = match.end()
    pieces.append(text[at:])
    return "".join(pieces)


def _has_comment(text: str) -> bool:
    """Whether JSON text has a `//` or `/* */` comment outside its strings."""
    return any(match.group().startswith("/") for match in _JSON_TOKEN.finditer(text))


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
