"""Patches back as text: a git-style unified diff or a `*** Begin Patch` envelope."""

from __future__ import annotations

from collections.abc import Sequence

from lsp_agent.tools.patch.model import NO_EOL_MARKER, FilePatch, Hunk


def format_patch(patches: Sequence[FilePatch], *, envelope: bool = False) -> str:
    """The patches as a git-style unified diff, or as a `*** Begin Patch` envelope.

    `parse_patch` reads the text back to equal patches (git-style text has no `*** End of File`:
    that flag is only kept by the envelope). Lines keep the endings the patch gave them.
    """
    return _format_envelope(patches) if envelope else _format_diff(patches)


def _hunk_lines(hunk: Hunk) -> list[str]:
    """A hunk's body lines with their ops, endings and `\\ No newline` markers."""
    last_old = max((i for i, (op, _) in enumerate(hunk.lines) if op != "+"), default=-1)
    last_new = max((i for i, (op, _) in enumerate(hunk.lines) if op != "-"), default=-1)
    out: list[str] = []
    for i, (op, text) in enumerate(hunk.lines):
        ending = hunk.endings[i] if hunk.endings else "\n"
        out.append(op + text + (ending or "\n"))
        if (i == last_old and hunk.old_no_eol) or (i == last_new and hunk.new_no_eol):
            out.append(NO_EOL_MARKER + "\n")
    return out


def _hunk_header(hunk: Hunk, delta: int) -> list[str]:
    out = [f"@@ {anchor}" for anchor in hunk.anchors]
    if hunk.old_start is not None:
        old_count = hunk.old_count if hunk.old_count is not None else len(hunk.old)
        new_count = len(hunk.new)
        first_new = hunk.old_start + (1 if old_count == 0 else 0) + delta
        new_start = first_new if new_count else max(first_new - 1, 0)
        heading = f" {hunk.heading}" if hunk.heading else ""
        out.append(f"@@ -{hunk.old_start},{old_count} +{new_start},{new_count} @@{heading}")
    elif not out:
        out.append("@@")
    return out


def _format_diff(patches: Sequence[FilePatch]) -> str:
    out: list[str] = []
    for patch in patches:
        new_path = patch.move_to or patch.path
        out.append(f"diff --git a/{patch.path} b/{new_path}")
        if patch.kind == "add":
            out.append("new file mode 100644")
        elif patch.kind == "delete":
            out.append("deleted file mode 100644")
        elif patch.move_to is not None:
            out += [f"rename from {patch.path}", f"rename to {patch.move_to}"]
        if not patch.hunks:
            continue
        out.append("--- /dev/null" if patch.kind == "add" else f"--- a/{patch.path}")
        out.append("+++ /dev/null" if patch.kind == "delete" else f"+++ b/{new_path}")
        delta = 0
        for hunk in patch.hunks:
            out += _hunk_header(hunk, delta)
            out += _hunk_lines(hunk)
            delta += len(hunk.new) - len(hunk.old)
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)


def _format_envelope(patches: Sequence[FilePatch]) -> str:
    out = ["*** Begin Patch"]
    for patch in patches:
        if patch.kind == "add":
            out.append(f"*** Add File: {patch.path}")
            for hunk in patch.hunks:
                out += _hunk_lines(hunk)
            continue
        if patch.kind == "delete":
            out.append(f"*** Delete File: {patch.path}")
            continue
        out.append(f"*** Update File: {patch.path}")
        if patch.move_to is not None:
            out.append(f"*** Move to: {patch.move_to}")
        delta = 0
        for hunk in patch.hunks:
            out += _hunk_header(hunk, delta)
            out += _hunk_lines(hunk)
            if hunk.at_end:
                out.append("*** End of File")
            delta += len(hunk.new) - len(hunk.old)
    out.append("*** End Patch")
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)
