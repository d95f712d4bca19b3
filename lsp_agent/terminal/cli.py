"""The command line: `serve` for editors, `run` for a terminal, `doctor`, `sessions`.

`TerminalPort` is the terminal's `EditorPort`: the answer streams to stdout, each edit is shown as a
coloured unified diff and written to disk when the user says yes (or `--yes`). User mistakes get
one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import platform
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from lsp_agent import __version__
from lsp_agent.errors import UserError
from lsp_agent.port import Document, EditOutcome, EditProposal

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 130


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

    async def propose_edit(self, proposal: EditProposal) -> EditOutcome:
        from lsp_agent.tools.edits import unified_diff

        self._end_line()
        for change in proposal.changes:
            rel = os.path.relpath(change.path)
            diff = unified_diff(rel, change.before or "", change.after or "")
            self.out.write(self._colour_diff(diff))
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
            self.err.write(self._dim(f"→ {event['name']} {_short(event['args'])}") + "\n")
        elif kind == "toolResult":
            mark = "✓" if event["ok"] else "✗"
            self.err.write(self._dim(f"  {mark} {event['summary']}") + "\n")
        elif kind == "permission" and event["decision"] == "deny":
            self.err.write(self._dim(f"  ⊘ {event['name']} not run") + "\n")
        elif kind == "status":
            self._end_line()

    def log(self, message: str) -> None:
        logging.getLogger("lsp_agent").debug(message)

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
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    return text[1:] if text.startswith("\ufeff") else text


def _write_text(path: Path, text: str, bom: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))


def _short(args: Any) -> str:
    if isinstance(args, dict):
        keys = ("path", "pattern", "glob", "command")
        text = " ".join(f"{k}={v!r}" for k, v in args.items() if k in keys)
        return text or ""
    return str(args)[:80]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lsp-agent", description="A coding agent behind the Language Server Protocol."
    )
    parser.add_argument("--version", action="version", version=f"lsp-agent {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser("serve", help="the language server on stdio (what editors launch)")
    serve.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
    # Language clients (vscode-languageclient's stdio transport, others) append --stdio.
    serve.add_argument("--stdio", action="store_true", help="stdio, the default (accepted)")
    run = commands.add_parser("run", help="one agent turn in this terminal")
    run.add_argument("prompt", help="what the agent should do")
    run.add_argument("--workspace", type=Path, default=Path.cwd(), help="default: current folder")
    run.add_argument("--yes", action="store_true", help="apply edits without asking")
    run.add_argument(
        "--yes-commands",
        action="store_true",
        help="also run commands that need approval without asking (sandboxed ones only)",
    )
    run.add_argument("--session", help="continue this session (see `lsp-agent sessions`)")
    commands.add_parser("doctor", help="check the set-up and print what is in effect")
    sessions = commands.add_parser("sessions", help="list stored sessions")
    sessions.add_argument("--workspace", type=Path, default=Path.cwd())
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `lsp-agent` script."""
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        if args.command == "serve":
            return _serve(args.tcp)
        if args.command == "run":
            return _run(args)
        if args.command == "doctor":
            return asyncio.run(_doctor())
        if args.command == "sessions":
            return _sessions(args.workspace)
    except UserError as error:
        print(f"lsp-agent: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    raise AssertionError(args.command)


def _serve(tcp: str | None) -> int:
    """Serve one editor, then end the process (it never returns)."""
    from lsp_agent.lsp.connection import end_process

    if tcp is None:
        # Answers `initialize` before pygls is imported (DESIGN §8): see lsp_agent/lsp/boot.py.
        from lsp_agent.lsp.boot import serve_stdio

        end_process(serve_stdio())
    host, _, port = tcp.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--tcp wants HOST:PORT, e.g. 127.0.0.1:2087, not {tcp!r}")
    end_process(_serve_tcp(host, int(port)))


def _serve_tcp(host: str, port: int) -> int:
    """Listen on `host:port` and serve the first editor that connects."""
    import socket

    from lsp_agent.lsp.connection import serve
    from lsp_agent.lsp.server import create_server

    server = create_server()
    try:
        listener = socket.create_server((host, port))
    except OSError as error:
        raise UserError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    with listener:
        connection, _ = listener.accept()
    with connection, connection.makefile("rb") as reader, connection.makefile("wb") as writer:
        return serve(server, reader, writer)


def _workspace_dir(path: Path) -> Path:
    if not path.is_dir():
        raise UserError(f"workspace {path} is not a folder: pass --workspace DIR")
    return path.resolve()


def _run(args: argparse.Namespace) -> int:
    root = _workspace_dir(args.workspace)
    return asyncio.run(
        _run_turn(root, args.prompt, args.session, args.yes, yes_commands=args.yes_commands)
    )


async def _run_turn(
    root: Path, prompt: str, session_id: str | None, yes: bool, *, yes_commands: bool = False
) -> int:
    from lsp_agent.agent.sessions import COMPLETED, FAILED, Agent
    from lsp_agent.config import load_settings
    from lsp_agent.model import make_provider
    from lsp_agent.session.store import SessionStore
    from lsp_agent.tools.workspace import Workspace

    settings, warnings = load_settings()
    for warning in warnings:
        print(f"lsp-agent: {warning}", file=sys.stderr)
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    port = TerminalPort(yes=yes, out=sys.stdout, err=sys.stderr, color=color)
    agent = Agent(
        settings,
        Workspace(root, read_only=settings.read_only_paths),
        port,
        SessionStore(root),
        lambda s: make_provider(s.provider, s.base_url, s.model or "", s.api_key),
        auto_approve=_auto_approved(yes, yes_commands),
    )
    if settings.model is None:
        raise UserError(await _no_model_message(agent))
    session = agent.start(prompt, session_id)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, lambda: agent.cancel(session.id))
    try:
        result = await agent.wait(session)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        await agent.aclose()
    print(
        f"session {result.session}: {result.status}, edits applied {result.edits.applied}"
        f" of {result.edits.proposed}",
        file=sys.stderr,
    )
    if result.status == COMPLETED:
        return 0
    if result.error:
        print(f"lsp-agent: {result.error}", file=sys.stderr)
    return EXIT_FAILED if result.status in (FAILED, "max_turns") else EXIT_CANCELLED


def _auto_approved(yes: bool, yes_commands: bool) -> frozenset[str]:
    """Tools whose permission questions the flags answer: --yes for edits, --yes-commands for
    commands (never implied by --yes alone)."""
    tools: set[str] = set()
    if yes:
        tools.update(("edit_file", "write_file", "apply_patch"))
    if yes_commands:
        tools.add("bash")
    return frozenset(tools)


async def _no_model_message(agent: Any) -> str:
    """Why no turn can run without a model, with what the endpoint offers when it answers."""
    from lsp_agent.model import ProviderError

    base_url = agent.settings.base_url
    try:
        models = await agent.provider.list_models()
    except ProviderError as error:
        return (
            f"no model endpoint answers at {base_url} ({error.message}); start one "
            "(e.g. `ollama serve`) or set LSP_AGENT_BASE_URL, then set LSP_AGENT_MODEL"
        )
    finally:
        await agent.aclose()
    offer = f" (the endpoint offers: {', '.join(models[:8])})" if models else ""
    return f"no model configured: set LSP_AGENT_MODEL or lspAgent.model{offer}"


def _sessions(workspace: Path) -> int:
    from lsp_agent.session.store import SessionStore

    root = _workspace_dir(workspace)
    listed = SessionStore(root).list()
    if not listed:
        print(f"no sessions yet for {root}", file=sys.stderr)
        return 0
    for info in listed:
        print(f"{info.session}  {info.started}  {info.turns:>3} turns  {info.title}")
    return 0


async def _doctor() -> int:
    from lsp_agent.config import load_settings
    from lsp_agent.model import ProviderError, make_provider

    failures = 0

    def line(name: str, ok: bool, detail: str) -> None:
        nonlocal failures
        failures += 0 if ok else 1
        print(f"{'ok ' if ok else 'BAD'}  {name:<10} {detail}")

    line("python", sys.version_info >= (3, 10), f"{platform.python_version()} ({sys.executable})")
    line("lsp-agent", True, __version__)
    git = shutil.which("git")
    line("git", git is not None, _version([git, "--version"]) if git else "not found on PATH")
    from lsp_agent.tools.files import find_rg

    try:
        rg = find_rg()
        line("ripgrep", True, f"{_version([rg, '--version'])} ({rg})")
    except Exception as error:
        line("ripgrep", False, str(error))
    from lsp_agent.safety.sandbox import probe

    sandbox = probe()
    if sandbox.sandboxed:
        line("sandbox", True, f"{sandbox.kind} ({sandbox.reason})")
    else:
        # Not a failure: commands still run, each one after the user says yes.
        print(f"--   {'sandbox':<10} none: {sandbox.reason}; every command will be asked")
    settings, warnings = load_settings()
    for warning in warnings:
        line("config", False, warning)
    provider = make_provider(
        settings.provider, settings.base_url, settings.model or "", settings.api_key
    )
    try:
        models = await provider.list_models()
        line("endpoint", True, f"{settings.base_url} answers ({len(models)} models)")
        if settings.model is None:
            line("model", False, "not set: set LSP_AGENT_MODEL or lspAgent.model")
        elif models and settings.model not in models:
            line("model", False, f"{settings.model} is not listed by {settings.base_url}")
        else:
            line("model", True, settings.model)
    except ProviderError as error:
        line("endpoint", False, error.message)
    finally:
        await provider.aclose()
    print("config in effect:")
    for key, entry in settings.describe().items():
        print(f"     {key:<15} {entry['value']!s:<40} ({entry['source']})")
    return EXIT_FAILED if failures else 0


def _version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"cannot run: {error}"
    return out.stdout.splitlines()[0] if out.stdout else out.stderr.strip()
