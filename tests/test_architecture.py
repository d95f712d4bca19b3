"""The house as ARCHITECTURE.md draws it: which folder may import which, and only `lsp/` speaks
LSP. Read from the code's own imports (lazy and type-only ones included), so the document cannot
drift from the tree."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lsp_agent"

LAYERS: dict[str, set[str]] = {
    "__main__": {"terminal"},
    "terminal": {"lsp", "agent", "tools", "model", "session", "safety", "config", "errors",
                 "port", "text"},
    "lsp": {"agent", "tools", "changes", "session", "safety", "config", "errors", "port", "text"},
    "agent": {"tools", "context", "changes", "model", "safety", "session", "config", "errors",
              "messages", "port", "text"},
    "tools": {"context", "safety", "config", "errors", "messages", "port", "text"},
    "context": {"changes", "model", "safety", "config", "messages"},
    "changes": {"safety", "git", "text"},
    "model": {"errors", "messages"},
    "session": {"errors"},
    "safety": {"errors", "git"},
    "testing": {"port"},
    "config": {"errors"},
}  # fmt: skip
"""Each part of the package and the parts it may import (a part: a folder, or a top module).
What is not listed imports nothing of the package but `lsp_agent.__version__`."""

SPEAKS_LSP = {"lsp"}
"""The only part that may import pygls or lsprotocol."""


def part_of(module: str) -> str:
    """`lsp_agent.tools.belt` → `tools`; `lsp_agent.config` → `config`."""
    return module.split(".")[1]


def imports(path: Path) -> Iterator[str]:
    """Every module `path` imports, at any depth of the file (lazy imports included)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "lsp_agent":
                yield from (f"lsp_agent.{alias.name}" for alias in node.names)
            else:
                yield node.module


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        yield ".".join(relative.parts), path


def test_every_part_imports_only_the_parts_below_it() -> None:
    wrong = []
    for module, path in modules():
        if module.count(".") == 0:
            continue  # lsp_agent/__init__.py
        part = part_of(module)
        allowed = LAYERS.get(part, set())
        for imported in imports(path):
            if not imported.startswith("lsp_agent.") or imported == "lsp_agent.__version__":
                continue
            target = part_of(imported)
            if target != part and target not in allowed:
                wrong.append(f"{module} imports {imported}")
    assert wrong == []


def test_only_the_lsp_adapter_imports_pygls_or_lsprotocol() -> None:
    wrong = [
        f"{module} imports {imported}"
        for module, path in modules()
        if module.count(".") and part_of(module) not in SPEAKS_LSP
        for imported in imports(path)
        if imported.split(".")[0] in ("pygls", "lsprotocol")
    ]
    assert wrong == []


def test_the_layers_have_no_circle() -> None:
    seen: set[str] = set()
    visiting: set[str] = set()

    def visit(part: str) -> None:
        assert part not in visiting, f"a circle through {part}"
        if part in seen:
            return
        visiting.add(part)
        for below in LAYERS.get(part, set()):
            visit(below)
        visiting.discard(part)
        seen.add(part)

    for part in LAYERS:
        visit(part)
