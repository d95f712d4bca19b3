"""The permission gate every tool call passes: allow, ask the user, or deny.

`safety.permissions.decide` judges the call in code, in a worker thread (it looks at the
workspace and may ask git about its history: the editor must not wait for it); the gate turns an
`ask` into a question to the user through the editor port, with a time limit
(`questionTimeout`): no answer by then counts as Deny, and so does a dismissed question or a
client that cannot ask. The question shows the whole command, with characters that could hide
part of it made visible. While a question is open the turn's events say so (`question`: open,
then answered, timedOut or withdrawn); a question the turn no longer waits for (cancelled,
timed out) is withdrawn from the editor by the port.

A tool of an MCP server is decided by its own rule kind (`permit_mcp`: asked by default, its
arguments shown whole); `ask` puts the other questions a turn may have, whether to start a
workspace's MCP server, the same way.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lsp_agent.config import Settings
from lsp_agent.errors import ToolError
from lsp_agent.port import EditorPort
from lsp_agent.safety import permissions
from lsp_agent.safety.sandbox import Sandbox
from lsp_agent.tools.shell import run_env

_STRICTNESS = {permissions.ALLOW: 0, permissions.ASK: 1, permissions.DENY: 2}

Emit = Callable[..., None]
"""Reports one step of the turn: `emit(kind, **fields)`."""


class Denied(ToolError):
    """The call must not run; carries the `permission` event to report."""

    def __init__(self, message: str, event: dict[str, Any]) -> None:
        super().__init__(message, reason="denied")
        self.event = event


class Gate:
    """Decides one session's tool calls, and asks its user when the rules say `ask`."""

    def __init__(
        self,
        root: Path,
        port: EditorPort,
        settings: Callable[[], Settings],
        sandbox: Sandbox,
        *,
        auto_approve: frozenset[str] = frozenset(),
    ) -> None:
        self.root = root
        """The workspace folder the rules judge paths from."""
        self.port = port
        self.settings = settings
        """The settings in effect (rules, question time limit), read at each call."""
        self.sandbox = sandbox
        """Where commands run: without a working sandbox every command is asked."""
        self.auto_approve = auto_approve
        """Tools whose `ask` is answered Allow without asking (the CLI's --yes, --yes-commands);
        never for a command that would run unsandboxed."""
        self.session_rules = permissions.SessionRules()
        """What the user allowed for this session (`Allow for this session`)."""
        self._questions = itertools.count(1)

    async def permit(
        self,
        name: str,
        subjects: Sequence[Mapping[str, Any]],
        what: str,
        *,
        readable: Sequence[Path],
        emit: Emit,
        previewed: bool = True,
    ) -> dict[str, Any] | None:
        """Decide a call on `subjects` (one per file a patch touches; the strictest wins).

        Returns the `permission` event when the user was asked (None when allowed outright);
        raises `Denied` when it must not run. `what` names the call in the question;
        `previewed` says whether the user sees an edit before it lands (mode `review`).
        """
        settings = self.settings()
        rules = [permissions.Rule.from_setting(raw) for raw in settings.permissions]
        sandbox = self.sandbox
        session = self.session_rules
        # The terminal's --yes applies edits unseen: no preview asks the user then either.
        previewed = previewed and name not in self.auto_approve

        def decide_all() -> tuple[bool, list[permissions.Verdict]]:
            # The first call probes the machine with a real sandboxed command.
            sandboxed = sandbox.availability.sandboxed if name == "bash" else True
            path = run_env()["PATH"] if name == "bash" else None
            verdicts = [
                permissions.decide(
                    name,
                    subject,
                    rules=rules,
                    session=session,
                    root=self.root,
                    sandboxed=sandboxed,
                    readable=readable,
                    scanner=sandbox.scanner,
                    history=sandbox.repository.secrets,
                    path=path,
                    previewed=previewed,
                )
                for subject in subjects
            ]
            return sandboxed, verdicts

        if name == "bash" or (name in permissions.EDIT_TOOLS and not previewed):
            # A command is read by the shell reader (a long one takes a tenth of a second), and
            # an unpreviewed edit resolves its path on the disk: off the event loop.
            sandboxed, verdicts = await asyncio.to_thread(decide_all)
        else:
            # The user's rules on a path, nothing read: handing that to a thread would cost more
            # than deciding it (every read, search and todo call of a turn passes here).
            sandboxed, verdicts = decide_all()
        verdict = max(verdicts, key=lambda v: _STRICTNESS[v.decision])
        if verdict.decision == permissions.ALLOW:
            return None
        if verdict.decision == permissions.DENY:
            raise refused_by_policy(name, what, verdict.reason)
        if name in self.auto_approve and sandboxed and verdict.unattended:
            return {"name": name, "decision": "allow", "asked": False, "reason": verdict.reason}
        covers = _covers(name, [v.shape for v in verdicts if v.decision == permissions.ASK])
        question = _question(name, what, verdict.reason, sandboxed) + " " + covers
        return await self._settle(name, what, question, covers, verdicts, settings, emit)

    async def permit_mcp(
        self,
        name: str,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        read_only: bool,
        emit: Emit,
    ) -> dict[str, Any] | None:
        """Decide a call of an MCP server's tool (`permissions.decide_mcp`): asked by default,
        whatever the mode, with the arguments shown whole; as `permit` for the rest."""
        settings = self.settings()
        rules = [permissions.Rule.from_setting(raw) for raw in settings.permissions]
        verdict = await asyncio.to_thread(
            permissions.decide_mcp,
            name,
            arguments,
            rules=rules,
            session=self.session_rules,
            root=self.root,
            read_only=read_only,
        )
        what = f"the tool {tool!r} of the MCP server {server!r}"
        if verdict.decision == permissions.ALLOW:
            return None
        if verdict.decision == permissions.DENY:
            raise refused_by_policy(name, what, verdict.reason)
        shown_arguments = json.dumps(dict(arguments), indent=2, ensure_ascii=False)
        marked = " (the server marks it read-only)" if read_only else ""
        covers = (
            f"“Allow for this session” allows the tool {tool!r} of {server!r} again, with any "
            "arguments that name no secret, until the session ends."
        )
        question = (
            f"lsp-agent wants to call {what}{marked} — {name} — with these arguments:\n"
            f"{shown(shown_arguments)}\nAsked because {verdict.reason}. {covers}"
        )
        return await self._settle(name, what, question, covers, [verdict], settings, emit)

    async def ask(self, name: str, text: str, actions: Sequence[str], emit: Emit) -> str | None:
        """Ask the user a question of another kind (whether to start a workspace's MCP
        server), shown whole like a command; the answer, or None when there is none."""
        answer, _ = await self._ask(name, shown(text), "", self.settings(), emit, actions)
        return answer

    async def _settle(
        self,
        name: str,
        what: str,
        question: str,
        covers: str,
        verdicts: Sequence[permissions.Verdict],
        settings: Settings,
        emit: Emit,
    ) -> dict[str, Any]:
        """Ask the question of an `ask`; the `permission` event when allowed, `Denied`
        otherwise. `Allow for this session` allows each asked verdict's shape from now on."""
        answer, unanswered = await self._ask(name, question, covers, settings, emit)
        if answer == permissions.ANSWER_SESSION:
            for asked in verdicts:
                if asked.decision == permissions.ASK:
                    self.session_rules.allow(name, asked.shape)
        if answer in (permissions.ANSWER_ALLOW, permissions.ANSWER_SESSION):
            scope = "session" if answer == permissions.ANSWER_SESSION else "once"
            return {"name": name, "decision": "allow", "asked": True, "scope": scope}
        why = unanswered or "the user denied it"
        raise Denied(
            f"not run: {what} needs the user's approval and {why}. Nothing ran. Do not retry "
            "it; continue without it, or ask the user in your answer.",
            {"name": name, "decision": "deny", "asked": True},
        )

    async def _ask(
        self,
        name: str,
        text: str,
        covers: str,
        settings: Settings,
        emit: Emit,
        choices: Sequence[str] = permissions.ANSWERS,
    ) -> tuple[str | None, str | None]:
        """Ask the user; the answer, and why there is none when there is none. `covers` says
        what `Allow for this session` allows (the event carries it apart, for a chat)."""
        limit = settings.question_timeout
        question = f"q{next(self._questions)}"
        actions = list(choices)
        emit(
            "question",
            id=question,
            state="open",
            name=name,
            text=text,
            actions=actions,
            timeoutSeconds=limit,
            **({"sessionCovers": covers} if covers else {}),
        )
        try:
            answer = await asyncio.wait_for(self.port.ask_user(text, actions), limit)
        except TimeoutError:
            emit("question", id=question, state="timedOut", name=name)
            return None, f"nobody answered the question within {limit:g} s"
        except asyncio.CancelledError:
            emit("question", id=question, state="withdrawn", name=name)
            raise
        if answer not in actions:
            emit("question", id=question, state="answered", name=name, answer=None)
            return None, "nobody answered the question (it was dismissed)"
        emit("question", id=question, state="answered", name=name, answer=answer)
        return answer, None


def _question(name: str, what: str, reason: str, sandboxed: bool) -> str:
    """The `window/showMessageRequest` text for an `ask`: the whole call, the reason last
    (said once: a command asked only because it would run unsandboxed has no other)."""
    if name == "bash" and not sandboxed:
        warning = (
            f"lsp-agent wants to run {what} UNSANDBOXED: no sandbox is available on this "
            "machine, so it could change or read anything you can."
        )
        if reason.startswith("no sandbox is available"):  # the warning says it already
            return warning
        return f"{warning} Asked also because {reason}."
    if name == "bash":
        return f"lsp-agent wants to run {what} in the sandbox. Asked because {reason}."
    return f"lsp-agent wants to use {what}: {reason}."


def _covers(name: str, shapes: Sequence[str]) -> str:
    """What `Allow for this session` allows, said in the question: the rule it adds matches
    this exact command (or these paths) only."""
    if name == "bash":
        return (
            "“Allow for this session” allows this exact command again until the session ends; "
            "any other command, even a similar one, is asked."
        )
    paths = ", ".join(shapes) or "this file"
    return (
        f"“Allow for this session” allows {name} on {paths} again until the session ends; "
        "other files are asked."
    )


def shown(command: str) -> str:
    """`command` whole, as a question shows it: characters that could hide or reorder part of
    it (control characters, ANSI escapes, bidirectional overrides, zero-width characters) are
    written as escapes; newlines and tabs stay."""
    return "".join(_visible(char) for char in command)


def _visible(char: str) -> str:
    code = ord(char)
    if char in "\n\t":
        return char
    hidden = (
        code < 0x20
        or 0x7F <= code <= 0x9F
        or 0x200B <= code <= 0x200F
        or 0x2028 <= code <= 0x202E
        or 0x2060 <= code <= 0x2069
        or code == 0xFEFF
        or unicodedata.category(char) in ("Cf", "Co", "Cn")
    )
    if not hidden:
        return char
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def refused_by_policy(name: str, what: str, reason: str) -> Denied:
    """The refusal of a call the rules deny: what the model is told, and the event."""
    return Denied(
        f"refused by policy: {what} ({reason}). Nothing ran. Do not retry it in another form; "
        "find another way, or tell the user what you need.",
        {"name": name, "decision": "deny", "asked": False, "reason": reason},
    )
