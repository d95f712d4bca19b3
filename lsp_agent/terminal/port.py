"""The terminal's `EditorPort`: `lsp-agent run` in a shell.

The answer streams to stdout, each edit is shown as a coloured unified diff and written to disk
when the user says yes (or `--yes`), questions are asked on stdin; no buffers, so everything is
read from disk.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from lsp_agent.port import Document, EditOutcome, EditProposal
from lsp_agent.safety.reading import Refused, read_regular
from lsp_agent.text import unified_diff
from lsp_agent.tools.workspace import MAX_FILE_BYTES


class TerminalPort:
    """The agent core's `EditorPort` in a terminal."""

    def __init__(self, *, yes: bool, out: TextIO, err: TextIO, color: bool) -> None:
        self.yes = yes
        """Apply edits without asking."""
        self.out = out
        self.err = err
        self.color = color
        self._mid_line = False

    async def read_document(self, path: Path) -> Document | None:
        return None  # no editor buffers: everything is read from disk

    async def buffer_after(self, path: Path, version: int, timeout: float) -> Document | None:
        return None  # no buffers: what landed is on disk

    async def propose_edit(self, proposal: EditProposal) -> EditOutcome:
        self._end_line()
        self.out.write(await asyncio.to_thread(self._diffs, proposal))
        self.out.flush()
        if not self.yes:
            answer = await self._prompt(f"apply {proposal.description}? [y/N/reason] ")
            if answer is None:
                return EditOutcome(
                    False, "no terminal to confirm the edit: run again with --yes to apply edits"
                )
            if answer.strip().lower() not in ("y", "yes"):
                reason = answer.strip()
                return EditOutcome(False, reason if reason.lower() not in ("", "n", "no") else None)
        for change in proposal.changes:
            current = await asyncio.to_thread(_read_text, change.path)
            if current != change.before:
                return EditOutcome(False, f"{change.path} changed on disk meanwhile", stale=True)
        for change in proposal.changes:
            if change.after is None:
                await asyncio.to_thread(change.path.unlink, missing_ok=True)
            else:
                await asyncio.to_thread(_write_text, change.path, change.after, change.bom)
        return EditOutcome(True)

    async def ask_user(self, question: str, actions: Sequence[str]) -> str | None:
        self._end_line()
        choices = " / ".join(f"{i}) {a}" for i, a in enumerate(actions, 1))
        answer = await self._prompt(f"{question}\n{choices}: ")
        if answer is None:
            return None
        answer = answer.strip()
        if answer.isdigit() and 1 <= int(answer) <= len(actions):
            return actions[int(answer) - 1]
        matches = [a for a in actions if a.lower() == answer.lower()]
        return matches[0] if matches else None

    def emit(self, event: dict[str, Any]) -> None:
        kind = event["kind"]
        if kind == "text":
            self.out.write(event["text"])
            self.out.flush()
            self._mid_line = not event["text"].endswith("\n")
        elif kind == "tool":
            self._end_line()
            shown = _tool_line(event["name"], event["args"])
            self.err.write(self._dim(f"→ {shown}") + "\n")
        elif kind == "toolResult":
            mark = "✓" if event["ok"] else "✗"
            self.err.write(self._dim(f"  {mark} {event['summary']}") + "\n")
        elif kind == "permission" and event["decision"] == "deny":
            self.err.write(self._dim(f"  ⊘ {event['name']} not run") + "\n")
        elif kind == "status":
            self._end_line()

    def log(self, message: str) -> None:
        logging.getLogger("lsp_agent").debug(message)

    def warn(self, message: str) -> None:
        self._end_line()
        self.err.write(f"lsp-agent: {message}\n")

    async def _prompt(self, question: str) -> str | None:
        if not sys.stdin or not sys.stdin.isatty():
            return None
        self.err.write(question)
        self.err.flush()
        try:
            return await asyncio.to_thread(sys.stdin.readline)
        except (EOFError, OSError):
            return None

    def _end_line(self) -> None:
        if self._mid_line:
            self.out.write("\n")
            self._mid_line = False

    def _diffs(self, proposal: EditProposal) -> str:
        """The proposal's diffs as shown, paths relative to the working folder (reads it)."""
        diffs = []
        for change in proposal.changes:
            rel = os.path.relpath(change.path)
            diff = unified_diff(rel, change.before or "", change.after or "")
            diffs.append(self._colour_diff(diff))
        return "".join(diffs)

    def _colour_diff(self, diff: str) -> str:
        if not self.color:
            return diff
        lines = []
        for line in diff.splitlines(keepends=True):
            if line.startswith(("+++", "---")):
                lines.append(f"\033[1m{line.rstrip(chr(10))}\033[0m\n")
            elif line.startswith("+"):
                lines.append(f"\033[32m{line.rstrip(chr(10))}\033[0m\n")
            elif line.startswith("-"):
                lines.append(f"\033[31m{line.rstrip(chr(10))}\033[0m\n")
            elif line.startswith("@@"):
                lines.append(f"\033[36m{line.rstrip(chr(10))}\033[0m\n")
            else:
                lines.append(line)
        return "".join(lines)

    def _dim(self, text: str) -> str:
        return f"\033[2m{text}\033[0m" if self.color else text


def _read_text(path: Path) -> str | None:
    """What the file holds now, to tell whether it changed since the edit was made; None when
    it is gone, and text that matches nothing when it is no longer a readable text file (a FIFO
    or a huge file swapped in must neither hang nor be read whole)."""
    try:
        data = read_regular(path, MAX_FILE_BYTES).data
    except FileNotFoundError:
        return None
    except Refused as refused:
        return f"\0{refused}"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "\0not UTF-8"
    return text[1:] if text.startswith("\ufeff") else text


def _write_text(path: Path, text: str, bom: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))


def _tool_line(name: str, args: Any) -> str:
    """A tool call in one line: `read_file path='a.py'`; an MCP server's tool as
    `server · tool {arguments}` (its name is `mcp__<server>__<tool>`)."""
    if name.startswith("mcp__") and "__" in name[5:]:
        server, _, tool = name[5:].partition("__")
        text = json.dumps(args, ensure_ascii=False) if args not in ({}, None) else ""
        return f"{server} · {tool} {text[:77] + '…' if len(text) > 80 else text}".rstrip()
    return f"{name} {_short(args)}"


def _short(args: Any) -> str:
    if isinstance(args, dict):
        keys = ("path", "pattern", "glob", "command")
        text = " ".join(f"{k}={v!r}" for k, v in args.items() if k in keys)
        return text or ""
    return str(args)[:80]
