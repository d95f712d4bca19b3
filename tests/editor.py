"""A scripted editor for end-to-end tests: a real LSP client (pytest-lsp) over stdio.

It launches `python -m lsp_agent serve` as a subprocess, speaks LSP with the capabilities of a real
editor (VS Code's or Neovim's, as recorded by pytest-lsp), keeps buffers, and answers
`workspace/applyEdit` the way an editor does: it checks the buffer version, applies the text edits
in the negotiated position encoding (its own code, independent of the server's), sends
`didChange` for open buffers, and writes closed files to disk.

Waits are on facts: an `lspAgent/event` arriving, a command's answer, the settings the server
reports in `lspAgent.status`; never on a clock.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TypeVar, cast

from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import make_test_lsp_client

_T = TypeVar("_T")
_Handler = TypeVar("_Handler", bound=Callable[..., Any])


def handles(client: LanguageClient, method: str) -> Callable[[_Handler], _Handler]:
    """`@handles(client, method)`: what the client does when the server sends `method` (pygls's
    `client.feature`, which is not annotated, so a handler it decorates would lose its types)."""
    return cast("Callable[[_Handler], _Handler]", client.feature(method))


Decision = Callable[[types.ApplyWorkspaceEditParams], "tuple[bool, str | None]"]


def accept(_: types.ApplyWorkspaceEditParams) -> tuple[bool, str | None]:
    return True, None


def reject(reason: str | None = None) -> Decision:
    def decide(_: types.ApplyWorkspaceEditParams) -> tuple[bool, str | None]:
        return False, reason

    return decide


@dataclass
class Buffer:
    text: str
    version: int


@dataclass
class Editor:
    """One editor window on one workspace folder."""

    client: LanguageClient
    root: Path
    capabilities_name: str
    buffers: dict[str, Buffer] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    edits_seen: list[types.ApplyWorkspaceEditParams] = field(default_factory=list)
    questions: list[types.ShowMessageRequestParams] = field(default_factory=list)
    decide: Decision = accept
    """How the user answers each proposed edit."""
    before_apply: Callable[[], Any] | None = None
    """Runs when an edit arrives, before it is applied (e.g. the user types meanwhile)."""
    answer: Callable[[types.ShowMessageRequestParams], str | None] | None = None
    """How the user answers `window/showMessageRequest`: an action title, or None to dismiss
    it. Unset: every question is dismissed."""
    encoding: str = "utf-16"
    state_dir: Path | None = None
    """Where the server keeps its transcripts (`LSP_AGENT_STATE_DIR`)."""
    session: str | None = None
    """The session `ask` goes to when the story names none; None: the server picks (the latest),
    as an editor that never started one explicitly."""
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    """Set, then replaced, whenever an `lspAgent/event` arrives: what `wait_for_event` awaits."""

    @property
    def vscode(self) -> bool:
        return self.capabilities_name == "visual-studio-code"

    def uri(self, rel: str) -> str:
        return (self.root / rel).as_uri()

    async def ask(self, prompt: str, **arguments: Any) -> Any:
        if self.session is not None:
            arguments.setdefault("session", self.session)
        return await self.command("lspAgent.ask", {"prompt": prompt, **arguments})

    def progress(self, token: Any) -> list[Any]:
        """The `$/progress` values received for a work-done token."""
        return self.client.progress_reports.get(token, [])

    async def command(self, name: str, *arguments: Any, token: Any = None) -> Any:
        if token is not None:
            self.client.progress_reports.setdefault(token, [])  # the client made this token
        result = await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command=name, arguments=list(arguments), work_done_token=token
            )
        )
        return namespace(result)

    async def tracker_ready(self, timeout: float = 60.0) -> None:
        """Return once the workspace's change tracker has started, asking `lspAgent.status`
        again after each answer (a hang guard of `timeout` seconds, not a timing assertion).

        For stories about what happens between two turns: a turn that ends while the tracker
        is still starting (a loaded machine can take seconds) takes a snapshot that says what
        it could not see, which is another story."""
        async with asyncio.timeout(timeout):
            while not (await self.command("lspAgent.status", {})).changes.ready:
                pass

    def open(self, rel: str, text: str | None = None, language: str = "plaintext") -> None:
        """The user opens a file (optionally with unsaved text different from the disk)."""
        if text is None:
            text = (self.root / rel).read_bytes().decode("utf-8").removeprefix("\ufeff")
        self.buffers[self.uri(rel)] = Buffer(text, 1)
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=self.uri(rel), language_id=language, version=1, text=text
                )
            )
        )

    def type(self, rel: str, text: str) -> None:
        """The user replaces the buffer's text (unsaved)."""
        uri = self.uri(rel)
        buffer = self.buffers[uri]
        buffer.text = text
        buffer.version += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(
                    uri=uri, version=buffer.version
                ),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def events_of(self, kind: str, **fields: Any) -> list[dict[str, Any]]:
        """The events of `kind` received so far whose `fields` have the given values."""
        return [
            e
            for e in self.events
            if e["kind"] == kind and all(e.get(k) == v for k, v in fields.items())
        ]

    def receive_event(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        self._arrived.set()
        self._arrived = asyncio.Event()

    async def wait_for_event(
        self, kind: str, timeout: float = 20.0, **fields: Any
    ) -> dict[str, Any]:
        """The first event of `kind` (with `fields`), once it has arrived (a hang guard of
        `timeout` seconds, not a timing assertion)."""
        found = await self._until(lambda: self.events_of(kind, **fields), repr(kind), timeout)
        return found[0]

    def streamed(self) -> str:
        """The answer streamed so far: the deltas of the `text` events joined."""
        return "".join(str(e["text"]) for e in self.events_of("text"))

    async def wait_for_text(self, text: str, timeout: float = 20.0) -> None:
        """Return once the answer streamed so far starts with `text` (a hang guard)."""
        await self._until(lambda: self.streamed().startswith(text), f"text for {text!r}", timeout)

    async def _until(self, fact: Callable[[], _T], what: str, timeout: float) -> _T:
        """`fact()` once it is truthy, checked again whenever an event arrives."""

        async def arrival() -> _T:
            while not (found := fact()):
                await self._arrived.wait()
            return found

        try:
            return await asyncio.wait_for(arrival(), timeout)
        except TimeoutError:
            raise AssertionError(f"no {what} event within {timeout}s; got {self.events}") from None

    async def configure(self, settings: dict[str, Any]) -> None:
        """The user changes the `lspAgent` settings; returns once the server runs with them.

        The server reads them again on `didChangeConfiguration` (a `workspace/configuration`
        request); `lspAgent.status` then reports each one as set in the editor, and every other
        one as not.
        """
        workspace = self.client.capabilities.workspace if self.client.capabilities else None
        assert workspace is not None, "a client that cannot be asked"
        assert workspace.configuration, "a client that cannot be asked"
        self.client.set_configuration({"lspAgent": settings})
        self.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings=None)
        )
        deadline = asyncio.get_running_loop().time() + 20
        while True:
            status = await self.command("lspAgent.status", {})  # a round trip each time
            described = vars(status.settings)
            if all(
                (name in settings) == (entry.source == "editor")
                and (name not in settings or entry.value == namespace(settings[name]))
                for name, entry in described.items()
            ):
                return
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"the server did not take {settings}: {described}")

    def close_all(self) -> None:
        """The user closes every buffer (unsaved text is dropped: the disk counts again)."""
        for uri in list(self.buffers):
            del self.buffers[uri]
            self.client.text_document_did_close(
                types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=uri))
            )

    def forget(self) -> None:
        """Forget what the last story saw and how its user answered: the next starts afresh."""
        self.events.clear()
        self.edits_seen.clear()
        self.questions.clear()
        self.decide = accept
        self.before_apply = None
        self.answer = None
        self.session = None
        self.client.progress_reports.clear()
        self.client.messages.clear()
        self.client.log_messages.clear()

    def apply(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        """What an editor does with a workspace edit, all or nothing."""
        self.edits_seen.append(params)
        if self.before_apply is not None:
            self.before_apply()
        applied, reason = self.decide(params)
        if not applied:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason=reason)
        edit = params.edit
        planned: list[tuple[str, int | None, list[Any]]] = []
        creates: list[str] = []
        deletes: list[str] = []
        for change in edit.document_changes or []:
            if isinstance(change, types.CreateFile):
                creates.append(change.uri)
            elif isinstance(change, types.DeleteFile):
                deletes.append(change.uri)
            elif isinstance(change, types.TextDocumentEdit):
                planned.append(
                    (change.text_document.uri, change.text_document.version, list(change.edits))
                )
            else:
                return types.ApplyWorkspaceEditResult(applied=False, failure_reason="unsupported")
        for uri, text_edits in (edit.changes or {}).items():
            planned.append((uri, None, list(text_edits)))
        if edit.change_annotations is not None:
            for _, _, text_edits in planned:
                for text_edit in text_edits:
                    annotation = getattr(text_edit, "annotation_id", None)
                    assert annotation is None or annotation in edit.change_annotations
        for uri, version, _ in planned:
            buffer = self.buffers.get(uri)
            if version is not None and (buffer is None or buffer.version != version):
                # VS Code refuses an edit computed against another version of the document.
                return types.ApplyWorkspaceEditResult(
                    applied=False, failure_reason=f"version mismatch for {uri}"
                )
        for uri in creates:
            path = _path(uri)
            if path.exists():
                return types.ApplyWorkspaceEditResult(applied=False, failure_reason="file exists")
        for uri in creates:
            _path(uri).parent.mkdir(parents=True, exist_ok=True)
            _path(uri).write_bytes(b"")
        for uri, _, text_edits in planned:
            buffer = self.buffers.get(uri)
            if buffer is not None:
                self.type_raw(uri, apply_lsp_edits(buffer.text, text_edits, self.encoding))
            else:
                path = _path(uri)
                raw = path.read_bytes() if path.exists() else b""
                bom = raw.startswith(b"\xef\xbb\xbf")
                text = raw.decode("utf-8").removeprefix("\ufeff")
                new = apply_lsp_edits(text, text_edits, self.encoding)
                path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + new.encode("utf-8"))
        for uri in deletes:
            if self.buffers.pop(uri, None) is not None:  # the editor closes a deleted file
                self.client.text_document_did_close(
                    types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri=uri))
                )
            _path(uri).unlink(missing_ok=True)
        return types.ApplyWorkspaceEditResult(applied=True)

    def type_raw(self, uri: str, text: str) -> None:
        buffer = self.buffers[uri]
        buffer.text = text
        buffer.version += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(
                    uri=uri, version=buffer.version
                ),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )


def _path(uri: str) -> Path:
    from urllib.parse import unquote, urlparse

    return Path(unquote(urlparse(uri).path))


def apply_lsp_edits(text: str, text_edits: list[Any], encoding: str) -> str:
    """Apply LSP text edits like an editor: positions in code units of `encoding`, lines ended
    by LF, CRLF or a lone CR only (not by everything `str.splitlines` breaks on)."""
    lines = [line for line in re.split(r"(?<=\n)|(?<=\r)(?!\n)", text) if line]
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: types.Position) -> int:
        if position.line >= len(lines):
            return len(text)
        line = lines[position.line]
        content = line.rstrip("\r\n")
        width = {"utf-8": 1, "utf-16": 2, "utf-32": 4}[encoding]
        codec = {"utf-8": "utf-8", "utf-16": "utf-16-le", "utf-32": "utf-32-le"}[encoding]
        encoded = content.encode(codec)
        prefix = encoded[: position.character * width].decode(codec)
        return starts[position.line] + len(prefix)

    spans = sorted(
        ((offset(e.range.start), offset(e.range.end), e.new_text) for e in text_edits),
        reverse=True,
    )
    for start, end, new_text in spans:
        text = text[:start] + new_text + text[end:]
    return text


def server_env(state_dir: Path, home: Path) -> dict[str, str]:
    """The server's environment: no settings or keys of the machine leak into a test."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LSP_AGENT_", "OPENAI_", "ANTHROPIC_"))
        and k not in ("CONTEXT_WINDOW", "COMPACT_AT", "COMPACT_TO", "STRIP_AT", "TOOL_OUTPUT_CAP")
    }
    env["LSP_AGENT_STATE_DIR"] = str(state_dir)
    env["HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def start_editor(
    root: Path,
    capabilities_name: str,
    settings: dict[str, Any] | None,
    *,
    state_dir: Path,
    home: Path,
) -> Editor:
    """Launch the server, initialize it as the named editor would, and return the editor."""
    client = make_test_lsp_client()
    editor = Editor(client, root, capabilities_name, state_dir=state_dir)

    @handles(client, types.WORKSPACE_APPLY_EDIT)
    def on_apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        return editor.apply(params)

    @handles(client, "lspAgent/event")
    def on_event(params: Any) -> None:
        editor.receive_event(_plain(params))

    @handles(client, types.WINDOW_SHOW_MESSAGE_REQUEST)
    def on_question(params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        editor.questions.append(params)
        title = editor.answer(params) if editor.answer is not None else None
        return types.MessageActionItem(title=title) if title is not None else None

    await client.start_io(
        sys.executable, "-m", "lsp_agent", "serve", env=server_env(state_dir, home)
    )
    client.set_configuration({"lspAgent": settings})
    capabilities = (
        types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(apply_edit=True))
        if capabilities_name == "minimal"  # a bare client: no documentChanges, no annotations
        else client_capabilities(capabilities_name)
    )
    result = await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities,
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options={"lspAgent": settings, "lspAgentClient": {"events": True}},
        )
    )
    encoding = result.capabilities.position_encoding
    editor.encoding = str(getattr(encoding, "value", encoding) or "utf-16")
    return editor


def namespace(value: Any) -> Any:
    """A JSON result with attribute access (`result.edits.applied`), lists kept as lists."""
    if isinstance(value, dict):
        return SimpleNamespace(**{k: namespace(v) for k, v in value.items()})
    if isinstance(value, list):
        return [namespace(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """lsprotocol hands custom notifications over as attrs-like objects; make them dicts."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "__dict__") and not isinstance(value, (str, int, float, bool)):
        return {k: _plain(v) for k, v in vars(value).items()}
    return value
