"""Code actions: lsp-agent in the one menu every LSP client already has.

Helix's `space a`, eglot's `eglot-code-actions`, Neovim's `vim.lsp.buf.code_action`, Zed, Sublime,
VS Code's light bulb: `textDocument/codeAction` offers the actions of the `codeActions` setting for
the cursor or selection, and one "fix this problem" per diagnostic the client sends in the
request's context. Choosing one runs `lspAgent.start` with the action's prompt, the file and the
range. Nothing is done until one is chosen: building the list costs a few string formats.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lsp_agent.lsp import names

MAX_DIAGNOSTIC_ACTIONS = 3
"""Problems offered a "fix" action each, at most (the first ones the client sent)."""


QUICK_FIX = "quickfix"
REFACTOR = "refactor"
KINDS = (QUICK_FIX, REFACTOR)
"""The kinds of code action lsp-agent offers (`CodeActionKind`s)."""


def code_actions(
    params: dict[str, Any],
    templates: Sequence[Mapping[str, str]],
    rel: str,
    selected: str,
) -> list[dict[str, Any]]:
    """The actions for a code-action request (its params, as `protocol.PARAMS` checked them)
    on the file `rel` (`selected`: its text in the request's range)."""
    context = params["context"]
    only = context.get("only")
    if only is not None and not _wanted(only):
        return []
    uri = params["textDocument"]["uri"]
    range_ = params["range"]
    line = range_["start"]["line"] + 1
    diagnostics = list(context["diagnostics"])[:MAX_DIAGNOSTIC_ACTIONS]
    actions: list[dict[str, Any]] = []
    for template in templates:
        prompt = template["prompt"]
        if "{diagnostic}" in prompt:
            for diagnostic in diagnostics:
                at = diagnostic["range"]
                text = _fill(prompt, rel, at["start"]["line"] + 1, selected, _describe(diagnostic))
                title = f"{template['title']}: {_first_line(diagnostic['message'])}"
                actions.append(_action(title, text, uri, at, [diagnostic], quickfix=True))
            continue
        text = _fill(prompt, rel, line, selected, "")
        actions.append(_action(template["title"], text, uri, range_))
    return actions


def _action(
    title: str,
    prompt: str,
    uri: str,
    range_: dict[str, Any],
    diagnostics: list[dict[str, Any]] | None = None,
    *,
    quickfix: bool = False,
) -> dict[str, Any]:
    start, end = range_["start"], range_["end"]
    argument = {
        "prompt": prompt,
        "uri": uri,
        "range": {
            "start": {"line": start["line"], "character": start["character"]},
            "end": {"line": end["line"], "character": end["character"]},
        },
    }
    action: dict[str, Any] = {"title": title, "kind": QUICK_FIX if quickfix else REFACTOR}
    if diagnostics is not None:
        action["diagnostics"] = diagnostics
    action["command"] = {"title": title, "command": names.START, "arguments": [argument]}
    return action


def _wanted(only: Sequence[str]) -> bool:
    """Whether a request restricted to `only` kinds can take ours (quick fixes, refactors)."""
    return any(kind == "" or any(o.startswith(kind) for o in KINDS) for kind in only)


def _fill(template: str, rel: str, line: int, selected: str, diagnostic: str) -> str:
    values = {"file": rel, "line": str(line), "selection": selected, "diagnostic": diagnostic}
    text = template
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def _describe(diagnostic: dict[str, Any]) -> str:
    start = diagnostic["range"]["start"]
    where = f"line {start['line'] + 1}, column {start['character'] + 1}"
    source = f"{diagnostic['source']}: " if diagnostic.get("source") else ""
    code = f" [{diagnostic['code']}]" if diagnostic.get("code") is not None else ""
    return f"{source}{diagnostic['message']}{code} ({where})"


def _first_line(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= 60 else first[:57] + "..."


def relative(path: Path, roots: Sequence[Path]) -> str:
    """`path` as the prompt names it: relative to its workspace folder when it is in one."""
    for root in sorted(roots, key=lambda r: len(r.parts), reverse=True):
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return str(path)
