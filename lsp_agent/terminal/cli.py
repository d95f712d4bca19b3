"""The command line: `serve` for editors, `run` for a terminal, `doctor`, `sessions`.

User mistakes get one line on stderr and a non-zero exit, never a traceback. `lsp-agent run`'s
editor is the terminal (`terminal/port.py`); `doctor` is in `terminal/doctor.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsp_agent import __version__
from lsp_agent.errors import UserError

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 130


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
    doctor = commands.add_parser("doctor", help="check the set-up and print what is in effect")
    doctor.add_argument(
        "--json", action="store_true", help="print the checks as JSON (for editor health checks)"
    )
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
            from lsp_agent.terminal.doctor import doctor

            return asyncio.run(doctor(as_json=args.json))
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
        # Ready for the first ask once `initialize` is answered: see lsp_agent/lsp/boot.py.
        from lsp_agent.lsp.boot import serve_stdio

        end_process(serve_stdio())
    host, _, port = tcp.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--tcp wants HOST:PORT, e.g. 127.0.0.1:2087, not {tcp!r}")
    end_process(_serve_tcp(host, int(port)))


def _serve_tcp(host: str, port: int) -> int:
    """Listen on `host:port` and serve the first editor that connects."""
    import socket

    from lsp_agent.lsp.app import create_server
    from lsp_agent.lsp.connection import serve

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
    from lsp_agent.agent.sessions import build_agent
    from lsp_agent.agent.turn import COMPLETED, FAILED, MAX_TURNS
    from lsp_agent.config import load_settings
    from lsp_agent.terminal.port import TerminalPort

    settings, warnings = load_settings()
    for warning in warnings:
        print(f"lsp-agent: {warning}", file=sys.stderr)
    color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    port = TerminalPort(yes=yes, out=sys.stdout, err=sys.stderr, color=color)
    agent = build_agent(settings, root, port, auto_approve=_auto_approved(yes, yes_commands))
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
    return EXIT_FAILED if result.status in (FAILED, MAX_TURNS) else EXIT_CANCELLED


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

    try:
        models = await agent.provider.list_models()
    except ProviderError as error:
        return (
            f"no model configured, and {error.message}; once an endpoint answers "
            "(e.g. `ollama serve`), set LSP_AGENT_MODEL"
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
