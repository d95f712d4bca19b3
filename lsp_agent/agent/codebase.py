"""`#codebase`: the workspace searched for a prompt's terms before the model is first called.

A user who adds `#codebase` asks about the project as a whole ("where do we retry requests?").
The agent could search on its own, at the price of a model call before anything is found; this
gives it a start instead: the prompt's terms (code spans, identifiers, then the rarer words) are
searched once with ripgrep, under the same exclusions as the `search` tool (`.gitignore`, `.git`,
virtualenvs, `node_modules`, `.env*`), and the files that match the most terms go into the user
message with their matching lines. The model is told it is a start, to be read before relied on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lsp_agent.tools import files
from lsp_agent.tools.workspace import Workspace

TERMS = 6
"""Terms searched at most."""
FILES_SHOWN = 8
"""Files shown at most, those matching the most terms first."""
LINES_PER_FILE = 4
"""Matching lines shown per file at most."""
MATCHES_READ = 400
"""Matches read from ripgrep before ranking."""
TIMEOUT = 10.0
"""Seconds the search may take; the turn goes on without it after that."""

_ASKED = re.compile(r"(?:^|\s)#codebase(?=\s|$)")
_CODE_SPAN = re.compile(r"`([^`\n]{2,80})`")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-/]*[A-Za-z0-9_]")
_CODE_LIKE = re.compile(r"[_./]|[a-z][A-Z]|[A-Za-z][0-9]")
_STOP = frozenset(
    (
        "about",
        "call",
        "calls",
        "called",
        "above",
        "after",
        "again",
        "against",
        "also",
        "another",
        "around",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "cannot",
        "could",
        "does",
        "doing",
        "done",
        "down",
        "during",
        "each",
        "every",
        "find",
        "from",
        "further",
        "have",
        "having",
        "here",
        "into",
        "itself",
        "just",
        "like",
        "make",
        "made",
        "more",
        "most",
        "much",
        "must",
        "need",
        "needs",
        "once",
        "only",
        "other",
        "over",
        "please",
        "same",
        "should",
        "show",
        "some",
        "such",
        "than",
        "that",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "under",
        "until",
        "used",
        "uses",
        "using",
        "very",
        "want",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "whom",
        "will",
        "with",
        "within",
        "without",
        "would",
        "your",
        "code",
        "file",
        "files",
        "function",
        "functions",
        "method",
        "methods",
        "class",
        "classes",
        "project",
        "workspace",
        "codebase",
        "repo",
        "repository",
        "change",
        "changes",
        "adds",
        "fixes",
        "write",
        "tell",
        "explain",
        "look",
        "work",
        "works",
        "working",
        "thing",
        "things",
    )
)
"""Words too common to search for (shorter ones are never searched)."""


@dataclass(frozen=True)
class Found:
    """What the search found, for the model (`text`) and the editor (`summary`)."""

    terms: list[str]
    text: str
    summary: str
    files: int
    lines: int


def asked(prompt: str) -> bool:
    """Whether the prompt says `#codebase` as a word: any client's user may type it."""
    return _ASKED.search(prompt) is not None


def terms(prompt: str) -> list[str]:
    """The prompt's terms to search, most telling first: code spans, identifiers (with `_`,
    `.`, `/`, camelCase or digits), then words of four letters or more that are not common
    English or the vocabulary of asking for code. Case-insensitively unique."""
    prompt = prompt.replace("#codebase", " ")
    spans = [span.strip() for span in _CODE_SPAN.findall(prompt)]
    words = _WORD.findall(_CODE_SPAN.sub(" ", prompt))
    code = [word for word in words if _CODE_LIKE.search(word)]
    plain = [word for word in words if len(word) >= 4 and word.lower() not in _STOP]
    chosen: list[str] = []
    seen: set[str] = set()
    for term in [*spans, *code, *plain]:
        key = term.lower()
        if term and key not in seen:
            seen.add(key)
            chosen.append(term)
    return chosen[:TERMS]


async def search(workspace: Workspace, prompt: str) -> Found:
    """Search the workspace for the prompt's terms; raises `ToolError` as the search tool does
    (ripgrep missing, stopped, failed)."""
    wanted = terms(prompt)
    if not wanted:
        text = (
            "The user added #codebase, but the prompt has no term to search the workspace "
            "for: search it yourself as the question needs."
        )
        return Found([], text, "no term to search for", 0, 0)
    pattern = "(?i)" + "|".join(re.escape(term) for term in wanted)
    found = await files.matches(workspace, pattern, max_matches=MATCHES_READ, timeout=TIMEOUT)
    listed = ", ".join(f"`{term}`" for term in wanted)
    if not found:
        text = (
            f"The user added #codebase: no file in the workspace matches the prompt's terms "
            f"({listed}), outside .gitignore'd files, .git, virtualenvs, node_modules and "
            ".env files."
        )
        return Found(wanted, text, f"no matches for {', '.join(wanted)}", 0, 0)
    lowered = [term.lower() for term in wanted]
    by_file: dict[str, list[tuple[int, str, set[str]]]] = {}
    for path, number, line in found:
        hit = {term for term in lowered if term in line.lower()}
        by_file.setdefault(path, []).append((number, line, hit))

    def rank(path: str) -> tuple[int, int, str]:
        matched = set().union(*(hit for _, _, hit in by_file[path]))
        matched |= {term for term in lowered if term in path.lower()}
        return (-len(matched), -len(by_file[path]), path)

    shown = sorted(by_file, key=rank)[:FILES_SHOWN]
    blocks = []
    lines = 0
    for path in shown:
        best = sorted(by_file[path], key=lambda match: (-len(match[2]), match[0]))
        picked = sorted(best[:LINES_PER_FILE], key=lambda match: match[0])
        lines += len(picked)
        more = len(by_file[path]) - len(picked)
        body = "\n".join(f"  {number}: {line.strip()}" for number, line, _ in picked)
        blocks.append(f"{path}\n{body}" + (f"\n  … {more} more matching lines" if more else ""))
    others = len(by_file) - len(shown)
    text = (
        f"The user added #codebase: the workspace was searched for the prompt's terms "
        f"({listed}) before this turn. The files that match the most terms, with their "
        "matching lines (a start: read a file before relying on it, and search further as "
        "the question needs):\n"
        + "\n".join(blocks)
        + (f"\n… {others} more files match" if others else "")
    )
    matching = f"{len(by_file)} files match" if len(by_file) != 1 else "1 file matches"
    summary = f"{matching} {', '.join(wanted)}; {len(shown)} shown"
    return Found(wanted, text, summary, len(shown), lines)
