"""Code actions: lsp-agent in the one menu every LSP client already has.

Helix's `space a`, eglot's `eglot-code-actions`, Neovim's `vim.lsp.buf.code_action`, Zed, Sublime,
VS Code's light bulb: `textDocument/codeAction` offers the actions of the `codeActions` setting for
the cursor or selection, and one "fix this problem" per diagnostic the client sends in the
request's context. Choosing one runs `lspAgent.start` with the action's prompt, the file and the
range. An action asked at the cursor (Neovim and lsp-mode send an empty range, Helix the one
character under its block cursor) is about the code there: its range grows to the enclosing
function, method or class, or the lines around the cursor (`tools/definitions.py`), so that
the model gets code, not "line 6" and nothing. Nothing else is done until one is chosen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from lsprotocol import types

from lsp_agent.lsp import names, positions
from lsp_agent.text import line_content, line_starts, split_lines
from lsp_agent.tools import definitions

MAX_DIAGNOSTIC_ACTIONS = 3
"""Problems offered a "fix" action each, at most (the first ones the client sent)."""


QUICK_FIX = types.CodeActionKind.QuickFix.value
REFACTOR = types.CodeActionKind.Refactor.value
KINDS = (types.CodeActionKind.QuickFix, types.CodeActionKind.Refactor)
"""The kinds of code action lsp-agent offers."""


SELECTION_CHARS = 4000
"""How much of the code a prompt's `{selection}` carries (the agent can read the rest)."""


def code_actions(
    params: types.CodeActionParams,
    templates: Sequence[Mapping[str, str]],
    rel: str,
    text: str,
    encoding: str,
) -> list[types.CodeAction]:
    """The actions for a code-action request on the file `rel`, whose text is `text` (positions
    in `encoding`)."""
    context = params.context
    if context.only is not None and not _wanted([_kind(kind) for kind in context.only]):
        return []
    uri = params.text_document.uri
    diagnostics = list(context.diagnostics)[:MAX_DIAGNOSTIC_ACTIONS]
    here = about(text, params.range, encoding, rel)
    selected = _text_of(text, here, encoding)
    actions: list[types.CodeAction] = []
    for template in templates:
        prompt = template["prompt"]
        if "{diagnostic}" in prompt:
            for diagnostic in diagnostics:
                at = about(text, diagnostic.range, encoding, rel)
                filled = _fill(
                    prompt,
                    rel,
                    diagnostic.range.start.line + 1,
                    _text_of(text, at, encoding),
                    _describe(diagnostic),
                )
                title = f"{template['title']}: {_first_line(diagnostic.message)}"
                actions.append(_action(title, filled, uri, at, [diagnostic]))
            continue
        filled = _fill(prompt, rel, params.range.start.line + 1, selected, "")
        actions.append(_action(template["title"], filled, uri, here))
    return actions


def about(text: str, range_: types.Range, encoding: str, rel: str) -> types.Range:
    """What an action on `range_` of `text` is about: the range when it selects code; at the
    cursor (nothing selected, or one character), the whole lines of the enclosing definition
    or the lines around the cursor."""
    start, end = range_.start, range_.end
    try:
        selected = positions.text_range(
            text, (start.line, start.character), (end.line, end.character), encoding
        )
        starts = line_starts(text)
        column = positions.offset(text, starts, start.line, start.character, encoding)
    except ValueError:  # a position inside a character: the range as it came
        return range_
    if len(selected.replace("\r\n", "\n")) > 1:
        return range_
    line = min(start.line, len(starts) - 1)
    lines = definitions.around(rel, text, line, column - starts[line])
    all_lines = split_lines(text) or [""]
    last = min(lines.last, len(all_lines) - 1)
    return types.Range(
        start=types.Position(line=lines.first, character=0),
        end=types.Position(
            line=last, character=positions.code_units(line_content(all_lines[last]), encoding)
        ),
    )


def _text_of(text: str, range_: types.Range, encoding: str) -> str:
    start, end = range_.start, range_.end
    try:
        return positions.text_range(
            text, (start.line, start.character), (end.line, end.character), encoding
        )[:SELECTION_CHARS]
    except ValueError:
        return ""


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
