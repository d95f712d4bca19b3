"""The code around a place in a file: the innermost function, method or class that holds it.

A code action asked at the cursor (an empty range, or the one character under a block cursor)
is about the code there, not about nothing: `around(path, text, line, column)` gives the lines
of the innermost definition that holds that place, read from the tree-sitter tree the syntax
guard also uses (`syntax.parsed`), or the lines around it when no definition holds it, the
language has no grammar here, or the definition is too long to send whole. Pure but for the
kept trees.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING

from lsp_agent.tools import syntax

if TYPE_CHECKING:
    from tree_sitter import Node

DEFINITIONS = frozenset(
    {
        # Python
        "function_definition",
        "class_definition",
        "decorated_definition",
        # JavaScript, TypeScript
        "function_declaration",
        "generator_function_declaration",
        "method_definition",
        "class_declaration",
        "abstract_class_declaration",
        "interface_declaration",
        "enum_declaration",
        # Rust
        "function_item",
        "impl_item",
        "trait_item",
        "struct_item",
        "enum_item",
        "mod_item",
        # Go
        "method_declaration",
        "type_declaration",
        # Java, C#
        "constructor_declaration",
        "record_declaration",
        "struct_declaration",
        # Ruby
        "method",
        "singleton_method",
        "class",
        "module",
        # PHP
        "trait_declaration",
    }
)
"""Node types that are a named function, method or class in the grammars the guard loads
(`syntax.LANGUAGES`); the same name means the same in each."""

NAMED_VALUES = frozenset({"arrow_function", "function_expression", "function_definition"})
"""Anonymous functions that count as definitions when they are given a name
(`const f = () => …`, `M.f = function() … end`): the statement that names them is the
definition."""

NAMING = frozenset(
    {"variable_declarator", "lexical_declaration", "variable_declaration", "assignment_statement"}
)

MAX_LINES = 200
"""A definition longer than this is not sent whole (a large class around a blank line): the
lines around the place are."""

AROUND = 10
"""Lines taken above and below the place when no definition is sent."""


@dataclass(frozen=True)
class Lines:
    """A span of whole lines, 0-based and inclusive."""

    first: int
    last: int
    definition: bool
    """A function, method or class; else the lines around the place."""


def around(path: str | PurePath, text: str, line: int, column: int = 0) -> Lines:
    """The lines of the innermost definition of `text` (the file `path`) that holds the place
    (`line`, 0-based; `column` in characters), or the lines around it."""
    found = _definition(path, text, line, column)
    if found is not None and found.last - found.first < MAX_LINES:
        return found
    count = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
    place = min(max(line, 0), count - 1)
    return Lines(max(0, place - AROUND), min(count - 1, place + AROUND), definition=False)


def _definition(path: str | PurePath, text: str, line: int, column: int) -> Lines | None:
    language = syntax.language_for(path, text)
    if language is None or len(text) > syntax.MAX_BYTES:
        return None
    tree = syntax.parsed(language, text)
    if tree is None:
        return None
    lines = text.split("\n")
    if not 0 <= line < len(lines):
        return None
    encoded = lines[line].encode("utf-8", "surrogatepass")
    # On the character at `column`, or the line's last one when the place is past its end.
    prefix = len(lines[line][:column].encode("utf-8", "surrogatepass"))
    byte_column = min(prefix, max(0, len(encoded.rstrip(b"\r")) - 1))
    node: Node | None = tree.root_node.descendant_for_point_range(
        (line, byte_column), (line, byte_column)
    )
    while node is not None and node.parent is not None:  # the whole file is no definition
        named = _named(node)
        if named is not None:
            return Lines(named.start_point[0], _last_line(named), definition=True)
        node = node.parent
    return None


def _named(node: Node) -> Node | None:
    """The definition `node` is part of at its own level (with its decorators, or the
    statement that names an anonymous function), or None when it is none."""
    if not node.is_named:  # a keyword (`class`, `module`) is not the definition it opens
        return None
    if node.type in DEFINITIONS:
        parent = node.parent
        if parent is not None and parent.type == "decorated_definition":
            return parent
        return node
    if node.type not in NAMED_VALUES and node.type not in NAMING:
        return None
    statement = node
    while statement.parent is not None and statement.parent.type in {"expression_list", *NAMING}:
        statement = statement.parent
    if statement.type in NAMING and _holds_function(statement, depth=3):
        return statement
    return None


def _holds_function(node: Node, depth: int) -> bool:
    """Whether an anonymous function is among `node`'s named children, `depth` levels down."""
    return depth > 0 and any(
        child.type in NAMED_VALUES or _holds_function(child, depth - 1)
        for child in node.named_children
    )


def _last_line(node: Node) -> int:
    """The last line `node` covers (a node that ends at the start of a line ends before it)."""
    row, column = node.end_point
    return row - 1 if column == 0 and row > node.start_point[0] else row
