"""The tool belt the model sees: each tool's schema, its arguments checked once, and its run.

Every call goes gate → tool → cap: the gate (`gate.Gate`) says allow, ask the user, or deny;
the tool runs; its result is capped on arrival (`context.cap`) and, when it carries outside text
(files, command output, search hits), marked `<untrusted>`. A `ToolError` becomes a result that
says what went wrong and what to do next; the turn goes on. Edits never touch the disk here:
they are planned against the text the editor shows and proposed through the editor port.

`Toolbox` holds what one session's tools keep between turns (what the model read, the plan, the
skills, what the user allowed, its MCP servers' tools); what belongs to one turn (review or auto,
the turn's edit counts, its event stream) comes with each call as a `TurnState`.

Tools of MCP servers (`mcp__<server>__<tool>`, `lsp_agent/mcp/`) pass the same belt: their
arguments checked against the server's schema, the gate (asked by default), the call, the cap,
the untrusted marking. The session's list of them is fixed by `prepare` at its first turn.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsp_agent.config import Settings
from lsp_agent.context.cap import Spills, render
from lsp_agent.errors import ToolError
from lsp_agent.messages import NAMELESS_TOOL
from lsp_agent.port import Document, EditorPort
from lsp_agent.safety.limits import Budget
from lsp_agent.safety.sandbox import Sandbox
from lsp_agent.tools import files, patch, shell
from lsp_agent.tools.editing import EditTools
from lsp_agent.tools.gate import Denied, Emit, Gate, shown
from lsp_agent.tools.propose import Proposer
from lsp_agent.tools.reads import ChangeWitness, Reads
from lsp_agent.tools.results import EditCounts, ToolResult
from lsp_agent.tools.skills import LOAD_SKILL, SkillLocks, load_skill_schema
from lsp_agent.tools.stats import EDIT_TOOLS, EditAttempt, EditStats
from lsp_agent.tools.todo import TODO_SCHEMA, Plan
from lsp_agent.tools.workspace import Workspace

if TYPE_CHECKING:
    from lsp_agent.mcp.catalog import McpTool
    from lsp_agent.mcp.hub import McpHub, McpTools

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

CHANGING_TOOLS = frozenset({*EDIT_TOOLS, "bash"})
"""The tools that change files or run commands: not offered in mode `ask`."""

_JSON_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}
"""How a schema's scalar types are checked; arrays and objects are checked by the tool."""


@dataclass
class TurnState:
    """What one turn lends the tools it runs."""

    review: bool = True
    """Edits must be confirmed by the user (mode `review`); `auto` applies them directly."""
    counts: EditCounts = field(default_factory=EditCounts)
    """The turn's edits, as the `ask` result reports them."""
    emit: Emit = lambda kind, **fields: None
    """The turn's event stream (`question` events come from here)."""
    read_only: bool = False
    """Mode `ask`: the user wants an answer, not changes; no edit or command runs."""


Handler = Callable[[Mapping[str, Any], TurnState], Awaitable[ToolResult]]


class Toolbox:
    """Runs one session's tool calls against one workspace through one editor port."""

    def __init__(
        self,
        workspace: Workspace,
        port: EditorPort,
        *,
        settings: Callable[[], Settings] = Settings,
        sandbox: Sandbox | None = None,
        spills: Spills | None = None,
        auto_approve: frozenset[str] = frozenset(),
        skills: SkillLocks | None = None,
        tracker: ChangeWitness | None = None,
        tracker_key: str = "default",
        mcp: McpHub | None = None,
    ) -> None:
        self.workspace = workspace
        self.port = port
        self.settings = settings
        """The settings in effect (rules, cap, timeout), read at each call."""
        self.sandbox = sandbox if sandbox is not None else Sandbox(workspace.root)
        """Where commands run (the probe runs on first use)."""
        self.spills = spills if spills is not None else Spills()
        """This session's spill files, swept at the end of each turn."""
        self.plan = Plan()
        """The session's plan, replaced by the `todo` tool and shown in the reminder."""
        self.skills = skills
        """The session's skills and which of their tools are locked; None without skills."""
        self.edit_stats = EditStats()
        """The session's edit attempts: how many landed, at the first try, why the others failed."""
        self.on_edit: Callable[[EditAttempt], None] | None = None
        """Hears each edit attempt after it is counted (the agent keeps it in the transcript)."""
        self.reads = Reads(tracker, tracker_key)
        """What the model has seen of each file."""
        self.gate = Gate(workspace.root, port, settings, self.sandbox, auto_approve=auto_approve)
        """Decides each call, asking the user when the rules say so."""
        self.edits = EditTools(Proposer(workspace, port, self.reads))
        self.mcp_hub = mcp
        """The workspace's MCP servers; None when the agent has none to offer."""
        self.mcp: McpTools | None = None
        """This session's MCP tools, fixed by `prepare` at its first turn (None before)."""
        self._handlers: dict[str, Handler] = {
            "read_file": self._read_file,
            "search": self._search,
            "list_files": self._list_files,
            "bash": self._bash,
            "edit_file": self._edit_file,
            "write_file": self._write_file,
            "apply_patch": self._apply_patch,
            "todo": self._todo,
            LOAD_SKILL: self._load_skill,
        }

    def schemas(self, read_only: bool = False) -> list[dict[str, Any]]:
        """The tools to offer the model: the belt, `load_skill` when there are skills, then
        the session's MCP tools; `read_only` (mode `ask`): without the tools that edit or run
        commands, and only the MCP tools their server marks read-only (asked all the same)."""
        offered = TOOL_SCHEMAS
        if read_only:
            offered = [s for s in TOOL_SCHEMAS if s["function"]["name"] not in CHANGING_TOOLS]
        mcp = self.mcp.schemas(read_only) if self.mcp is not None else []
        if self.skills is None:
            return [*offered, *mcp] if mcp or read_only else offered
        return [*offered, load_skill_schema(list(self.skills.skills.values())), *mcp]

    async def prepare(self, emit: Emit) -> list[str]:
        """Before the session's first model call: start the MCP servers it needs and fix its
        tool list for its life; what the model should hear about them (once). Nothing
        happens at later turns: servers configured meanwhile apply to the next session."""
        if self.mcp is not None or self.mcp_hub is None:
            return []

        async def ask(name: str, text: str, actions: Sequence[str]) -> str | None:
            return await self.gate.ask(name, text, actions, emit)

        self.mcp, notes = await self.mcp_hub.open_session(ask)
        return notes

    async def run(self, name: str, arguments: str, turn: TurnState | None = None) -> ToolResult:
        """Run one tool call; never raises for anything the model did wrong."""
        turn = turn if turn is not None else TurnState()
        permission: dict[str, Any] | None = None
        try:
            if turn.read_only and (
                name in CHANGING_TOOLS
                or (self.mcp is not None and name in self.mcp and not self.mcp[name].read_only)
            ):
                raise ToolError(
                    f"{name} is not available: the user asked this in ask mode, for an answer "
                    "without changes. Answer from what you can read; say what you would change.",
                    reason="ask_mode",
                )
            if self.skills is not None:
                self.skills.check(name)
            if self.mcp is not None and name in self.mcp:
                tool = self.mcp[name]
                args = mcp_arguments(tool, arguments)
                permission = await self.gate.permit_mcp(
                    name, tool.server, tool.tool, args, read_only=tool.read_only, emit=turn.emit
                )
                result = await self._call_mcp(tool, args)
            else:
                args = check_arguments(name, arguments, self.schemas())
                permission = await self._permit(name, args, turn)
                result = await self._handlers[name](args, turn)
        except ToolError as error:
            if isinstance(error, Denied):
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

    def end_turn(self) -> None:
        """The turn is over: its spill files go."""
        self.spills.sweep()

    async def current(self, path: Path) -> Document:
        """The file as the editor shows it: the open buffer, else the disk."""
        return await editor_view(self.port, self.workspace, path)

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

    def _capped(self, name: str, result: ToolResult) -> ToolResult:
        """Cap the result on arrival and mark outside text untrusted."""
        limit = self.settings().tool_output_cap
        if result.output is not None:
            result.text = result.text + render(result.output, result.source or name)
            return result
        excerpt = self.spills.cap(result.text, limit, name)
        result.text = render(excerpt, result.source)
        return result

    async def _permit(
        self, name: str, args: Mapping[str, Any], turn: TurnState
    ) -> dict[str, Any] | None:
        subject = dict(args)
        if isinstance(args.get("path"), str):
            subject["path"] = self._rule_path(args["path"])
        # A patch is judged file by file, like the edits it stands for; the strictest wins.
        subjects = [{"path": self._rule_path(p)} for p in _patch_paths(args)] or [subject]
        return await self.gate.permit(
            name,
            subjects,
            _call_text(name, args),
            readable=self.spills.existing(),
            emit=turn.emit,
            previewed=turn.review,
        )

    def _rule_path(self, path: str) -> str:
        """The path as rules see it: relative to the workspace when it is inside."""
        try:
            return self.workspace.relative(self.workspace.resolve(path))
        except ToolError:
            return path

    async def _read_file(self, args: Mapping[str, Any], turn: TurnState) -> ToolResult:
        path = args["path"]
        target = self.workspace.resolve(path)
        if await asyncio.to_thread(target.is_dir):
            raise ToolError(f"{path} is a folder: use list_files to see what it holds")
        document = await self.current(target)
        rel = self.workspace.relative(target)
        limit = min(max(args.get("limit", 200), 1), 200)
        text = files.format_read(rel, document.text, args.get("start", 1), limit)
        self.reads.saw(target, document)
        return ToolResult(text=text, ok=True, summary=f"read {rel}", source=f"read_file {rel}")

    async def _search(self, args: Mapping[str, Any], turn: TurnState) -> ToolResult:
        text = await files.search(
            self.workspace, args["pattern"], args.get("path", ""), args.get("glob")
        )
        return ToolResult(text=text, ok=True, summary=_first_line(text), source="search")

    async def _list_files(self, args: Mapping[str, Any], turn: TurnState) -> ToolResult:
        text = await files.list_files(self.workspace, args.get("path", ""), args.get("glob"))
        return ToolResult(text=text, ok=True, summary=_first_line(text), source="list_files")

    async def _bash(self, args: Mapping[str, Any], turn: TurnState) -> ToolResult:
        settings = self.settings()
        timeout = args.get("timeout")
        seconds = float(timeout) if timeout is not None else settings.command_timeout
        result = await shell.run_command(
            args["command"],
            sandbox=self.sandbox,
            spills=self.spills,
            limit=settings.tool_output_cap,
            timeout=seconds,
            budget=Budget(
                settings.command_memory_mb, settings.command_file_mb, settings.command_disk_mb
            ),
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

    async def _edit_file(self, args: Mapping[str, Any], turn: TurnState) -> ToolResult:
        return await self.edits.edit_file(
            args["path"], args["old"], args["new"], review=turn.review, counts=turn.counts
        )

    async def _write_file(self, args: Mapping[str, Any], turn: TurnState) -> ToolResult:
        return await self.edits.write_file(
            args["path"], args["content"], review=turn.review, counts=turn.counts
        )

    async def _apply_patch(self, args: Mapping[str, Any], turn: TurnState) -> ToolResult:
        return await self.edits.apply_patch(args["patch"], review=turn.review, counts=turn.counts)

    async def _todo(self, args: Mapping[str, Any], turn: TurnState) -> ToolResult:
        text = self.plan.replace(args)
        return ToolResult(text=text, ok=True, summary=_first_line(text))

    async def _call_mcp(self, tool: McpTool, args: Mapping[str, Any]) -> ToolResult:
        assert self.mcp is not None
        limit = self.settings().tool_output_cap
        answer = await self.mcp.call(tool, args, self.spills, limit)
        return ToolResult(
            text=answer.text,
            ok=answer.ok,
            summary=answer.summary[:200],
            reason=answer.reason,
            # What the server said is outside text (marked); what we say of a fault is not.
            source=f"mcp server {tool.server}, tool {tool.tool}" if answer.output else None,
            output=answer.output,
        )

    async def _load_skill(self, args: Mapping[str, Any], turn: TurnState) -> ToolResult:
        if self.skills is None:
            raise ToolError(f"unknown tool {LOAD_SKILL!r}: this workspace has no skills")
        loaded = self.skills.load_skill(args["name"])
        return ToolResult(text=loaded.text(), ok=True, summary=f"loaded skill {args['name']}")


async def editor_view(port: EditorPort, workspace: Workspace, path: Path) -> Document:
    """The file as the editor shows it: the open buffer, else the disk (read off the loop)."""
    document = await port.read_document(path)
    if document is not None:
        return document
    return await asyncio.to_thread(workspace.read_disk, path)


def check_arguments(name: str, arguments: str, schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """The model's JSON arguments, checked against the tool's schema (the one it was shown)."""
    by_name = {schema["function"]["name"]: schema["function"] for schema in schemas}
    if name == NAMELESS_TOOL:
        raise ToolError(
            "this tool call came without a tool name: send it again, naming one of "
            + ", ".join(by_name),
            reason="bad_call",
        )
    function = by_name.get(name)
    if function is None:
        raise ToolError(
            f"unknown tool {name!r}: use one of {', '.join(by_name)}", reason="bad_call"
        )
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
    parameters = function.get("parameters", {})
    properties: dict[str, Any] = parameters.get("properties", {})
    required: list[str] = parameters.get("required", [])
    kinds = {key: _JSON_TYPES.get(spec.get("type", ""), object) for key, spec in properties.items()}
    missing = [key for key in required if key not in args]
    if missing:
        raise ToolError(
            f"{name} needs {', '.join(missing)}: send the call again with "
            + ", ".join(f"{key} ({properties[key].get('type', 'any')})" for key in required),
            reason="bad_arguments",
        )
    checked: dict[str, Any] = {}
    for key, value in args.items():
        expected = kinds.get(key)
        if expected is None or value is None:
            continue  # unknown keys are ignored, like the LSP commands do
        if expected is int and isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        wrong_bool = expected in (int, float) and isinstance(value, bool)
        if not isinstance(value, expected) or wrong_bool:
            raise ToolError(
                f"{name}: {key} must be a {properties[key].get('type')}, got "
                f"{type(value).__name__}",
                reason="bad_arguments",
            )
        checked[key] = value
    return checked


def mcp_arguments(tool: McpTool, arguments: str) -> dict[str, Any]:
    """The model's JSON arguments for an MCP tool, as they are, once they fit its schema."""
    try:
        args = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as error:
        raise ToolError(
            f"the arguments of {tool.name} are not valid JSON ({error.msg} at char "
            f"{error.pos}): send the call again with one JSON object",
            reason="bad_arguments",
        ) from None
    if not isinstance(args, dict):
        raise ToolError(
            f"the arguments of {tool.name} must be a JSON object, not {type(args).__name__}",
            reason="bad_arguments",
        )
    problem = tool.check(args)
    if problem is not None:
        raise ToolError(
            f"the arguments of {tool.name} do not fit its schema: {problem}. Send the call "
            "again with arguments that do",
            reason="bad_arguments",
        )
    return args


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


def _call_text(name: str, args: Mapping[str, Any]) -> str:
    """The call in short, for a question or a refusal."""
    if name == "bash":
        # Whole: a question must never hide the end of a command (the judge refuses commands
        # too long to show).
        return f"the command `{shown(str(args.get('command', '')))}`"
    if isinstance(args.get("path"), str):
        return f"{name} on {args['path']}"
    return name


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0][:200]
