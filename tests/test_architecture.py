"""The house as ARCHITECTURE.md draws it: which folder may import which, and nothing outside the
standard library and the declared dependencies. Read from the code's own imports (lazy and
type-only ones included), so the document cannot drift from the tree."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "lsp_agent"

LAYERS: dict[str, set[str]] = {
    "__main__": {"terminal"},
    "terminal": {"lsp", "agent", "tools", "mcp", "model", "session", "safety", "config",
                 "errors", "port", "text"},
    "lsp": {"agent", "tools", "mcp", "changes", "session", "safety", "config", "errors", "port",
            "text"},
    "agent": {"tools", "mcp", "context", "changes", "model", "safety", "session", "config",
              "errors", "messages", "port", "text"},
    "tools": {"mcp", "context", "safety", "config", "errors", "messages", "port", "text"},
    "mcp": {"context", "safety", "session", "config"},
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


EXTRAS = {"mcp": "mcp"}
"""Parts that may import what an extra of the package declares (`lsp-agent[mcp]`): nothing
else may, since a user without the extra does not have it."""


def test_the_package_imports_only_the_standard_library_and_its_dependencies() -> None:
    """A module the package imports must come with `pip install lsp-agent`: a test-only package
    (pytest-lsp, hypothesis) would fail a user's install. The MCP part may import its extra's
    packages as well (`lsp-agent[mcp]`)."""
    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    declared = names_of(pyproject["project"]["dependencies"])
    extras = pyproject["project"].get("optional-dependencies", {})
    distributions = importlib.metadata.packages_distributions()
    wrong = []
    for module, path in modules():
        part = part_of(module) if module.count(".") else ""
        allowed = declared | names_of(extras.get(EXTRAS.get(part, ""), []))
        for imported in imports(path):
            top = imported.split(".")[0]
            if top in sys.stdlib_module_names or top in ("lsp_agent", "__future__"):
                continue
            names = {d.lower().replace("_", "-") for d in distributions.get(top, [top])}
            if not names & allowed:
                wrong.append(f"{module} imports {imported} ({', '.join(sorted(names))})")
    assert wrong == []
    # The check reads the real list, and the stack the project is built on is in it.
    assert {"pygls", "lsprotocol", "httpx", "watchdog"} <= declared
    assert "mcp" in names_of(extras.get("mcp", []))


def names_of(requirements: list[str]) -> set[str]:
    """The distributions a list of requirements names."""
    return {
        re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        for requirement in requirements
    }


STACK = {
    "pygls": "lsp",
    "lsprotocol": "lsp",
    "cattrs": "lsp",
    "httpx": "model",
    "watchdog": "changes",
    "mcp": "mcp",
    "mcp_types": "mcp",
    "httpx2": "mcp",
    "anyio": "mcp",
    "jsonschema": "mcp",
}
"""Each library of the stack and the one part that speaks it: the agent core never imports pygls
(a method on `EditorPort` is what it needs), nothing but the model's client speaks HTTP, nothing
but the change tracker watches files, nothing but `mcp/` touches the MCP SDK (an extra: imported
anywhere else, a user without it could not even start) and what it brings."""


def test_each_library_of_the_stack_is_spoken_by_one_part() -> None:
    wrong = []
    for module, path in modules():
        for imported in imports(path):
            owner = STACK.get(imported.split(".")[0])
            if owner is not None and (module.count(".") == 0 or part_of(module) != owner):
                wrong.append(f"{module} imports {imported} (only {owner}/ may)")
    assert wrong == []


def private_imports(path: Path) -> Iterator[str]:
    """What `path` imports of another package's private parts: a module or a name that starts
    with an underscore, or a `*_c` module (a C extension's internals, as watchdog's
    `inotify_c`)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules_named = [alias.name for alias in node.names]
            names: list[str] = []
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules_named = [node.module]
            names = [alias.name for alias in node.names]
        else:
            continue
        for module in modules_named:
            parts = module.split(".")
            if parts[0] in sys.stdlib_module_names or parts[0] in ("lsp_agent", "__future__"):
                continue
            private = [p for p in parts if p.startswith("_") or p.endswith("_c")]
            private += [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private:
                yield f"{module}: {', '.join(private)}"


def test_no_library_is_used_through_its_private_parts(tmp_path: Path) -> None:
    """Public APIs only: a patch release may move what a library keeps to itself (watchdog 7.1.1
    changed the inotify internals a subclass of ours relied on, and change tracking stopped)."""
    wrong = [
        f"{module} imports {found}" for module, path in modules() for found in private_imports(path)
    ]
    assert wrong == []
    # And the check sees such imports where they are.
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os._x\n"
        "from watchdog.observers.inotify_c import InotifyFD\n"
        "from pygls.protocol import _private, JsonRPCProtocol\n"
        "import httpx._transports.default\n"
        "from lsprotocol import types\n",
        encoding="utf-8",
    )
    assert list(private_imports(sample)) == [
        "watchdog.observers.inotify_c: inotify_c",
        "pygls.protocol: _private",
        "httpx._transports.default: _transports",
    ]


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
