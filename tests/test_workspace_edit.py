"""The WorkspaceEdit each editor gets (`lsp_agent/lsp/port.py`: `workspace_edit` and
`missing_operation`, pure functions of the proposal and the client's capabilities), for the
capabilities of every client pytest-lsp has recorded and a bare client: `documentChanges` or
`changes`, versions, annotations and `needsConfirmation` per mode, creates and deletes, and
positions in every encoding, applied by the scripted editor's own code (tests/editor.py).

The server builds its edits as lsprotocol's types; here each goes to its wire form and is read
back as the type it must be (the LSP's own types, generated from the specification's model), so
a member that would not survive the wire fails."""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types
from lsprotocol.converters import get_converter
from pytest_lsp import client_capabilities

from lsp_agent.lsp import port
from lsp_agent.lsp.port import EditCapabilities, missing_operation
from lsp_agent.lsp.positions import ENCODINGS
from lsp_agent.port import EditProposal, FileChange
from tests.editor import apply_lsp_edits

ROOT = Path("/project")

BARE = types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(apply_edit=True))
"""A client that says it applies edits and nothing more: no `workspaceEdit` capabilities."""

CLIENTS: dict[str, EditCapabilities] = {
    "visual-studio-code": EditCapabilities(
        document_changes=True, create=True, delete=True, annotations=True
    ),
    # Neovim says `resourceOperations` only: that implies `documentChanges`.
    **{
        f"neovim@v{version}": EditCapabilities(document_changes=True, create=True, delete=True)
        for version in ("0.6.1", "0.7.0", "0.8.0", "0.9.1", "0.10.0", "0.11.0")
    },
    "emacs": EditCapabilities(document_changes=True),  # no resource operations
    "bare": EditCapabilities(),
}
"""What each client can take, by its pytest-lsp name (with its version where there are several)."""


CONVERTER = get_converter()


@functools.cache
def caps(client: str) -> EditCapabilities:
    capabilities = BARE if client == "bare" else client_capabilities(client)
    return EditCapabilities.of(capabilities)


def workspace_edit(proposal: EditProposal, caps: EditCapabilities, encoding: str) -> Any:
    """The server's WorkspaceEdit, as the editor reads it off the wire."""
    edit = port.workspace_edit(proposal, caps, encoding)
    return CONVERTER.structure(CONVERTER.unstructure(edit), types.WorkspaceEdit)


def proposal(*changes: FileChange, review: bool = True) -> EditProposal:
    return EditProposal("lsp-agent: edit", "what the agent changes", changes, review)


def change(
    rel: str, before: str | None, after: str | None, version: int | None = None
) -> FileChange:
    return FileChange(ROOT / rel, before, after, version)


def uri(rel: str) -> str:
    return (ROOT / rel).as_uri()


def text_edits(edit: types.WorkspaceEdit, rel: str) -> list[Any]:
    """The text edits the WorkspaceEdit makes to one file, whichever way it carries them."""
    if edit.changes is not None:
        return list(edit.changes.get(uri(rel), []))
    return [
        text_edit
        for operation in edit.document_changes or []
        if isinstance(operation, types.TextDocumentEdit) and operation.text_document.uri == uri(rel)
        for text_edit in operation.edits
    ]


def test_every_client_pytest_lsp_recorded_is_covered_here() -> None:
    recorded = {
        resource.name.removesuffix(".json").replace("_", "-").replace("-v", "@v")
        for resource in resources.files("pytest_lsp.clients").iterdir()
        if resource.name.endswith(".json")
    }
    named = {name if "@" in name else f"{name}@v" for name in CLIENTS if name != "bare"}
    assert {r for r in recorded if not any(r.startswith(n) for n in named)} == set()


@pytest.mark.parametrize("client", CLIENTS)
def test_the_capabilities_are_read_as_each_client_states_them(client: str) -> None:
    assert caps(client) == CLIENTS[client]


@pytest.mark.parametrize("review", [True, False], ids=["review", "auto"])
@pytest.mark.parametrize("client", CLIENTS)
def test_an_edit_of_an_open_buffer_is_pinned_and_annotated_where_the_client_can(
    client: str, review: bool
) -> None:
    before = "one\ntwo\nthree\n"
    edit = workspace_edit(
        proposal(change("a.txt", before, "one\n2\nthree\n", version=7), review=review),
        caps(client),
        "utf-16",
    )

    (text_edit,) = text_edits(edit, "a.txt")
    assert (text_edit.range.start.line, text_edit.range.end.line) == (1, 1)
    assert apply_lsp_edits(before, [text_edit], "utf-16") == "one\n2\nthree\n"
    if not CLIENTS[client].document_changes:
        assert edit.document_changes is None
        assert edit.change_annotations is None
        assert type(text_edit) is types.TextEdit  # a bare client knows no version to check
        return
    assert edit.changes is None
    (operation,) = edit.document_changes or []
    assert isinstance(operation, types.TextDocumentEdit)
    assert operation.text_document.version == 7  # the editor refuses it if the buffer moved on
    if CLIENTS[client].annotations:
        assert isinstance(text_edit, types.AnnotatedTextEdit)
        assert edit.change_annotations is not None
        annotation = edit.change_annotations[text_edit.annotation_id]
        assert annotation.needs_confirmation is review  # review asks; auto does not
        assert annotation.label == "lsp-agent: edit"
        assert annotation.description == "what the agent changes"
    else:
        assert type(text_edit) is types.TextEdit
        assert edit.change_annotations is None


@pytest.mark.parametrize("client", CLIENTS)
def test_a_file_read_from_disk_is_edited_without_a_version(client: str) -> None:
    edit = workspace_edit(proposal(change("a.txt", "x\n", "y\n")), caps(client), "utf-16")

    for operation in edit.document_changes or []:
        assert isinstance(operation, types.TextDocumentEdit)
        assert operation.text_document.version is None
    assert len(text_edits(edit, "a.txt")) == 1


@pytest.mark.parametrize("client", CLIENTS)
def test_a_lone_new_file_reaches_every_client(client: str) -> None:
    new = proposal(change("pkg/new.py", None, "VALUE = 1\n"))

    assert missing_operation(new, caps(client)) is None
    edit = workspace_edit(new, caps(client), "utf-16")

    operations = edit.document_changes or []
    creates = [o for o in operations if isinstance(o, types.CreateFile)]
    if CLIENTS[client].create:
        assert creates == [types.CreateFile(uri=uri("pkg/new.py"), kind="create")]
        assert operations[0] == creates[0]  # created before its text goes in
    else:
        assert creates == []  # a text edit on the missing file, which editors create
    (text_edit,) = text_edits(edit, "pkg/new.py")
    assert apply_lsp_edits("", [text_edit], "utf-16") == "VALUE = 1\n"


@pytest.mark.parametrize("client", CLIENTS)
def test_creating_among_other_changes_needs_the_create_operation(client: str) -> None:
    both = proposal(change("a.txt", "x\n", "y\n"), change("b.txt", None, "new\n"))

    needed = missing_operation(both, caps(client))

    assert needed == (None if CLIENTS[client].create else "create")


@pytest.mark.parametrize("client", CLIENTS)
def test_a_patch_over_three_files_creates_first_and_deletes_last_or_is_not_sent(
    client: str,
) -> None:
    patch = proposal(
        change("hello.py", 'return "hello"\n', 'return "hi"\n'),
        change("pkg/new.py", None, "print()\n"),
        change("old.txt", "obsolete\n", None),
    )

    needed = missing_operation(patch, caps(client))

    if not (CLIENTS[client].document_changes and CLIENTS[client].delete):
        assert needed == "delete"  # the model is told; nothing half-done reaches the editor
        return
    assert needed is None
    operations = workspace_edit(patch, caps(client), "utf-16").document_changes or []
    assert [type(o).__name__ for o in operations] == [
        "CreateFile",
        "TextDocumentEdit",
        "TextDocumentEdit",
        "DeleteFile",
    ]
    assert operations[0] == types.CreateFile(uri=uri("pkg/new.py"), kind="create")
    assert operations[-1] == types.DeleteFile(uri=uri("old.txt"), kind="delete")


PIECES = ["a", "b", " ", "\t", "\n", "\r\n", "\r", "\f", "\u2028", "é", "中", "😀", "👍🏽", "𝔘"]
"""Every LSP line break, characters `str.splitlines` breaks on and LSP does not, and characters
of one, two and four bytes in UTF-8, one and two code units in UTF-16."""

TEXT = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


@settings(max_examples=150, deadline=None)
@given(before=TEXT, after=TEXT, encoding=st.sampled_from(ENCODINGS))
def test_the_edits_turn_the_text_into_the_new_one_in_every_encoding(
    before: str, after: str, encoding: str
) -> None:
    for client in ("visual-studio-code", "bare"):
        edit = workspace_edit(proposal(change("a.txt", before, after)), caps(client), encoding)

        assert apply_lsp_edits(before, text_edits(edit, "a.txt"), encoding) == after
