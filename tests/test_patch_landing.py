"""What the model hears when the editor applies only part of its patch: its own hunks, by their
labels and lines, even in a file of repeated lines (the tools with the in-memory editor)."""

from __future__ import annotations

from pathlib import Path

from lsp_agent.port import Document
from lsp_agent.testing import MemoryPort
from lsp_agent.tools.editing import EditTools
from lsp_agent.tools.propose import Proposer
from lsp_agent.tools.reads import Reads
from lsp_agent.tools.results import EditCounts
from lsp_agent.tools.workspace import Workspace

PATCH = (
    "*** Begin Patch\n*** Update File: notes.py\n"
    "@@\n \n-x = 1\n+x = 10\n \n"
    "@@\n \n-y = 2\n+y = 20\n \n"
    "*** End Patch\n"
)


async def test_the_user_keeps_one_hunk_of_a_patch_on_repeated_lines(tmp_path: Path) -> None:
    # Blank and comment lines alternate; x = 1 is line 2, y = 2 line 64.
    lines = ["# comment\n" if i % 2 else "\n" for i in range(70)]
    lines[1], lines[63] = "x = 1\n", "y = 2\n"
    text = "".join(lines)
    path = tmp_path / "notes.py"
    path.write_text(text)
    port = MemoryPort()
    port.open(path, text)
    reads = Reads()
    reads.saw(path, Document(text, 1))
    tools = EditTools(Proposer(Workspace(tmp_path), port, reads))
    # The user unticks the second hunk in the preview: only x changes.
    port.land = text.replace("x = 1\n", "x = 10\n")

    result = await tools.apply_patch(PATCH, review=True, counts=EditCounts())

    assert result.ok
    assert "the user applied part of your edit to notes.py (1 of 2 hunks" in result.text
    assert "- hunk 1 (starting 'x = 1'): replaced line 2: applied" in result.text
    assert "- hunk 2 (starting 'y = 2'): replacing line 64: not applied by the user" in result.text
    assert result.summary.endswith("(notes.py: 1 of 2 hunks applied)")
    assert path.read_text() == port.land
    # The editor's chat reads the same without parsing the text.
    assert [fact.to_json() for fact in result.hunks] == [
        {"path": "notes.py", "hunk": "hunk 1", "status": "accepted", "what": "replaced line 2",
         "label": "starting 'x = 1'"},
        {"path": "notes.py", "hunk": "hunk 2", "status": "rejected", "what": "replacing line 64",
         "label": "starting 'y = 2'"},
    ]  # fmt: skip
    assert result.outcomes == ((path, "1 of 2 hunks applied"),)
