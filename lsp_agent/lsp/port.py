"""The agent core's `EditorPort`, spoken in LSP to the connected editor.

Proposals become `workspace/applyEdit` (the `WorkspaceEdit` is a pure function of the proposal
and the client's capabilities: `workspace_edit`), questions `window/showMessageRequest`, events
`lspAgent/event` (to clients that asked for them) and `$/progress`. A request the turn stops
waiting for (a cancel, a question's time limit) is withdrawn with `$/cancelRequest`, and a late
answer to it is dropped quietly.

eglot tells the server of a buffer's changes only once Emacs has been idle for a moment, which
can be long after it answered an edit. The turn is never held for that: an edit eglot refused
because its buffer moved on waits a moment for the buffer eglot named, and an edit it applied
is taken as applied whole (eglot applies all of an edit or none); the buffer's version is
judged by the change tracker when it comes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.progress import Progress

from lsp_agent.lsp import names, positions
from lsp_agent.lsp.arguments import ClientOptions
from lsp_agent.lsp.documents import Buffer
from lsp_agent.port import Document, EditOutcome, EditProposal, wait_until
from lsp_agent.safety.permissions import ANSWER_DENY

ANNOTATION_ID = "lsp-agent"

ProgressValue = (
    types.WorkDoneProgressBegin | types.WorkDoneProgressReport | types.WorkDoneProgressEnd
)
"""What one `$/progress` notification carries."""


@dataclass(frozen=True)
class EditCapabilities:
    """What the client can take in a `WorkspaceEdit`."""

    document_changes: bool = False
    """Versioned edits (`documentChanges`): said outright, or implied by resource operations,
    which only `documentChanges` can carry (Neovim advertises those alone)."""
    create: bool = False
    delete: bool = False
    annotations: bool = False
    """`changeAnnotationSupport`."""

    @classmethod
    def of(cls, capabilities: types.ClientCapabilities) -> EditCapabilities:
        """From the client's `initialize` capabilities."""
        workspace = capabilities.workspace
        edit = workspace.workspace_edit if workspace is not None else None
        if edit is None:
            return cls()
        operations = list(edit.resource_operations or [])
        return cls(
            document_changes=edit.document_changes is True or bool(operations),
            create=types.ResourceOperationKind.Create in operations,
            delete=types.ResourceOperationKind.Delete in operations,
            annotations=bool(edit.change_annotation_support),
        )


def missing_operation(proposal: EditProposal, caps: EditCapabilities) -> str | None:
    """What the proposal needs that the client cannot do (`delete`, `create`), or None.

    Only multi-file proposals insist on `create` support: a lone new file still reaches clients
    without it as a text edit on the missing file, which editors create.
    """
    if any(change.after is None for change in proposal.changes) and not (
        caps.document_changes and caps.delete
    ):
        return "delete"
    creates = any(change.before is None for change in proposal.changes)
    if creates and len(proposal.changes) > 1 and not caps.create:
        return "create"
    return None


def workspace_edit(
    proposal: EditProposal, caps: EditCapabilities, encoding: str
) -> types.WorkspaceEdit:
    """The `WorkspaceEdit` of a proposal for a client with `caps`: minimal text edits in the
    negotiated position `encoding`, versioned and annotated where the client understands it."""
    annotated = caps.annotations and caps.document_changes
    creates: list[types.CreateFile] = []
    document_changes: list[types.TextDocumentEdit] = []
    deletes: list[types.DeleteFile] = []
    changes: dict[str, list[types.TextEdit]] = {}
    for change in proposal.changes:
        uri = change.path.as_uri()
        if change.after is None:
            # Only reached when the client supports deletes (`missing_operation`).
            deletes.append(types.DeleteFile(uri=uri))
            continue
        planned = positions.text_edits(change.before or "", change.after, encoding)
        if caps.document_changes:
            if change.before is None and caps.create:
                creates.append(types.CreateFile(uri=uri))
            document_changes.append(
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(
                        uri=uri, version=change.version
                    ),
                    edits=[_text_edit(edit, annotated) for edit in planned],
                )
            )
        else:
            changes[uri] = [_plain_edit(edit) for edit in planned]
    if not caps.document_changes:
        return types.WorkspaceEdit(changes=changes)
    # Files are created before their text is edited in, and deleted last.
    return types.WorkspaceEdit(
        document_changes=[*creates, *document_changes, *deletes],
        change_annotations=(
            {
                ANNOTATION_ID: types.ChangeAnnotation(
                    label=proposal.label,
                    needs_confirmation=proposal.needs_confirmation,
                    description=proposal.description,
                )
            }
            if annotated
            else None
        ),
    )


def _text_edit(
    edit: positions.TextEdit, annotated: bool
) -> types.TextEdit | types.AnnotatedTextEdit:
    if annotated:
        return types.AnnotatedTextEdit(
            range=_range(edit), new_text=edit.new_text, annotation_id=ANNOTATION_ID
        )
    return _plain_edit(edit)


def _plain_edit(edit: positions.TextEdit) -> types.TextEdit:
    return types.TextEdit(range=_range(edit), new_text=edit.new_text)


def _range(edit: positions.TextEdit) -> types.Range:
    return types.Range(
        start=types.Position(line=edit.start_line, character=edit.start_character),
        end=types.Position(line=edit.end_line, character=edit.end_character),
    )


class Connection(Protocol):
    """What the port uses of the server it belongs to (`server.AgentServer`)."""

    client: ClientOptions
    capabilities: types.ClientCapabilities
    position_encoding: str
    client_name: str

    def shown_path(self, uri: str) -> str: ...

    def in_client_words(self, text: str) -> str: ...

    @property
    def work_done_progress(self) -> Progress: ...

    def open_document(self, path: Path) -> Buffer | None: ...

    def log_message(self, message: str) -> None: ...

    def show_message(self, kind: types.MessageType, message: str) -> None: ...

    async def editor_request(self, method: str, params: Any) -> Any: ...

    def notify_editor(self, method: str, params: Any) -> None: ...


class LspPort:
    """The agent core's `EditorPort` over one LSP connection."""

    def __init__(self, server: Connection) -> None:
        self.server = server
        self.progress: dict[str, int | str] = {}
        """Work-done tokens of running turns, by session id."""
        self._changed = asyncio.Event()
        """Set (and replaced) whenever the editor opens or changes a buffer."""
        self._ahead: dict[Path, int] = {}
        """Buffers the editor said it has a newer version of than it has sent (eglot's refusal
        names it): an edit pinned below that version is not sent to be refused again."""
        self._applied_whole: dict[Path, tuple[int, str, bool]] = {}
        """Edits an editor that applies edits whole said it applied and whose buffer has not
        reported them yet: the pinned version, the text they make, its byte-order mark."""

    async def read_document(self, path: Path) -> Document | None:
        document = self.server.open_document(path)
        if document is None:
            return None
        text = document.source
        bom = text.startswith("\ufeff")
        return Document(text[1:] if bom else text, document.version, bom)

    def buffer_changed(self) -> None:
        """The editor opened or changed a buffer: wake whoever waits for one."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def buffer_after(self, path: Path, version: int, timeout: float) -> Document | None:
        def newer() -> bool:
            document = self.server.open_document(path)
            return document is not None and (document.version is None or document.version > version)

        whole = self._applied_whole.pop(path, None)
        if whole is not None and whole[0] == version and not newer():
            # What eglot applied is the edit as sent, on that version: the turn goes on, and
            # the change tracker judges the buffer's next version when eglot sends it.
            return Document(whole[1], None, whole[2])
        if not await wait_until(newer, lambda: self._changed, timeout):
            return None
        return await self.read_document(path)

    async def propose_edit(self, proposal: EditProposal) -> EditOutcome:
        server = self.server
        workspace = server.capabilities.workspace
        if workspace is not None and workspace.apply_edit is False:
            return EditOutcome(
                False,
                "this editor does not accept workspace/applyEdit, so edits cannot be shown",
                failed=True,
            )
        caps = EditCapabilities.of(server.capabilities)
        missing = missing_operation(proposal, caps)
        if missing is not None:
            return EditOutcome(
                False, f"this editor cannot {missing} files over LSP", unsupported=True
            )
        if self._behind(proposal):
            # The editor has a newer buffer than it has sent: it would refuse the edit again.
            return EditOutcome(False, "the editor has newer text than it has sent", stale=True)
        # Diffing a large rewrite takes a while: keep it off the event loop.
        edit = await asyncio.to_thread(workspace_edit, proposal, caps, server.position_encoding)
        if self._moved_on(proposal):
            # The user typed while the edit was being built: its positions would land wrong.
            return EditOutcome(False, "the buffer changed before the edit was sent", stale=True)
        try:
            result = await self.request(
                types.WORKSPACE_APPLY_EDIT,
                types.ApplyWorkspaceEditParams(edit=edit, label=proposal.label),
            )
        except JsonRpcException as error:
            if refused_as_stale(error):
                # eglot checks the version itself, and tells the server of the typing that
                # moved it on only once the user pauses: wait a moment for that, to merge onto it.
                await self._newer_versions(proposal, error)
                return EditOutcome(False, "the buffer changed before the edit landed", stale=True)
            if not declined(error):
                failure = f"the editor failed to apply the edit: {error}"
                return EditOutcome(False, failure, failed=True)
            result = types.ApplyWorkspaceEditResult(applied=False)
        applied, reason = _apply_result(result)
        if applied:
            self._applied(proposal)
            return EditOutcome(True)
        if reason is not None and says_stale(reason):
            # The editor refused the edit because the text moved on, not because the user said
            # no: it is merged onto the newer text and proposed again.
            return EditOutcome(False, reason, stale=True)
        if reason is None and self._moved_on(proposal):
            # No word, and the buffer moved on: VS Code's own client refuses an edit for an
            # older version so, and a user's "no" looks the same. Merged and proposed once
            # more; a second refusal without a word is the user's.
            return EditOutcome(False, None, stale=True, unexplained=True)
        # A rejection is final, whatever the user typed meanwhile: their reason reaches the
        # model, and the same edit is not proposed again.
        return EditOutcome(False, reason)

    async def _newer_versions(self, proposal: EditProposal, error: JsonRpcException) -> None:
        """After eglot refused the proposal as made for an older buffer: wait until the buffer
        it named reaches the version eglot said it has (at most `STALE_WAIT_S`, never the
        turn's time), and remember that version until it comes."""
        refusal = STALE_REFUSAL.search(error.message)
        assert refusal is not None
        required, have = int(refusal.group(1)), int(refusal.group(2))
        for change in proposal.changes:
            if change.version == required:
                self._ahead[change.path] = max(have, self._ahead.get(change.path, have))
                await self.buffer_after(change.path, have - 1, STALE_WAIT_S)

    def _applied(self, proposal: EditProposal) -> None:
        """The editor applied the proposal: when it applies edits whole, what each buffer now
        holds is known before the editor reports it (`buffer_after`)."""
        if not applies_whole(self.server.client_name):
            return
        for change in proposal.changes:
            if change.version is not None and change.after is not None:
                self._applied_whole[change.path] = (change.version, change.after, change.bom)

    def _behind(self, proposal: EditProposal) -> bool:
        """Whether a buffer the proposal is pinned to is older than the editor said it has."""
        behind = False
        for change in proposal.changes:
            ahead = self._ahead.get(change.path)
            if ahead is None:
                continue
            document = self.server.open_document(change.path)
            if document is None or document.version is None or document.version >= ahead:
                del self._ahead[change.path]  # it came (or the buffer is gone)
            elif change.version is not None and change.version < ahead:
                behind = True
        return behind

    def _moved_on(self, proposal: EditProposal) -> bool:
        """Whether a buffer the proposal is pinned to has a newer version now."""
        for change in proposal.changes:
            if change.version is None:
                continue
            document = self.server.open_document(change.path)
            if document is not None and document.version != change.version:
                return True
        return False

    async def ask_user(self, question: str, actions: Sequence[str]) -> str | None:
        """`window/showMessageRequest`, the refusal first: eglot offers the first action as the
        default (RET takes it) and Helix preselects it (Enter takes it), so a stray key denies.
        An error answer (a client that cannot ask, a prompt the user quit, a cancelled
        request) or no choice is None at once: the gate counts it as Deny."""
        ordered = sorted(actions, key=lambda action: action != ANSWER_DENY)
        params = types.ShowMessageRequestParams(
            type=types.MessageType.Warning,
            message=question,
            actions=[types.MessageActionItem(title=action) for action in ordered],
        )
        try:
            answer = await self.request(types.WINDOW_SHOW_MESSAGE_REQUEST, params)
        except JsonRpcException:
            return None
        return answer.title if isinstance(answer, types.MessageActionItem) else None

    async def request(self, method: str, params: Any) -> Any:
        """Send a request to the editor; when the caller stops waiting for it, it is withdrawn."""
        return await self.server.editor_request(method, params)

    def emit(self, event: dict[str, Any]) -> None:
        # A compaction that is starting is news for `$/progress` only: the editors' event
        # stream gets each layer's `compaction` event, with its figures, once it is done.
        starting = event["kind"] == "compaction" and event.get("phase") == "started"
        if event["kind"] == "status" and isinstance(event.get("error"), str):
            event = {**event, "error": self.server.in_client_words(event["error"])}
        if not starting and self.server.client.events:
            self.server.notify_editor(names.EVENT, event)
        token = self.progress.get(event["session"])
        if token is None:
            return
        message = progress_message(event, self.server.shown_path)
        if message is not None:
            self.report(
                token, types.WorkDoneProgressReport(message=message[:200], cancellable=True)
            )

    def report(
        self,
        token: int | str,
        value: ProgressValue,
    ) -> None:
        """A `$/progress` notification: `value` is a begin, a report or an end."""
        progress = self.server.work_done_progress
        if isinstance(value, types.WorkDoneProgressBegin):
            progress.begin(token, value)
        elif isinstance(value, types.WorkDoneProgressReport):
            progress.report(token, value)
        else:
            progress.end(token, value)

    def log(self, message: str) -> None:
        self.server.log_message(message)

    def warn(self, message: str) -> None:
        self.server.log_message(f"lsp-agent: {message}")
        self.server.show_message(types.MessageType.Warning, f"lsp-agent: {message}")


def _apply_result(result: Any) -> tuple[bool, str | None]:
    """An `ApplyWorkspaceEditResult`: applied or not, and the editor's reason when it says one."""
    if not isinstance(result, types.ApplyWorkspaceEditResult):
        return False, "the editor answered workspace/applyEdit with no result"
    return result.applied is True, result.failure_reason


def progress_message(event: dict[str, Any], shown_path: Callable[[str], str]) -> str | None:
    """The `$/progress` report of one turn event (a file named by `shown_path` of its URI, as
    the user names it); None for events progress does not show."""
    kind = event["kind"]
    if kind == "tool":
        return f"{event['name']} …"
    if kind == "toolResult":
        return str(event["summary"])
    if kind == "edit":
        return ("applied " if event["applied"] else "rejected ") + shown_path(str(event["uri"]))
    if kind == "text":
        return "writing the answer…"
    if kind == "permission":
        return f"{event['name']}: {event['decision']}"
    if kind == "question" and event.get("state") == "open":
        return "waiting for your answer to a question"
    if kind == "compaction":
        if event.get("phase") == "started":
            return "compacting"
        return f"context {event['strategy']}: {event['before']} → {event['after']} tokens"
    return None


STALE_WAIT_S = 2.0
"""How long an editor that refused an edit as made for an older buffer may take to send the
buffer it has (eglot sends typing once the user pauses for half a second): longer, the model
hears that the user is typing there, and reads the file again."""

STALE_REFUSAL = re.compile(r"require version (\d+), (?:you )?have (\d+)")
"""eglot's error answer to an edit pinned to an older version of the buffer than it has
(the version the edit required, and the one eglot has)."""

APPLIES_WHOLE = frozenset({"eglot"})
"""Clients (by `clientInfo.name`, in lower case) that check an edit's version and apply all of
it or none, and report the change only later (eglot, when the user is idle): their "applied"
is what was sent."""


def applies_whole(client_name: str) -> bool:
    """Whether the client applies an edit it accepts exactly as sent (`APPLIES_WHOLE`)."""
    return client_name.lower() in APPLIES_WHOLE


def refused_as_stale(error: JsonRpcException) -> bool:
    """Whether an error answer to `workspace/applyEdit` says the buffer moved on (eglot)."""
    return STALE_REFUSAL.search(error.message) is not None


STALE_ANSWER = re.compile(
    r"version mismatch|changed in the editor|changed while the edit was being reviewed|"
    r"was closed in the editor after the edit was made|send it again for the current text|"
    r"require version \d+, (you )?have \d+",
    re.IGNORECASE,
)
"""How an editor says, in a refusal's `failureReason`, that the text moved on under the edit:
the plugins' staleness answers (`editors/neovim/lua/lsp_agent/workspace_edit.lua`,
`editors/vscode/src/review.ts`) and eglot's version check."""


def says_stale(reason: str) -> bool:
    """Whether a refusal says the text moved on (then the edit is merged and sent again), rather
    than that the user said no (then the refusal is final)."""
    return STALE_ANSWER.search(reason) is not None


DECLINED_MESSAGES = ("user cancelled server edit",)
"""Error answers to `workspace/applyEdit` that mean the user said no: Emacs' eglot up to 1.15
answers "n" at its "Proceed?" prompt with this error instead of `applied: false`."""


def declined(error: JsonRpcException) -> bool:
    """Whether an error answer to `workspace/applyEdit` is the user's refusal, not a failure:
    eglot's message for "n" (`DECLINED_MESSAGES`), or an error carrying `applied: false` in its
    data (eglot 1.16 and later when the user quits the prompt)."""
    if error.message.strip().lower().rstrip(".") in DECLINED_MESSAGES:
        return True
    return isinstance(error.data, dict) and error.data.get("applied") is False
