"""The tool belt the model sees: JSON schemas, argument checking, and dispatch.

Every tool answers with text for the model. A `ToolError` becomes a result that says what went
wrong and what to do next; the turn goes on. Edits never touch the disk here: they are planned
against the text the editor shows and proposed through the `EditorPort`.

Each call goes permissions → tool → cap: `permissions.decide()` says allow, ask (the user is asked
through the port) or deny; the result is capped on arrival (`context.cap`) and, when it carries
outside text (files, command output, search hits), marked `<untrusted>`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from lsp_agent.config import Settings
from lsp_agent.context.cap import Excerpt, Spills, render
from lsp_agent.errors import ToolError
from lsp_agent.port import Document, EditorPort, EditOutcome, EditProposal, FileChange
from lsp_agent.safety import permissions
from lsp_agent.safety.sandbox import Sandbox
from lsp_agent.text import unified_diff
from lsp_agent.tools import edits, files, patch, shell, syntax
from lsp_agent.tools.outcome import hunk_outcomes
from lsp_agent.tools.rebase import RebaseResult, rebase
from lsp_agent.tools.skills import LOAD_SKILL, SkillLocks, load_skill_schema
from lsp_agent.tools.stats import EDIT_TOOLS, EditAttempt, EditStats
from lsp_agent.tools.todo import TODO_SCHEMA, Plan
from lsp_agent.tools.workspace import Workspace

# How long an edit the editor said it applied may take to show up in the buffer we track
# (the client's didChange can trail its applyEdit answer).
LANDING_WAIT_S = 2.0
REBASE_ATTEMPTS = 3
"""How many times an edit is rebased onto the user's typing and sent again before giving up."""


class ChangeWitness(Protocol):
    """What the change tracker needs to hear from the tools (`changes.ChangeTracker`)."""

    def agent_read(self, path: Path, text: str, key: str = ...) -> None:
        """The model read `path` and saw `text`."""
        ...

    def agent_applied(self, path: Path, text: str, key: str = ...) -> None:
        """An edit of the agent's landed; `path` now holds `text`."""
        ...

    def known_text(self, path: Path) -> str | None:
        """The text the model last read or wrote for `path`, if still remembered."""
        ...


TOOL_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": (
                "Read a text file of the workspace as numbered lines (200 per call). "
                "Open editor buffers are read with their unsaved text. You must read a file "
                "before editing it."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path relative to the workspace."},
                    "start": {"type": "integer", "description": "First line (1-based)."},
                    "limit": {"type": "integer", "description": "Number of lines (max 200)."},
                },
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": (
                "Search file contents with a regular expression (ripgrep syntax). Respects "
                ".gitignore; at most 50 matches."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression."},
                    "path": {"type": "string", "description": "Folder or file to search in."},
                    "glob": {"type": "string", "description": "Only files matching, e.g. *.py"},
                },
                "required": ["pattern"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_files",
            "description": "List files of the workspace (respects .gitignore), bounded.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Folder to list."},
                    "glob": {"type": "string", "description": "Only files matching, e.g. *.ts"},
                },
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "edit_file",
            "description": (
                "Replace one exact occurrence of `old` with `new` in a file you have read. "
                "`old` must appear exactly once: include enough surrounding lines. The user "
                "previews the change in the editor and may reject it."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "old": {"type": "string", "description": "Exact text to replace."},
                    "new": {"type": "string", "description": "Replacement text."},
                },
                "required": ["path", "old", "new"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Create a NEW file with the given content (use edit_file for others).",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"},
                },
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": (
                "Run a shell command in the workspace, inside a sandbox: the workspace is "
                "writable (not .git), everything else read-only, no network. Output (stdout and "
                "stderr together) is capped; the whole of a long output goes to a file you can "
                "page. Read-only commands run at once; others may need the user's approval. "
                "Prefer edit_file for changing files: the user previews those."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line."},
                    "timeout": {"type": "number", "description": "Seconds (default 60)."},
                },
                "required": ["command"],
            },
        },
    },
    patch.APPLY_PATCH_SCHEMA,
    TODO_SCHEMA,
]

NEVER_LOCKED = frozenset({"read_file", "search", "list_files", "todo", LOAD_SKILL})
"""Tools a skill cannot lock: the model always needs them to look around and plan."""

_REQUIRED: dict[str, dict[str, type]] = {
    "read_file": {"path": str},
    "search": {"pattern": str},
    "list_files": {},
    "edit_file": {"path": str, "old": str, "new": str},
    "write_file": {"path": str, "content": str},
    "apply_patch": {"patch": str},
    LOAD_SKILL: {"name": str},
    "bash": {"command": str},
    "todo": {"items": object},
}
_OPTIONAL: dict[str, dict[str, type]] = {
    "read_file": {"start": int, "limit": int},
    "search": {"path": str, "glob": str},
    "list_files": {"path": str, "glob": str},
    "edit_file": {},
    "write_file": {},
    "apply_patch": {},
    LOAD_SKILL: {},
    "bash": {"timeout": float},
    "todo": {},
}


@dataclass
class ToolResult:
    """What a tool call produced, for the model and for the editor's event stream."""

    text: str
    ok: bool
    summary: str
    reason: str | None = None
    """For failures: the `ToolError` reason (`not_found`, `stale`, `rejected`, ...)."""
    edits: tuple[tuple[Path, bool], ...] = ()
    """For edit tools that reached the editor: each file and whether it was applied."""
    source: str | None = None
    """Set when `text` is outside text (a file, search hits): where it came from. The toolbox
    caps it and marks it `<untrusted source=…>`."""
    output: Excerpt | None = None
    """Command output, already capped as it streamed; shown after `text`, marked untrusted."""
    permission: dict[str, Any] | None = None
    """The `permission` event of this call (`name`, `decision`, ...), when it was asked or
    denied."""
    paths: tuple[str, ...] = ()
    """For edit tools: the workspace-relative files the call touched or tried to."""


@dataclass
class EditCounts:
    """Edits of one `ask`, as reported in its result."""

    proposed: int = 0
    applied: int = 0
    rejected: int = 0


@dataclass
class Toolbox:
    """Runs the model's tool calls against one workspace through one editor port."""

    workspace: Workspace
    port: EditorPort
    needs_confirmation: Callable[[], bool]
    """Whether edits must be confirmed by the user (mode `review`), read at each proposal."""
    reads: dict[Path, str] = field(default_factory=dict)
    """Content hash of each file as the model last saw it (read, or an edit it made landed)."""
    counts: EditCounts = field(default_factory=EditCounts)
    settings: Callable[[], Settings] = Settings
    """The settings in effect (rules, cap, timeout), read at each call."""
    sandbox: Sandbox | None = None
    """Where commands run; made for the workspace on first use when not given."""
    session_rules: permissions.SessionRules = field(default_factory=permissions.SessionRules)
    """What the user allowed for this session (`Allow for this session`)."""
    spills: Spills = field(default_factory=Spills)
    """This session's spill files, swept at the end of each turn."""
    auto_approve: frozenset[str] = frozenset()
    """Tools whose `ask` is answered Allow without asking (the CLI's --yes, --yes-commands);
    never for a command that would run unsandboxed."""
    plan: Plan = field(default_factory=Plan)
    """The session's plan, replaced by the `todo` tool and shown in the reminder."""
    skills: SkillLocks | None = None
    """The session's skills and which of their tools are locked; None without skills."""
    edit_stats: EditStats = field(default_factory=EditStats)
    """The session's edit attempts: how many landed, at the first try, why the others failed."""
    on_edit: Callable[[EditAttempt], None] | None = None
    """Hears each edit attempt after it is counted (the agent keeps it in the transcript)."""
    tracker: ChangeWitness | None = None
    """The workspace's change tracker: hears reads and landed edits, keeps the texts read."""
    tracker_key: str = "default"
    """This session's key in the tracker."""
    read_versions: dict[Path, int] = field(default_factory=dict)
    """Buffer version of each file the model last read from an open buffer."""

    def schemas(self) -> list[dict[str, Any]]:
        """The tools to offer the model: the belt, and `load_skill` when there are skills."""
        if self.skills is None:
            return TOOL_SCHEMAS
        return [*TOOL_SCHEMAS, load_skill_schema(list(self.skills.skills.values()))]

    async def run(self, name: str, arguments: str) -> ToolResult:
        """Run one tool call; never raises for anything the model did wrong."""
        permission: dict[str, Any] | None = None
        try:
            if self.skills is not None:
                self.skills.check(name)
            args = _parse_arguments(name, arguments)
            permission = await self._permit(name, args)
            result = await self._dispatch(name, args)
        except ToolError as error:
            if isinstance(error, _Denied):
                permission = error.event
            result = ToolResult(
                text=f"error: {error.message}",
                ok=False,
                summary=error.message.split("\n", 1)[0][:200],
                reason=error.reason,
            )
        result.permission = permission
        if name in EDIT_TOOLS:
            self._count_attempt(name, arguments, result)
        return self._capped(name, result)

    def _count_attempt(self, name: str, arguments: str, result: ToolResult) -> None:
        """Count one edit-tool call in the statistics and report it."""
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            args = {}
        if not isinstance(args, dict):
            args = {}
        named = [args["path"]] if isinstance(args.get("path"), str) else _patch_paths(args)
        result.paths = tuple(self._rule_path(path) for path in named)
        attempt = EditAttempt(name, result.paths, result.ok, None if result.ok else result.reason)
        self.edit_stats.record(attempt)
        if self.on_edit is not None:
            self.on_edit(attempt)

    def end_turn(self) -> None:
        """The turn is over: its spill files go."""
        self.spills.sweep()

    def _capped(self, name: str, result: ToolResult) -> ToolResult:
        """Cap the result on arrival and mark outside text untrusted."""
        limit = self.settings().tool_output_cap
        if result.output is not None:
            result.text = result.text + render(result.output, result.source or name)
            return result
        excerpt = self.spills.cap(result.text, limit, name)
        result.text = render(excerpt, result.source)
        return result

    async def _permit(self, name: str, args: Mapping[str, Any]) -> dict[str, Any] | None:
        """Decide the call; ask the user when needed. Raises ToolError when it must not run."""
        settings = self.settings()
        rules = [permissions.Rule.from_setting(raw) for raw in settings.permissions]
        subject = dict(args)
        if isinstance(args.get("path"), str):
            subject["path"] = self._rule_path(args["path"])
        sandboxed = True
        if name == "bash":
            # The first call probes the machine with a real sandboxed command: off the loop.
            sandbox = self._sandbox()
            sandboxed = (await asyncio.to_thread(lambda: sandbox.availability)).sandboxed
        # A patch is judged file by file, like the edits it stands for; the strictest wins.
        subjects = [{"path": self._rule_path(p)} for p in _patch_paths(args)] or [subject]
        verdicts = [
            permissions.decide(
                name,
                one,
                rules=rules,
                session=self.session_rules,
                root=self.workspace.root,
                sandboxed=sandboxed,
                readable=self.spills.existing(),
            )
            for one in subjects
        ]
        verdict = max(verdicts, key=lambda v: _STRICTNESS[v.decision])
        if verdict.decision == permissions.ALLOW:
            return None
        what = _call_text(name, args)
        if verdict.decision == permissions.DENY:
            raise _Denied(
                f"refused by policy: {what} ({verdict.reason}). Nothing ran. Do not retry it in "
                "another form; find another way, or tell the user what you need.",
                {"name": name, "decision": "deny", "asked": False, "reason": verdict.reason},
            )
        if name in self.auto_approve and sandboxed:
            return {"name": name, "decision": "allow", "asked": False, "reason": verdict.reason}
        question = _question(name, what, verdict.reason, sandboxed)
        answer = await self.port.ask_user(question, permissions.ANSWERS)
        if answer == permissions.ANSWER_SESSION:
            for asked in verdicts:
                if asked.decision == permissions.ASK:
                    self.session_rules.allow(name, asked.shape)
        if answer in (permissions.ANSWER_ALLOW, permissions.ANSWER_SESSION):
            scope = "session" if answer == permissions.ANSWER_SESSION else "once"
            return {"name": name, "decision": "allow", "asked": True, "scope": scope}
        why = "the user denied it" if answer is not None else "nobody answered the question"
        raise _Denied(
            f"not run: {what} needs the user's approval and {why}. Nothing ran. Do not retry "
            "it; continue without it, or ask the user in your answer.",
            {"name": name, "decision": "deny", "asked": True},
        )

    def _rule_path(self, path: str) -> str:
        """The path as rules see it: relative to the workspace when it is inside."""
        try:
            return self.workspace.relative(self.workspace.resolve(path))
        except ToolError:
            return path

    def _sandbox(self) -> Sandbox:
        if self.sandbox is None:
            self.sandbox = Sandbox(self.workspace.root)
        return self.sandbox

    async def current(self, path: Path) -> Document:
        """The file as the editor shows it: the open buffer, else the disk."""
        return await editor_view(self.port, self.workspace, path)

    async def _dispatch(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        if name == "read_file":
            return await self._read_file(args["path"], args.get("start", 1), args.get("limit", 200))
        if name == "search":
            text = await files.search(
                self.workspace, args["pattern"], args.get("path", ""), args.get("glob")
            )
            return ToolResult(text=text, ok=True, summary=_first_line(text), source="search")
        if name == "list_files":
            text = await files.list_files(self.workspace, args.get("path", ""), args.get("glob"))
            return ToolResult(text=text, ok=True, summary=_first_line(text), source="list_files")
        if name == "bash":
            return await self._bash(args["command"], args.get("timeout"))
        if name == "edit_file":
            return await self._edit_file(args["path"], args["old"], args["new"])
        if name == "write_file":
            return await self._write_file(args["path"], args["content"])
        if name == "apply_patch":
            return await self._apply_patch(args["patch"])
        if name == LOAD_SKILL and self.skills is not None:
            loaded = self.skills.load_skill(args["name"])
            return ToolResult(text=loaded.text(), ok=True, summary=f"loaded skill {args['name']}")
        if name == "todo":
            text = self.plan.replace(args)
            return ToolResult(text=text, ok=True, summary=_first_line(text))
        raise ToolError(f"unknown tool {name!r}: use one of {', '.join(_REQUIRED)}")

    async def _read_file(self, path: str, start: int, limit: int) -> ToolResult:
        target = self.workspace.resolve(path)
        if target.is_dir():
            raise ToolError(f"{path} is a folder: use list_files to see what it holds")
        document = await self.current(target)
        rel = self.workspace.relative(target)
        text = files.format_read(rel, document.text, start, min(max(limit, 1), 200))
        self._saw(target, document)
        return ToolResult(text=text, ok=True, summary=f"read {rel}", source=f"read_file {rel}")

    async def _bash(self, command: str, timeout: float | None) -> ToolResult:
        settings = self.settings()
        seconds = float(timeout) if timeout is not None else settings.command_timeout
        result = await shell.run_command(
            command,
            sandbox=self._sandbox(),
            spills=self.spills,
            limit=settings.tool_output_cap,
            timeout=seconds,
        )
        status = result.status_line(seconds)
        return ToolResult(
            text=status + "\n",
            ok=result.exit_code == 0,
            summary=status.split(":", 1)[0][:200],
            reason=None if result.exit_code == 0 else ("timeout" if result.timed_out else "exit"),
            source="bash",
            output=result.output,
        )

    async def _edit_file(self, path: str, old: str, new: str) -> ToolResult:
        target = self.workspace.resolve(path, for_write=True)
        rel = self.workspace.relative(target)
        seen = self.reads.get(target)
        if seen is None:
            raise ToolError(
                f"{rel} has not been read in this session: call read_file first, then edit",
                reason="unread",
            )
        document = await self.current(target)
        if files.content_hash(document.text) == seen:
            after = edits.plan_edit(document.text, old, new, path=rel)
            merged = None
        else:
            merged = self._rebase_typing(target, rel, document, old, new)
            after = merged.merged or document.text
        if after == document.text:
            raise ToolError(
                f"old and new are the same text: nothing to change in {rel}", reason="no_change"
            )
        await _syntax_guard(rel, document.text, after)
        change = FileChange(target, document.text, after, document.version, document.bom)
        return await self._propose(rel, change, merged)

    def _rebase_typing(
        self, target: Path, rel: str, document: Document, old: str, new: str
    ) -> RebaseResult:
        """An edit the model planned on a buffer the user has typed in since: the planned
        change merged onto what the buffer holds now. Refused (`stale`) when the file changed
        some other way (saved over, changed on disk: the model must read it again), when the
        text read is no longer known, or when the user's typing touches the edited lines."""
        read_version = self.read_versions.get(target)
        base = self.tracker.known_text(target) if self.tracker is not None else None
        typing = (
            read_version is not None
            and document.version is not None
            and document.version > read_version
            and base is not None
            and files.content_hash(base) == self.reads.get(target)
        )
        if not typing or base is None:
            self._forget(target)
            raise ToolError(
                f"{rel} changed since you last read it (edited in the editor or on disk): "
                "read it again, then redo the edit against what is there now",
                reason="stale",
            )
        merged = rebase(base, edits.plan_edit(base, old, new, path=rel), document.text)
        if not merged.clean:
            self._forget(target)
            raise ToolError(merged.describe(rel), reason="stale")
        return merged

    async def _write_file(self, path: str, content: str) -> ToolResult:
        target = self.workspace.resolve(path, for_write=True)
        rel = self.workspace.relative(target)
        if target.exists() or await self.port.read_document(target) is not None:
            raise ToolError(
                f"{rel} already exists: read it and use edit_file to change it", reason="exists"
            )
        await _syntax_guard(rel, None, content)
        return await self._propose(rel, FileChange(target, None, content, None))

    async def _apply_patch(self, text: str) -> ToolResult:
        patches = patch.parse_patch(text)
        found: dict[str, tuple[Path, Document | None] | ToolError] = {}
        for name in patch.paths(patches):
            try:
                found[name] = await self._patch_target(name)
            except ToolError as error:
                found[name] = error

        def read_current(name: str) -> tuple[Path, str | None]:
            entry = found.get(name)
            if entry is None:  # a path `paths()` did not list: resolve it without the editor
                entry = (self.workspace.resolve(name, for_write=True), None)
            if isinstance(entry, ToolError):
                raise entry
            target, document = entry
            return target, document.text if document is not None else None

        planned = patch.plan_patch(patches, read_current)
        refusals = await asyncio.gather(
            *(
                asyncio.to_thread(syntax.check, change.rel, change.before, change.after)
                for change in planned
                if change.after is not None
            )
        )
        messages = [message for message in refusals if message]
        if messages:
            raise ToolError("\n".join(messages), reason="syntax")
        documents = {
            entry[0]: entry[1] for entry in found.values() if not isinstance(entry, ToolError)
        }
        changes = []
        for change in planned:
            document = documents.get(change.path)
            changes.append(
                FileChange(
                    change.path,
                    change.before,
                    change.after,
                    document.version if document is not None else None,
                    document.bom if document is not None else False,
                )
            )
        return await self._propose_patch(planned, tuple(changes))

    async def _patch_target(self, name: str) -> tuple[Path, Document | None]:
        """A file a patch names, resolved for writing, with its current text (None: absent).

        An existing file must have been read, and not changed since, as for `edit_file`.
        """
        target = self.workspace.resolve(name, for_write=True)
        rel = self.workspace.relative(target)
        document = await self.port.read_document(target)
        if document is None:
            if not await asyncio.to_thread(target.exists):
                return target, None
            document = await asyncio.to_thread(self.workspace.read_disk, target)
        seen = self.reads.get(target)
        if seen is None:
            raise ToolError(
                f"{rel} has not been read in this session: call read_file first, then send the "
                "patch again",
                reason="unread",
            )
        if files.content_hash(document.text) != seen:
            self._forget(target)
            raise ToolError(
                f"{rel} changed since you last read it (edited in the editor or on disk): read "
                "it again, then redo the patch against what is there now",
                reason="stale",
            )
        return target, document

    async def _propose_patch(
        self, planned: list[patch.PlannedChange], changes: tuple[FileChange, ...]
    ) -> ToolResult:
        """Propose every file of a patch as one edit; tell the model what landed."""
        names = ", ".join(change.rel for change in planned)
        diff = "".join(
            unified_diff(change.rel, change.before or "", change.after or "") for change in planned
        )
        proposal = EditProposal(
            label=f"lsp-agent: {names}",
            description=patch.describe(planned),
            changes=changes,
            needs_confirmation=self.needs_confirmation(),
        )
        refused = tuple((change.path, False) for change in changes)
        self.counts.proposed += 1
        outcome = await self.port.propose_edit(proposal)
        if not outcome.applied:
            self.counts.rejected += 1
            for file_change in changes:
                self._forget(file_change.path)
        if outcome.unsupported:
            return ToolResult(
                text=(
                    f"not applied — {outcome.reason}. Nothing was changed. Send the patch again "
                    "without those files (only updates), and tell the user in your answer which "
                    "files to create or delete themselves."
                ),
                ok=False,
                summary=f"not applied: {outcome.reason}",
                reason="unsupported",
                edits=refused,
            )
        if not outcome.applied and outcome.failed:
            return self._not_taken(outcome, names, refused)
        if not outcome.applied and outcome.stale:
            return ToolResult(
                text=(
                    f"not applied — a file of the patch ({names}) changed in the editor after "
                    "you read it. Nothing was changed: read the files again and redo the patch "
                    "against their current text."
                ),
                ok=False,
                summary="not applied: a file changed in the editor",
                reason="stale",
                edits=refused,
            )
        if not outcome.applied:
            why = f": {outcome.reason}" if outcome.reason else ""
            return ToolResult(
                text=(
                    f"not applied — the user rejected this patch ({names}){why}. The files are "
                    "unchanged by you; read them again before any new edit, and ask the user if "
                    "the reason is unclear."
                ),
                ok=False,
                summary=f"rejected {names}{why}"[:200],
                reason="rejected",
                edits=refused,
            )
        self.counts.applied += 1
        verb = f"applied: {patch.describe(planned)}"
        told = []
        for planned_change, file_change in zip(planned, changes, strict=True):
            rel = planned_change.rel
            landed = await self._landed(file_change)
            if file_change.after is None:
                self._forget(file_change.path)
                if landed is None:
                    told.append(f"{rel} is still there: the editor did not delete it")
            elif landed is not None and landed.text == file_change.after:
                self._saw(file_change.path, landed, applied=True)
            else:
                told.append(self._landed_otherwise(rel, file_change, landed).text)
        applied = tuple((file_change.path, True) for file_change in changes)
        if told:
            return ToolResult(
                text="the editor applied the patch, but not all of it as proposed:\n"
                + "\n".join(told),
                ok=True,
                summary=f"{verb} (changed by the user)"[:200],
                edits=applied,
            )
        return ToolResult(
            text=f"{verb}\n{diff}",
            ok=True,
            summary=f"{verb} ({_diff_size(diff)})"[:200],
            edits=applied,
        )

    async def _propose(
        self, rel: str, change: FileChange, merged: RebaseResult | None = None
    ) -> ToolResult:
        """Propose one file's edit; when the user types before it lands, merge it onto their
        text and send it again (`REBASE_ATTEMPTS` times at most). Tells the model what landed,
        hunk by hunk when that is not what it proposed."""
        created = change.before is None
        proposal = EditProposal(
            label=f"lsp-agent: {rel}",
            description=("create " if created else "edit ") + rel,
            changes=(change,),
            needs_confirmation=self.needs_confirmation(),
        )
        self.counts.proposed += 1
        outcome = await self.port.propose_edit(proposal)
        attempts = 0
        while not outcome.applied and outcome.stale and not created and attempts < REBASE_ATTEMPTS:
            attempts += 1
            try:
                current = await self.current(change.path)
            except ToolError:
                break  # the file went away meanwhile
            assert change.before is not None and change.after is not None
            merged = rebase(change.before, change.after, current.text)
            if merged.merged is None:
                self.counts.rejected += 1
                self._forget(change.path)
                return ToolResult(
                    text=f"error: {merged.describe(rel)}",
                    ok=False,
                    summary=f"not proposed: the user changed the same lines of {rel}",
                    reason="stale",
                    edits=((change.path, False),),
                )
            await _syntax_guard(rel, current.text, merged.merged)
            change = FileChange(
                change.path, current.text, merged.merged, current.version, current.bom
            )
            proposal = replace(proposal, changes=(change,))
            outcome = await self.port.propose_edit(proposal)
        if not outcome.applied and outcome.stale:
            self.counts.rejected += 1
            self._forget(change.path)
            return ToolResult(
                text=(
                    f"not applied — {rel} changed in the editor after you read it (the user is "
                    "typing there). Nothing was changed: read the file again and redo the edit "
                    "against its current text."
                ),
                ok=False,
                summary=f"not applied: {rel} changed in the editor",
                reason="stale",
                edits=((change.path, False),),
            )
        if not outcome.applied and outcome.failed:
            self.counts.rejected += 1  # the ask's `rejected` counts every edit not applied
            return self._not_taken(outcome, rel, ((change.path, False),))
        if not outcome.applied:
            self.counts.rejected += 1
            self._forget(change.path)
            why = f": {outcome.reason}" if outcome.reason else ""
            return ToolResult(
                text=(
                    f"not applied — the user rejected this edit to {rel}{why}. The file is "
                    "unchanged by you; read it again before any new edit, and ask the user if "
                    "the reason is unclear."
                ),
                ok=False,
                summary=f"rejected {rel}{why}",
                reason="rejected",
                edits=((change.path, False),),
            )
        self.counts.applied += 1
        landed = await self._landed(change)
        if landed is None or landed.text != change.after:
            return self._landed_otherwise(rel, change, landed)
        self._saw(change.path, landed, applied=True)
        diff = unified_diff(rel, change.before or "", change.after or "")
        verb = "created" if created else "applied"
        said = f"{verb}: {rel}\n{diff}"
        if merged is not None:
            said = f"{merged.describe(rel)}.\n{said}"
        return ToolResult(
            text=said,
            ok=True,
            summary=f"{verb} {rel} ({_diff_size(diff)})",
            edits=((change.path, True),),
        )

    def _not_taken(
        self, outcome: EditOutcome, names: str, edits: tuple[tuple[Path, bool], ...]
    ) -> ToolResult:
        """The editor could not apply the edit, through no choice of the user's."""
        return ToolResult(
            text=(
                f"not applied — {outcome.reason}. Nothing was changed in {names}. This is not "
                "the user's decision: tell them in your answer what you wanted to change, as "
                "a diff they can apply themselves."
            ),
            ok=False,
            summary=f"not applied: {outcome.reason}"[:200],
            reason="editor",
            edits=edits,
        )

    def _landed_otherwise(
        self, rel: str, change: FileChange, landed: Document | None
    ) -> ToolResult:
        """The editor said it applied the edit, but the file holds something else: tell the
        model which hunks landed, which the user left out, and what they wrote instead."""
        self._forget(change.path)
        if landed is None or change.after is None:
            text = (
                f"the editor applied an edit to {rel}, but the file now differs from what you "
                "proposed (the user may have kept only some of the hunks or typed since): read "
                "it again before editing it further."
            )
        else:
            # The user's version counts as the agent's doing: the model hears it from here,
            # not again from <file_changes>.
            if self.tracker is not None:
                self.tracker.agent_applied(change.path, landed.text, self.tracker_key)
            text = hunk_outcomes(change.before or "", change.after, landed.text).message(rel)
        return ToolResult(
            text=text,
            ok=True,
            summary=f"applied {rel} (changed by the user)",
            edits=((change.path, True),),
        )

    async def _landed(self, change: FileChange) -> Document | None:
        """What the file holds once an edit the editor says it applied shows up: the new text,
        or (after `LANDING_WAIT_S`) whatever is there instead; None when the file is gone.
        For a deletion: an empty document once neither a buffer nor a file is left."""
        deadline = time.monotonic() + LANDING_WAIT_S
        while True:
            if change.after is None:
                buffer = await self.port.read_document(change.path)
                if buffer is None and not await asyncio.to_thread(change.path.exists):
                    return Document("", None)
                document: Document | None = buffer
            else:
                try:
                    document = await self.current(change.path)
                except ToolError:
                    document = None
                if document is not None and document.text == change.after:
                    return document
            if time.monotonic() >= deadline:
                return document if change.after is not None else None
            await asyncio.sleep(0.02)

    def _saw(self, path: Path, document: Document, *, applied: bool = False) -> None:
        """The model now knows `path` as `document` holds it (it read it, or its edit landed)."""
        self.reads[path] = files.content_hash(document.text)
        if document.version is not None:
            self.read_versions[path] = document.version
        else:
            self.read_versions.pop(path, None)
        if self.tracker is not None:
            if applied:
                self.tracker.agent_applied(path, document.text, self.tracker_key)
            else:
                self.tracker.agent_read(path, document.text, self.tracker_key)

    def _forget(self, path: Path) -> None:
        """The model's picture of `path` is out of date: it must read it again."""
        self.reads.pop(path, None)
        self.read_versions.pop(path, None)


async def _syntax_guard(rel: str, before: str | None, after: str) -> None:
    """Refuse `after` when it brings syntax errors `before` did not have (parsed off the loop)."""
    message = await asyncio.to_thread(syntax.check, rel, before, after)
    if message:
        raise ToolError(message, reason="syntax")


async def editor_view(port: EditorPort, workspace: Workspace, path: Path) -> Document:
    """The file as the editor shows it: the open buffer, else the disk (read off the loop)."""
    document = await port.read_document(path)
    if document is not None:
        return document
    return await asyncio.to_thread(workspace.read_disk, path)


def _parse_arguments(name: str, arguments: str) -> dict[str, Any]:
    """Check the model's JSON arguments against the tool's parameters."""
    if name not in _REQUIRED:
        raise ToolError(f"unknown tool {name!r}: use one of {', '.join(_REQUIRED)}")
    try:
        args = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as error:
        raise ToolError(
            f"the arguments of {name} are not valid JSON ({error.msg} at char {error.pos}): "
            "send the call again with one JSON object",
            reason="bad_arguments",
        ) from None
    if not isinstance(args, dict):
        raise ToolError(
            f"the arguments of {name} must be a JSON object, not {type(args).__name__}",
            reason="bad_arguments",
        )
    required, optional = _REQUIRED[name], _OPTIONAL[name]
    missing = [key for key in required if key not in args]
    if missing:
        raise ToolError(
            f"{name} needs {', '.join(missing)}: send the call again with "
            + ", ".join(f"{key} ({required[key].__name__})" for key in required),
            reason="bad_arguments",
        )
    checked: dict[str, Any] = {}
    for key, value in args.items():
        expected = required.get(key) or optional.get(key)
        if expected is None or value is None:
            continue  # unknown keys are ignored, like the LSP commands do
        if expected is int and isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise ToolError(
                f"{name}: {key} must be a {expected.__name__}, got {type(value).__name__}",
                reason="bad_arguments",
            )
        checked[key] = value
    return checked


_STRICTNESS = {permissions.ALLOW: 0, permissions.ASK: 1, permissions.DENY: 2}


def _patch_paths(args: Mapping[str, Any]) -> list[str]:
    """The files an `apply_patch` call names; none when it is not one or does not parse (the
    tool itself then says what is wrong)."""
    text = args.get("patch")
    if not isinstance(text, str):
        return []
    try:
        return patch.paths(patch.parse_patch(text))
    except ToolError:
        return []


class _Denied(ToolError):
    """The call must not run; carries the `permission` event to report."""

    def __init__(self, message: str, event: dict[str, Any]) -> None:
        super().__init__(message, reason="denied")
        self.event = event


def _call_text(name: str, args: Mapping[str, Any]) -> str:
    """The call in short, for a question or a refusal."""
    if name == "bash":
        command = str(args.get("command", ""))
        return f"the command `{command if len(command) <= 300 else command[:297] + '...'}`"
    if isinstance(args.get("path"), str):
        return f"{name} on {args['path']}"
    return name


def _question(name: str, what: str, reason: str, sandboxed: bool) -> str:
    """The `window/showMessageRequest` text for an `ask`."""
    if name == "bash" and not sandboxed:
        return (
            f"lsp-agent wants to run {what} UNSANDBOXED: no sandbox is available on this "
            f"machine, so it could change or read anything you can. ({reason})"
        )
    if name == "bash":
        return f"lsp-agent wants to run {what} in the sandbox: {reason}."
    return f"lsp-agent wants to use {what}: {reason}."


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0][:200]


def _diff_size(diff: str) -> str:
    lines = diff.splitlines()
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return f"+{added} -{removed}"
