"""`#codebase`: the workspace searched for a prompt's terms before the model is first called.

A user who adds `#codebase` asks about the project as a whole ("where do we retry requests?").
The agent could search on its own, at the price of a model call before anything is found; this
gives it a start instead: the prompt's terms (code spans, identifiers, then the rarer words) are
searched with ripgrep, under the same exclusions as the `search` tool (`.gitignore`, `.git`,
virtualenvs, `node_modules`, `.env*`), and the files that hold the most telling terms (rare
ones weigh more than common ones) go into the user message with their matching lines. The
model is told it is a start, to be read before relied on. Files are searched as saved.
"""

from __future__ import annotations

import asyncio
import math
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
FILES_PER_TERM = 5000
"""Files listed per term at most (past it the term counts as common, and the count says +)."""
LINES_READ_PER_FILE = 50
"""Matching lines read per file shown, before the best are picked."""
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
    (ripgrep missing, stopped, failed).

    Each term's files are listed apart (one ripgrep each, at once), so a common word cannot
    crowd a rare identifier out; a file scores the weight of each term it holds (rarer terms
    weigh more, a term in its path counts again), and the best files' matching lines are read
    in one more search of those files only."""
    wanted = terms(prompt)
    if not wanted:
        text = (
            "The user added #codebase, but the prompt has no term to search the workspace "
            "for: search it yourself as the question needs."
        )
        return Found([], text, "no term to search for", 0, 0)
    listed = ", ".join(f"`{term}`" for term in wanted)
    found = await asyncio.gather(
        *(
            files.files_matching(
                workspace, _pattern([term]), max_files=FILES_PER_TERM, timeout=TIMEOUT
            )
            for term in wanted
        )
    )
    holding = {term: set(paths) for term, (paths, _) in zip(wanted, found, strict=True)}
    more = any(capped for _, capped in found)
    every = set().union(*holding.values())
    if not every and more:
        text = (
            f"The user added #codebase, but searching the workspace for the prompt's terms "
            f"({listed}) was stopped after {TIMEOUT:g} s before any file was found: search "
            "it yourself, in the folders the question is about."
        )
        return Found(wanted, text, f"stopped after {TIMEOUT:g} s", 0, 0)
    if not every:
        text = (
            f"The user added #codebase: no file in the workspace matches the prompt's terms "
            f"({listed}), outside .gitignore'd files, .git, virtualenvs, node_modules and "
            ".env files."
        )
        return Found(wanted, text, f"no matches for {', '.join(wanted)}", 0, 0)
    commonest = max(len(paths) for paths in holding.values())
    weight = {
        term: math.log2(1 + commonest / len(paths)) for term, paths in holding.items() if paths
    }

    def score(path: str) -> tuple[float, int, str]:
        held = [term for term in weight if path in holding[term]]
        named = [term for term in held if term.lower() in path.lower()]
        return (-sum(weight[term] for term in held + named), -len(held), path)

    shown = sorted(every, key=score)[:FILES_SHOWN]
    lines = await files.matches(
        workspace,
        _pattern(wanted),
        paths=shown,
        max_matches=FILES_SHOWN * LINES_READ_PER_FILE,
        timeout=TIMEOUT,
    )
    by_file: dict[str, list[tuple[int, str, float]]] = {path: [] for path in shown}
    for path, number, line in lines:
        lowered = line.lower()
        worth = sum(w for term, w in weight.items() if term.lower() in lowered)
        by_file.setdefault(path, []).append((number, line, worth))
    blocks = []
    count = 0
    for path in shown:
        best = sorted(by_file[path], key=lambda match: (-match[2], match[0]))[:LINES_PER_FILE]
        picked = sorted(best, key=lambda match: match[0])
        count += len(picked)
        body = "\n".join(f"  {number}: {line.strip()}" for number, line, _ in picked)
        held = ", ".join(term for term in wanted if path in holding[term])
        blocks.append(f"{path} (has {held})" + (f"\n{body}" if body else ""))
    others = len(every) - len(shown)
    text = (
        f"The user added #codebase: the workspace was searched for the prompt's terms "
        f"({listed}) before this turn. The files that match the most telling terms, with "
        "their matching lines (a start: read a file before relying on it, and search further "
        "as the question needs):\n"
        + "\n".join(blocks)
        + (f"\n… {others}{'+' if more else ''} more files match" if others else "")
    )
    total = f"{len(every)}{'+' if more else ''}"
    matching = "1 file matches" if total == "1" else f"{total} files match"
    summary = f"{matching} {', '.join(wanted)}; {len(shown)} shown"
    return Found(wanted, text, summary, len(shown), count)


def _pattern(wanted: list[str]) -> str:
    """A case-insensitive ripgrep pattern for any of the terms, each taken literally."""
    return "(?i)" + "|".join(re.escape(term) for term in wanted)
