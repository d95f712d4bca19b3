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

from lsprotocol import types

from lsp_agent.lsp import names

MAX_DIAGNOSTIC_ACTIONS = 3
"""Problems offered a "fix" action each, at most (the first ones the client sent)."""


QUICK_FIX = types.CodeActionKind.QuickFix.value
REFACTOR = types.CodeActionKind.Refactor.value
KINDS = (types.CodeActionKind.QuickFix, types.CodeActionKind.Refactor)
"""The kinds of code action lsp-agent offers."""


def code_actions(
    params: types.CodeActionParams,
    templates: Sequence[Mapping[str, str]],
    rel: str,
    selected: str,
) -> list[types.CodeAction]:
    """The actions for a code-action request on the file `rel` (`selected`: its text in the
    request's range)."""
    context = params.context
    if context.only is not None and not _wanted([_kind(kind) for kind in context.only]):
        return []
    uri = params.text_document.uri
    line = params.range.start.line + 1
    diagnostics = list(context.diagnostics)[:MAX_DIAGNOSTIC_ACTIONS]
    actions: list[types.CodeAction] = []
    for template in templates:
        prompt = template["prompt"]
        if "{diagnostic}" in prompt:
            for diagnostic in diagnostics:
                at = diagnostic.range
                text = _fill(prompt, rel, at.start.line + 1, selected, _describe(diagnostic))
                title = f"{template['title']}: {_first_line(diagnostic.message)}"
                actions.append(_action(title, text, uri, at, [diagnostic]))
            continue
        text = _fill(prompt, rel, line, selected, "")
        actions.append(_action(template["title"], text, uri, params.range))
    return actions


def _action(
    title: str,
    prompt: str,
    uri: str,
    range_: types.Range,
    diagnostics: list[types.Diagnostic] | None = None,
) -> types.CodeAction:
    start, end = range_.start, range_.end
    argument = {
        "prompt": prompt,
        "uri": uri,
        "range": {
            "start": {"line": start.line, "character": start.character},
            "end": {"line": end.line, "character": end.character},
        },
    }
    return types.CodeAction(
        title=title,
        kind=types.CodeActionKind.QuickFix if diagnostics else types.CodeActionKind.Refactor,
        diagnostics=diagnostics,
        command=types.Command(title=title, command=names.START, arguments=[argument]),
    )


def _kind(kind: types.CodeActionKind | str) -> str:
    return kind.value if isinstance(kind, types.CodeActionKind) else kind


def _wanted(only: Sequence[str]) -> bool:
    """Whether a request restricted to `only` kinds can take ours (quick fixes, refactors)."""
    ours = (QUICK_FIX, REFACTOR)
    return any(kind == "" or any(o.startswith(kind) for o in ours) for kind in only)


def _fill(template: str, rel: str, line: int, selected: str, diagnostic: str) -> str:
    values = {"file": rel, "line": str(line), "selection": selected, "diagnostic": diagnostic}
    text = template
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def _describe(diagnostic: types.Diagnostic) -> str:
    start = diagnostic.range.start
    where = f"line {start.line + 1}, column {start.character + 1}"
    source = f"{diagnostic.source}: " if diagnostic.source else ""
    code = f" [{diagnostic.code}]" if diagnostic.code is not None else ""
    return f"{source}{diagnostic.message}{code} ({where})"


def _first_line(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= 60 else first[:57] + "..."


def relative(path: Path, roots: Sequence[Path]) -> str:
    """`path` as the prompt names it: relative to its workspace folder when it is in one."""
    for root in sorted(roots, key=lambda r: len(r.parts), reverse=True):
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return str(path)
