"""From the model's `apply_patch(patch)` to the new text of every file it touches.

`parse_patch` (`parse.py`) reads a multi-file patch in either shape models write: a unified diff
or the `*** Begin Patch` envelope. `plan_patch` (`plan.py`) places every hunk exactly once with
the matcher `edit_file` uses (`lsp_agent.tools.matching`) and returns the planned changes, or
raises one `PatchError` that lists every hunk it could not place: the whole patch is validated
before anything is proposed. `format_patch` (`format.py`) writes patches back as text. The
types are in `model.py`. Everything here is pure: the caller reads the files and proposes the
result.
"""

from __future__ import annotations

from typing import Any

from lsp_agent.tools.patch.format import format_patch
from lsp_agent.tools.patch.model import (
    NO_EOL_MARKER,
    FilePatch,
    Hunk,
    HunkFailure,
    Kind,
    PatchError,
    PlannedChange,
    ReadCurrent,
    describe,
    paths,
)
from lsp_agent.tools.patch.parse import parse_patch
from lsp_agent.tools.patch.plan import plan_patch

__all__ = [
    "APPLY_PATCH_SCHEMA",
    "NO_EOL_MARKER",
    "FilePatch",
    "Hunk",
    "HunkFailure",
    "Kind",
    "PatchError",
    "PlannedChange",
    "ReadCurrent",
    "describe",
    "format_patch",
    "parse_patch",
    "paths",
    "plan_patch",
]

APPLY_PATCH_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "apply_patch",
        "description": (
            "Change several files at once: update, create, delete or move them. Send either a "
            "unified diff (--- a/path and +++ b/path, then @@ hunks; --- /dev/null creates a "
            "file, +++ /dev/null deletes one) or this envelope:\n"
            "*** Begin Patch\n*** Update File: src/app.py\n@@ def greet():\n"
            "-    return 'hello'\n+    return 'hi'\n*** Add File: src/new.py\n+print(1)\n"
            "*** Delete File: old.txt\n*** End Patch\n"
            "Hunk lines start with a space (unchanged, copied exactly from the file), - "
            "(removed) or + (added); an @@ line may name the function or class above the hunk, "
            "and *** End of File after a hunk puts it at the end of the file. Read every file "
            "before you update or delete it. The whole patch is checked first: if any hunk "
            "does not fit exactly one place, nothing changes and the error says why. The user "
            "previews all files as one edit."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "patch": {
                    "type": "string",
                    "description": "The whole patch text, every file in one call.",
                }
            },
            "required": ["patch"],
        },
    },
}
"""The `apply_patch` tool in OpenAI function format."""
