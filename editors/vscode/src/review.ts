/**
 * The review of `workspace/applyEdit`: every edit the agent proposes opens in VS Code's diff
 * editor (the file as it is ↔ the proposed text, editable), and is applied only when the user
 * accepts it, as the proposed side then reads. The answer tells the server what really happened.
 *
 * When the user types in a file while its edit is under review, the proposed side follows: it
 * shows the proposal merged onto the user's text (the same 3-way merge as the server's), so their
 * new lines never show as "removed". The edit was made for an older version of the file, so the
 * decision goes back to the server as stale; the server merges the edit onto the new text and
 * sends it again, and that edit, if it is the one the user saw, gets their decision without a
 * second review. If it is not (the user typed on), the review opens again and says why.
 */
import * as path from 'node:path';
import * as vscode from 'vscode';
import type {
    ApplyWorkspaceEditParams,
    ApplyWorkspaceEditResult,
    CancellationToken,
    WorkspaceEdit as LspWorkspaceEdit,
} from 'vscode-languageclient/node';
import { traceError, traceInfo } from './common/log';
import { reviewMode } from './common/settings';
import { applyTextEdits, diffTextEdits, TextEdit } from './edits';
import { reopenedMessage } from './messages';
import { notify } from './notify';
import { Decided, rebase, rebaseBeside, sameDecision } from './rebase';

export const PROPOSED_SCHEME = 'lsp-agent-proposed';
const ORIGINAL_SCHEME = 'lsp-agent-original';
const REVIEWING = 'lspAgent.reviewing';
const REVIEW_FILES = 'lspAgent.reviewFiles';

/** One file the edit touches. */
interface FileChange {
    uri: vscode.Uri;
    /** The path shown to the user (relative to the workspace). */
    label: string;
    create?: { overwrite?: boolean; ignoreIfExists?: boolean };
    remove?: { recursive?: boolean; ignoreIfNotExists?: boolean };
    /** Buffer version the edits were made for; null or undefined: not pinned. */
    version?: number | null;
    /** The `TextDocumentEdit`s for this file, in order (each refers to the text after the last). */
    edits: TextEdit[][];
    existed: boolean;
    /** The file's text when the edit arrived ('' when it did not exist). */
    before: string;
    /** The text the edit makes, shown on the proposed side. */
    proposed: string;
    /** The file's text the proposed side applies to: `before`, or the user's text it followed. */
    base: string;
    /** The agent's proposal applied to `base` (without the user's retouches of the proposed side). */
    agent: string;
    /**
     * The line of a change of the user's next to the proposal's, which the server's merge
     * would refuse: the proposed side shows both (`rebaseBeside`), and an accepted edit is
     * applied here as shown.
     */
    conflict?: number;
    /** Lines (the user's) where a change of the proposal was left out: the user changed them. */
    superseded?: number[];
    /** What the review last put on the proposed side (the user retouched it when it differs). */
    shown?: string;
    proposedUri: vscode.Uri;
    originalUri: vscode.Uri;
}

interface Rename {
    oldUri: vscode.Uri;
    newUri: vscode.Uri;
    options?: { overwrite?: boolean; ignoreIfExists?: boolean };
}

type Operation = { kind: 'file'; change: FileChange } | { kind: 'rename'; rename: Rename };

interface Decision {
    accept: boolean;
    reason?: string;
    /** Not the user's decision: the turn ended, or the server stopped. */
    dismissed?: boolean;
}

class Refusal extends Error {}

/** An edit whose review is on screen, as the chat shows it. */
export interface ReviewShown {
    /** The edit's label, without the `lsp-agent: ` prefix. */
    label: string;
    /** The files it changes, relative to the workspace. */
    files: string[];
}

/** What `Review` needs from the language client. */
export interface ReviewClient {
    /** The edit as VS Code's type, converted by the client (for `refactorPreview`). */
    toCode(edit: LspWorkspaceEdit): Promise<vscode.WorkspaceEdit>;
    /** Resolves once the server has been sent the document at `version` (its `didChange`). */
    sent(uri: string, version: number): Promise<void>;
}

export class Review implements vscode.Disposable {
    private readonly proposedFiles = new ProposedFileSystem();
    private readonly disposables: vscode.Disposable[] = [];
    private queue: Promise<unknown> = Promise.resolve();
    private current: Pending | undefined;
    /** A decision taken on a review whose files had moved on, for the edit the server sends again. */
    private decided: (Decided & { labels: string[] }) | undefined;
    private counter = 0;
    private readonly reviewing = new vscode.EventEmitter<string | undefined>();
    /** Fires what the user is asked to do when a review opens, undefined when it closes. */
    readonly onDidChangeReviewing = this.reviewing.event;
    private readonly opened = new vscode.EventEmitter<ReviewShown | undefined>();
    /** Fires the edit under review when its review opens, undefined when it closes. */
    readonly onDidChangeReview = this.opened.event;

    /** Where the chat's input has the keyboard: its side bar view, its editor tab, or neither. */
    chatFocus: () => 'view' | 'panel' | undefined = () => undefined;
    /**
     * Shows an edit of `files` in place instead of in the diff editor (Edit Selection's thread
     * under the lines it is about): true when it does. The decision comes the same way.
     */
    inPlace: ((files: readonly vscode.Uri[]) => boolean) | undefined;

    constructor(private readonly client: ReviewClient) {
        this.disposables.push(
            this.reviewing,
            this.opened,
            vscode.workspace.registerFileSystemProvider(PROPOSED_SCHEME, this.proposedFiles, { isCaseSensitive: true }),
            vscode.workspace.registerTextDocumentContentProvider(ORIGINAL_SCHEME, { provideTextDocumentContent: () => '' }),
            vscode.window.tabGroups.onDidChangeTabs(() => this.current?.checkTabs()),
            vscode.workspace.onDidChangeTextDocument((change) => {
                if (change.contentChanges.length > 0) {
                    this.current?.fileChanged(change.document);
                }
            }),
        );
        void setReviewing(undefined);
    }

    /** Handler of `workspace/applyEdit`. */
    async handle(params: ApplyWorkspaceEditParams, token: CancellationToken): Promise<ApplyWorkspaceEditResult> {
        const mode = reviewMode();
        try {
            if (mode === 'refactorPreview') {
                const edit = await this.client.toCode(params.edit);
                this.reviewing.fire(`review ${shortLabel(params.label)} in the Refactor Preview: Apply or Discard`);
                let applied: boolean;
                try {
                    applied = await vscode.workspace.applyEdit(edit, { isRefactoring: true });
                } finally {
                    this.reviewing.fire(undefined);
                }
                return applied ? { applied } : { applied, failureReason: 'the user did not apply the edit in the Refactor Preview' };
            }
            const id = String(++this.counter);
            const operations = await this.parse(params.edit, id);
            if (mode === 'auto' || !needsConfirmation(params.edit)) {
                return await this.apply(operations, finalsAsProposed(operations));
            }
            const replayed = await this.replay(params, operations);
            if (replayed) {
                return replayed;
            }
            const run = this.queue.then(() => this.review(params, operations, token));
            this.queue = run.catch(() => undefined);
            return await run;
        } catch (error) {
            if (error instanceof Refusal) {
                traceInfo(`edit not applied: ${error.message}`);
                return { applied: false, failureReason: error.message };
            }
            traceError('applying the edit failed', error);
            const message = error instanceof Error ? error.message : String(error);
            return { applied: false, failureReason: `VS Code failed to apply the edit: ${message}` };
        }
    }

    /**
     * A change the user asked for themselves (a code block applied from the chat), reviewed
     * like the agent's and applied on Accept. Resolves whether it was applied.
     */
    async propose(uri: vscode.Uri, proposed: string, label: string): Promise<boolean> {
        const document = await vscode.workspace.openTextDocument(uri);
        const annotation = 'lsp-agent.apply';
        const params: ApplyWorkspaceEditParams = {
            label,
            edit: {
                documentChanges: [
                    {
                        textDocument: { uri: uri.toString(), version: document.version },
                        edits: diffTextEdits(document.getText(), proposed).map((edit) => ({ ...edit, annotationId: annotation })),
                    },
                ],
                changeAnnotations: { [annotation]: { label, needsConfirmation: true } },
            },
        };
        const source = new vscode.CancellationTokenSource();
        try {
            return (await this.handle(params, source.token)).applied;
        } finally {
            source.dispose();
        }
    }

    async accept(): Promise<void> {
        this.current?.decide({ accept: true });
    }

    /** The edit under review, file by file: the text it applies to now, and what it makes. */
    proposals(): { uri: vscode.Uri; label: string; base: string; proposed: string }[] {
        return this.current?.proposals() ?? [];
    }

    /** Bring the diffs of the edit under review to the front. */
    async reveal(): Promise<void> {
        await this.current?.reveal();
    }

    /** Reject the edit under review, with the reason the user gives (Escape: back to the review). */
    async reject(): Promise<void> {
        const pending = this.current;
        if (!pending) {
            return;
        }
        const reason = await vscode.window.showInputBox({
            title: 'Reject Edit',
            prompt: 'Why reject this edit? (optional: Enter to reject without a reason)',
            placeHolder: 'the reason is sent to the agent',
            ignoreFocusOut: true,
        });
        if (reason === undefined) {
            return;
        }
        pending.decide({ accept: false, reason: reason.trim() || undefined });
    }

    /** Show the diff of the next file of the edit under review. */
    async nextFile(): Promise<void> {
        await this.current?.showNext();
    }

    /** Reject every edit under review (the turn ended or was cancelled). */
    dismiss(reason: string): void {
        this.current?.decide({ accept: false, reason, dismissed: true });
        this.decided = undefined;
    }

    /**
     * An `edit` event: what became of an edit. An accepted edit that the server did not send
     * again and did not apply could not be merged onto the user's text: say so.
     */
    onEditOutcome(uri: string, applied: boolean): void {
        const decided = this.decided;
        const file = vscode.Uri.parse(uri).toString(); // as the edit's URIs were read
        if (!decided || !decided.files.some((f) => f.uri === file)) {
            return;
        }
        this.decided = undefined;
        if (decided.accept && !applied) {
            void notify(
                'warning',
                `LSP Agent: the edit of ${decided.labels.join(', ')} you accepted was not applied: you had changed lines ` +
                    `next to the agent's change, so the agent was told to redo it on your text.`,
            );
        }
    }

    dispose(): void {
        this.dismiss('the extension was deactivated');
        this.disposables.forEach((d) => d.dispose());
    }

    /**
     * The edit the server sent again after a decision on its files' older version: the same
     * decision when it is the edit the user saw (merged onto the same text), else undefined (and
     * the user is told why the review is back).
     */
    private async replay(
        params: ApplyWorkspaceEditParams,
        operations: Operation[],
    ): Promise<ApplyWorkspaceEditResult | undefined> {
        const decided = this.decided;
        this.decided = undefined;
        if (!decided) {
            return undefined;
        }
        const changes = fileChanges(operations);
        const arrived = changes.map((c) => ({ uri: c.uri.toString(), version: c.version, proposed: c.proposed }));
        if (!sameDecision(decided, arrived)) {
            if (arrived.some((file) => decided.files.some((f) => f.uri === file.uri))) {
                void notify('info', reopenedMessage(decided.labels));
            }
            return undefined;
        }
        traceInfo(`${shortLabel(params.label)}: sent again for the text the user decided on; their decision stands`);
        if (!decided.accept) {
            return { applied: false, failureReason: decided.reason };
        }
        const accepted = (change: FileChange): string =>
            decided.files.find((f) => f.uri === change.uri.toString())?.accepted ?? change.proposed;
        return this.apply(operations, new Map(changes.map((change) => [change, accepted(change)])));
    }

    /** Split the edit into file changes and renames, with each file's text now and as proposed. */
    private async parse(edit: LspWorkspaceEdit, id: string): Promise<Operation[]> {
        const operations: Operation[] = [];
        const byUri = new Map<string, FileChange>();
        const change = (uriText: string): FileChange => {
            const uri = vscode.Uri.parse(uriText);
            let found = byUri.get(uri.toString());
            if (!found) {
                const label = vscode.workspace.asRelativePath(uri, false);
                const virtualPath = `/${id}/${label.replace(/^\/+/, '')}`;
                found = {
                    uri,
                    label,
                    edits: [],
                    existed: false,
                    before: '',
                    proposed: '',
                    base: '',
                    agent: '',
                    proposedUri: vscode.Uri.from({ scheme: PROPOSED_SCHEME, path: virtualPath }),
                    originalUri: vscode.Uri.from({ scheme: ORIGINAL_SCHEME, path: virtualPath }),
                };
                byUri.set(uri.toString(), found);
                operations.push({ kind: 'file', change: found });
            }
            return found;
        };
        if (edit.documentChanges) {
            for (const item of edit.documentChanges) {
                if ('kind' in item) {
                    if (item.kind === 'create') {
                        change(item.uri).create = item.options ?? {};
                    } else if (item.kind === 'delete') {
                        change(item.uri).remove = item.options ?? {};
                    } else if (item.kind === 'rename') {
                        operations.push({
                            kind: 'rename',
                            rename: {
                                oldUri: vscode.Uri.parse(item.oldUri),
                                newUri: vscode.Uri.parse(item.newUri),
                                options: item.options,
                            },
                        });
                    }
                } else {
                    const file = change(item.textDocument.uri);
                    file.version = item.textDocument.version;
                    file.edits.push(item.edits.map((e) => ({ range: e.range, newText: e.newText })));
                }
            }
        } else if (edit.changes) {
            for (const [uri, edits] of Object.entries(edit.changes)) {
                change(uri).edits.push(edits.map((e) => ({ range: e.range, newText: e.newText })));
            }
        }
        for (const operation of operations) {
            if (operation.kind === 'file') {
                await this.read(operation.change);
            }
        }
        return operations;
    }

    /** Fill in a change's `before` and `proposed`; refuse what cannot be applied as it stands. */
    private async read(change: FileChange): Promise<void> {
        const open = openDocument(change.uri);
        change.existed = open !== undefined || (await exists(change.uri));
        if (change.create && change.existed && !change.create.overwrite && !change.create.ignoreIfExists) {
            throw new Refusal(`${change.label} already exists`);
        }
        if (!change.existed && !change.create) {
            if (change.remove?.ignoreIfNotExists) {
                return;
            }
            throw new Refusal(`${change.label} does not exist`);
        }
        if (change.existed) {
            const document = open ?? (await vscode.workspace.openTextDocument(change.uri));
            if (open && typeof change.version === 'number' && open.version !== change.version) {
                throw new Refusal(
                    `${change.label} changed in the editor (version ${open.version}, the edit was made for version ${change.version}): read it again`,
                );
            }
            change.before = document.getText();
        }
        const replaced = change.create && (!change.existed || change.create.overwrite);
        let text = replaced ? '' : change.before;
        change.base = change.before;
        if (change.remove) {
            change.proposed = change.agent = '';
            return;
        }
        for (const group of change.edits) {
            text = applyTextEdits(text, group);
        }
        change.proposed = change.agent = text;
    }

    /** Show the diffs, wait for the decision, apply what the proposed sides hold. */
    private async review(
        params: ApplyWorkspaceEditParams,
        operations: Operation[],
        token: CancellationToken,
    ): Promise<ApplyWorkspaceEditResult> {
        if (token.isCancellationRequested) {
            return { applied: false, failureReason: 'the server cancelled the request before it was reviewed' };
        }
        const changes = fileChanges(operations);
        for (const change of changes) {
            this.proposedFiles.put(change.proposedUri, change.proposed);
            change.shown = change.proposed;
        }
        const pending = new Pending(params.label, changes, operations, this.proposedFiles, (message) =>
            this.reviewing.fire(message),
        );
        this.current = pending;
        this.opened.fire({ label: shortLabel(params.label), files: changes.map((change) => change.label) });
        const cancelled = token.onCancellationRequested(() =>
            pending.decide({ accept: false, reason: 'the server cancelled the request' }),
        );
        let finals: Map<FileChange, string> | undefined;
        let decision: Decision;
        try {
            await setReviewing(changes.length);
            this.reviewing.fire(`review ${shortLabel(params.label)}: Accept Edit or Reject Edit`);
            if (this.inPlace?.(changes.map((change) => change.uri)) === true) {
                pending.showInPlace();
            } else {
                await pending.show(this.chatFocus());
            }
            decision = await pending.decided;
            await pending.followed();
            if (decision.accept) {
                finals = new Map(changes.map((change) => [change, this.proposedText(change)]));
            }
        } finally {
            cancelled.dispose();
            this.current = undefined;
            this.reviewing.fire(undefined);
            this.opened.fire(undefined);
            await setReviewing(undefined);
            await pending.close();
            changes.forEach((change) => this.proposedFiles.remove(change.proposedUri));
        }
        const moved: FileChange[] = [];
        for (const change of changes) {
            if (change.existed && (await currentText(change.uri)) !== change.before) {
                moved.push(change);
            }
        }
        // An edit pinned to a version the server merges and sends again; an unpinned one is
        // applied here, merged, unless the merge failed.
        const pinned = moved.some((change) => typeof change.version === 'number');
        const conflict = moved.some((change) => change.conflict !== undefined);
        const dismissed = decision.dismissed === true || token.isCancellationRequested;
        if (conflict && finals && !dismissed) {
            // The user typed next to the agent's change and accepted what the review showed:
            // the server's merge would refuse it, so it is applied here, as shown. The server
            // reads what landed and tells the agent, hunk by hunk, with the user's lines theirs.
            traceInfo(`${moved.map((change) => change.label).join(', ')}: accepted beside the user's typing; applied as shown`);
            return this.apply(operations, finals);
        }
        if (moved.length > 0 && !dismissed && (pinned || conflict || !finals)) {
            return this.decidedOnMovedFiles(changes, moved, decision, finals);
        }
        if (!finals) {
            return { applied: false, failureReason: decision.reason };
        }
        const unchanged =
            operations.every((op) => op.kind === 'file') &&
            changes.every((change) => !change.create && !change.remove && finals?.get(change) === change.base);
        if (unchanged) {
            return { applied: false, failureReason: 'the user reverted every change of the edit in the review' };
        }
        return this.apply(operations, finals);
    }

    /**
     * The user decided while their typing moved the files on from the version the edit was made
     * for. The edit cannot be applied as it was sent: the server is told it is stale, and the
     * decision is kept for the edit it sends again, merged onto the user's text.
     */
    private decidedOnMovedFiles(
        changes: FileChange[],
        moved: FileChange[],
        decision: Decision,
        finals: Map<FileChange, string> | undefined,
    ): ApplyWorkspaceEditResult {
        const files = [];
        for (const change of changes) {
            const version = openDocument(change.uri)?.version;
            if (version === undefined) {
                continue;
            }
            const accepted = finals?.get(change);
            files.push({ uri: change.uri.toString(), version, proposed: change.agent, accepted });
        }
        const labels = moved.map((change) => change.label);
        this.decided = { accept: decision.accept, reason: decision.reason, files, labels };
        const names = labels.join(', ');
        const what = decision.accept ? 'the user accepted the edit merged onto their text' : 'the user rejected the edit';
        traceInfo(`${names} changed under the review: ${what}; told the server the edit is stale`);
        return {
            applied: false,
            failureReason: decision.accept
                ? `${names} changed in the editor while the edit was under review: ${what}; send it again for the current text`
                : decision.reason,
        };
    }

    /** The proposed side's text, with the user's unsaved changes to it. */
    private proposedText(change: FileChange): string {
        return proposedSideText(change, this.proposedFiles);
    }

    /** Apply the operations with each file's final text; say whether it all landed. */
    private async apply(operations: Operation[], finals: Map<FileChange, string>): Promise<ApplyWorkspaceEditResult> {
        const changes = fileChanges(operations);
        for (const change of changes) {
            if (!change.existed) {
                continue;
            }
            const now = await currentText(change.uri);
            if (now !== change.base) {
                throw new Refusal(`${change.label} changed while the edit was under review: nothing was applied; read it again`);
            }
        }
        const dirtyBefore = new Set(
            vscode.workspace.textDocuments.filter((d) => d.isDirty).map((d) => d.uri.toString()),
        );
        const edit = new vscode.WorkspaceEdit();
        for (const operation of operations) {
            if (operation.kind === 'rename') {
                const { oldUri, newUri, options } = operation.rename;
                edit.renameFile(oldUri, newUri, options);
                continue;
            }
            const change = operation.change;
            const final = finals.get(change) ?? change.proposed;
            if (change.remove) {
                if (change.existed) {
                    edit.deleteFile(change.uri, change.remove);
                }
            } else if (change.create && (!change.existed || change.create.overwrite)) {
                edit.createFile(change.uri, { overwrite: change.create.overwrite, contents: Buffer.from(final, 'utf8') });
            } else {
                for (const textEdit of diffTextEdits(change.base, final)) {
                    edit.replace(change.uri, toRange(textEdit), textEdit.newText);
                }
            }
        }
        if (!(await vscode.workspace.applyEdit(edit))) {
            throw new Refusal('VS Code did not apply the edit');
        }
        // Save what the edit made dirty, so that commands the agent runs see the new text.
        for (const change of changes) {
            const document = openDocument(change.uri);
            if (document?.isDirty && !dirtyBefore.has(document.uri.toString())) {
                if (!(await document.save())) {
                    traceError(`could not save ${change.label}`);
                }
            }
        }
        // The answer goes after the buffers' new versions: the server judges what landed from
        // them (an edit applied onto the user's typing has no version of its own to wait for).
        for (const change of changes) {
            const document = openDocument(change.uri);
            if (document) {
                await this.client.sent(document.uri.toString(), document.version);
            }
        }
        for (const change of changes) {
            if (change.remove) {
                continue;
            }
            const final = finals.get(change) ?? change.proposed;
            const landed = await currentText(change.uri);
            if (landed !== final) {
                throw new Refusal(`${change.label} does not hold the accepted text after applying the edit`);
            }
        }
        return { applied: true };
    }
}

/** An edit on screen, waiting for the user's decision. */
class Pending {
    readonly decided: Promise<Decision>;
    private resolve: ((decision: Decision) => void) | undefined;
    private shown = false;
    private done = false;
    private status: vscode.Disposable | undefined;
    /** The proposed sides following the user's typing, one change at a time. */
    private following: Promise<void> = Promise.resolve();

    constructor(
        private readonly label: string | undefined,
        private readonly changes: FileChange[],
        private readonly operations: Operation[],
        private readonly proposedFiles: ProposedFileSystem,
        /** Tell the user what the review is waiting for (the progress notification). */
        private readonly say: (message: string) => void,
    ) {
        this.decided = new Promise<Decision>((resolve) => {
            this.resolve = resolve;
        });
    }

    /** The user (or a tool) changed `document`: when it is a file under review, follow it. */
    fileChanged(document: vscode.TextDocument): void {
        const change = this.changes.find(
            (c) => c.existed && !c.create && !c.remove && c.uri.toString() === document.uri.toString(),
        );
        if (change && !this.done) {
            this.following = this.following
                .then(() => this.follow(change))
                .catch((error) => traceError('following the typing failed', error));
        }
    }

    /** Resolves once the proposed sides have followed every change seen so far. */
    followed(): Promise<void> {
        return this.following;
    }

    /** Move the proposed side of `change` onto the file's text now, keeping the user's retouches. */
    private async follow(change: FileChange): Promise<void> {
        for (let attempt = 0; attempt < 3 && !this.done; attempt++) {
            const current = await currentText(change.uri);
            if (current === undefined || current === change.base) {
                return;
            }
            const side = proposedSideText(change, this.proposedFiles);
            // Until the user types next to the agent's change, the proposal moves with their text
            // as the server's merge would move it.
            const merged = change.conflict === undefined ? rebase(change.base, side, current) : undefined;
            const agent = change.conflict === undefined ? rebase(change.base, change.agent, current) : undefined;
            let text: string;
            let agentText: string;
            let beside: { line: number; superseded: number[] } | undefined;
            if (merged && agent && 'text' in merged && 'text' in agent) {
                text = merged.text;
                agentText = agent.text;
            } else {
                // Next to it: both are shown, the user's lines as theirs (never as removed), and
                // the edit is applied here as shown. Each keystroke is placed afresh from the
                // agent's own proposal (a half-typed line must not swallow the agent's change);
                // a proposed side the user retouched keeps their retouches.
                const retouched = change.shown !== undefined && side !== change.shown;
                const shown = retouched ? rebaseBeside(change.base, side, current) : rebaseBeside(change.before, change.proposed, current);
                text = shown.text;
                agentText = rebaseBeside(change.before, change.proposed, current).text;
                const line = merged && 'conflict' in merged ? merged.conflict.line : agent && 'conflict' in agent ? agent.conflict.line : 0;
                beside = { line, superseded: shown.superseded };
            }
            if (await this.replaceProposedSide(change, side, text)) {
                change.base = current;
                change.agent = agentText;
                change.shown = text;
                if (beside) {
                    change.superseded = beside.superseded;
                    this.setConflict(change, beside.line);
                }
                const kept = (change.superseded ?? []).map((at) => `line ${at}`).join(', ');
                this.say(
                    kept
                        ? `${change.label}: you changed the lines the agent changes (${kept}); the proposal keeps yours. Accept Edit applies what it shows`
                        : change.conflict !== undefined
                          ? `${change.label} changed next to the agent's change: the proposal keeps your lines. Accept Edit applies what it shows`
                          : `${change.label} changed: the proposal now applies to your text. Accept Edit or Reject Edit`,
                );
                return;
            }
            // The proposed side changed under us (the user typed there too): read both again.
        }
    }

    /** Put `text` on the proposed side, as an edit of its document when one is open (undo works). */
    private async replaceProposedSide(change: FileChange, side: string, text: string): Promise<boolean> {
        const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === change.proposedUri.toString());
        if (!document) {
            this.proposedFiles.put(change.proposedUri, text);
            return true;
        }
        if (document.getText() !== side) {
            return false;
        }
        const edit = new vscode.WorkspaceEdit();
        for (const textEdit of diffTextEdits(side, text)) {
            edit.replace(change.proposedUri, toRange(textEdit), textEdit.newText);
        }
        return vscode.workspace.applyEdit(edit);
    }

    /**
     * Once the user typed next to the agent's change, the edit can no longer go back to the
     * server to be merged again: it is applied as the review shows it (kept for the rest of it).
     */
    private setConflict(change: FileChange, line: number): void {
        change.conflict ??= line;
    }

    decide(decision: Decision): void {
        if (!this.done) {
            this.done = true;
            this.resolve?.(decision);
        }
    }

    /**
     * Open the diffs without taking the keyboard: what the user types goes on going where it
     * went (the chat's input, or their file, whose review then follows the typing). With the
     * focus in the chat's side bar view the diffs open in the active editor group; else beside
     * it, so that the chat's tab, or an editor the user may be typing in, stays in sight. They move to a diff deliberately:
     * Review in the chat, Review Next File, or a click.
     */
    async show(chat: 'view' | 'panel' | undefined): Promise<void> {
        // Beside: the chat in an editor tab has the keyboard, or a file the user may be typing in.
        const typing = vscode.window.visibleTextEditors.some((editor) => editor.document.uri.scheme === 'file');
        const beside = chat === 'panel' || (chat === undefined && typing);
        let column: vscode.ViewColumn | undefined = beside ? vscode.ViewColumn.Beside : undefined;
        for (const change of this.changes) {
            await this.open(change, false, column);
            column = this.column() ?? column; // the other files' diffs beside the first one
        }
        if (this.changes.length > 1 && this.changes[0]) {
            await this.open(this.changes[0], false, column);
        }
        const renames = this.operations.filter((op) => op.kind === 'rename');
        if (renames.length > 0) {
            const names = renames
                .map((op) => (op.kind === 'rename' ? `${vscode.workspace.asRelativePath(op.rename.oldUri)} → ${vscode.workspace.asRelativePath(op.rename.newUri)}` : ''))
                .join(', ');
            void vscode.window.showInformationMessage(`LSP Agent: the edit also renames ${names}.`);
        }
        this.status = vscode.window.setStatusBarMessage(
            `$(diff) ${this.label ?? 'lsp-agent edit'}: Accept Edit (Ctrl+Alt+Enter) or Reject Edit (Ctrl+Alt+Backspace)`,
        );
        this.shown = true;
        this.checkTabs();
    }

    /** Shown by someone else (Edit Selection's thread): only the status bar says what to do. */
    showInPlace(): void {
        this.status = vscode.window.setStatusBarMessage(
            `$(diff) ${this.label ?? 'lsp-agent edit'}: Accept Edit (Ctrl+Alt+Enter) or Reject Edit (Ctrl+Alt+Backspace)`,
        );
    }

    proposals(): { uri: vscode.Uri; label: string; base: string; proposed: string }[] {
        return this.changes.map((change) => ({
            uri: change.uri,
            label: change.label,
            base: change.base,
            proposed: proposedSideText(change, this.proposedFiles),
        }));
    }

    /** Show the edit's first file again (its diffs may be behind other tabs). */
    async reveal(): Promise<void> {
        const first = this.changes[0];
        if (first) {
            await this.open(first, true, this.column());
        }
    }

    async showNext(): Promise<void> {
        const active = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
        const index = this.changes.findIndex(
            (change) => active instanceof vscode.TabInputTextDiff && active.modified.toString() === change.proposedUri.toString(),
        );
        const next = this.changes[(index + 1) % this.changes.length];
        if (next) {
            await this.open(next, true, this.column());
        }
    }

    /** Closing every diff of the edit without deciding rejects it. */
    checkTabs(): void {
        if (this.shown && !this.done && this.tabs().length === 0) {
            this.decide({ accept: false, reason: 'the user closed the review without accepting the edit' });
        }
    }

    /** Close the diffs; a proposed side the user changed is saved (to memory) first, so no prompt. */
    async close(): Promise<void> {
        this.status?.dispose();
        for (const change of this.changes) {
            const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === change.proposedUri.toString());
            if (document?.isDirty) {
                await document.save();
            }
        }
        const tabs = this.tabs();
        if (tabs.length > 0) {
            await vscode.window.tabGroups.close(tabs, true);
        }
    }

    /** Show the diff of `change`; `focus`: the user asked for it (else the keyboard stays put). */
    private async open(change: FileChange, focus: boolean, column?: vscode.ViewColumn): Promise<void> {
        const original = change.existed ? change.uri : change.originalUri;
        const title = `${path.basename(change.uri.path)} ↔ proposed (lsp-agent)`;
        await vscode.commands.executeCommand('vscode.diff', original, change.proposedUri, title, {
            preview: false,
            preserveFocus: !focus,
            viewColumn: column,
        } satisfies vscode.TextDocumentShowOptions);
    }

    /** The editor column the edit's diffs are in, once one is open. */
    private column(): vscode.ViewColumn | undefined {
        const proposed = new Set(this.changes.map((change) => change.proposedUri.toString()));
        return vscode.window.tabGroups.all.find((group) =>
            group.tabs.some((tab) => tab.input instanceof vscode.TabInputTextDiff && proposed.has(tab.input.modified.toString())),
        )?.viewColumn;
    }

    private tabs(): vscode.Tab[] {
        const proposed = new Set(this.changes.map((change) => change.proposedUri.toString()));
        return vscode.window.tabGroups.all.flatMap((group) =>
            group.tabs.filter((tab) => tab.input instanceof vscode.TabInputTextDiff && proposed.has(tab.input.modified.toString())),
        );
    }
}

/** A writable in-memory file system for the proposed sides, so the user can edit them. */
class ProposedFileSystem implements vscode.FileSystemProvider {
    private readonly files = new Map<string, { data: Uint8Array; mtime: number; ctime: number }>();
    private readonly changed = new vscode.EventEmitter<vscode.FileChangeEvent[]>();
    readonly onDidChangeFile = this.changed.event;

    put(uri: vscode.Uri, text: string): void {
        const now = Date.now();
        this.files.set(uri.path, { data: Buffer.from(text, 'utf8'), mtime: now, ctime: now });
    }

    remove(uri: vscode.Uri): void {
        this.files.delete(uri.path);
    }

    text(uri: vscode.Uri): string | undefined {
        const file = this.files.get(uri.path);
        return file ? Buffer.from(file.data).toString('utf8') : undefined;
    }

    watch(): vscode.Disposable {
        return new vscode.Disposable(() => undefined);
    }

    stat(uri: vscode.Uri): vscode.FileStat {
        const file = this.files.get(uri.path);
        if (file) {
            return { type: vscode.FileType.File, ctime: file.ctime, mtime: file.mtime, size: file.data.byteLength };
        }
        const prefix = uri.path.endsWith('/') ? uri.path : uri.path + '/';
        if ([...this.files.keys()].some((key) => key.startsWith(prefix))) {
            return { type: vscode.FileType.Directory, ctime: 0, mtime: 0, size: 0 };
        }
        throw vscode.FileSystemError.FileNotFound(uri);
    }

    readDirectory(uri: vscode.Uri): [string, vscode.FileType][] {
        const prefix = uri.path.endsWith('/') ? uri.path : uri.path + '/';
        const entries = new Map<string, vscode.FileType>();
        for (const key of this.files.keys()) {
            if (key.startsWith(prefix)) {
                const [first, ...rest] = key.slice(prefix.length).split('/');
                if (first) {
                    entries.set(first, rest.length > 0 ? vscode.FileType.Directory : vscode.FileType.File);
                }
            }
        }
        return [...entries];
    }

    readFile(uri: vscode.Uri): Uint8Array {
        const file = this.files.get(uri.path);
        if (!file) {
            throw vscode.FileSystemError.FileNotFound(uri);
        }
        return file.data;
    }

    writeFile(uri: vscode.Uri, content: Uint8Array): void {
        const file = this.files.get(uri.path);
        if (!file) {
            // Only the review creates proposed files; one whose review ended is gone.
            throw vscode.FileSystemError.NoPermissions('this review has ended');
        }
        file.data = content;
        file.mtime = Date.now();
        this.changed.fire([{ type: vscode.FileChangeType.Changed, uri }]);
    }

    createDirectory(): void {
        throw vscode.FileSystemError.NoPermissions('the proposed files are managed by LSP Agent');
    }

    delete(uri: vscode.Uri): void {
        this.files.delete(uri.path);
    }

    rename(): void {
        throw vscode.FileSystemError.NoPermissions('the proposed files are managed by LSP Agent');
    }
}

/** The proposed side's text, with the user's unsaved changes to it. */
function proposedSideText(change: FileChange, files: ProposedFileSystem): string {
    const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === change.proposedUri.toString());
    return document?.getText() ?? files.text(change.proposedUri) ?? change.proposed;
}

/** The edit's label without the server's `lsp-agent: ` prefix. */
function shortLabel(label: string | undefined): string {
    return label ? label.replace(/^lsp-agent: /, '') : 'the edit';
}

function fileChanges(operations: Operation[]): FileChange[] {
    return operations.flatMap((op) => (op.kind === 'file' ? [op.change] : []));
}

function finalsAsProposed(operations: Operation[]): Map<FileChange, string> {
    return new Map(fileChanges(operations).map((change) => [change, change.proposed]));
}

/** True unless every change annotation of the edit says it needs no confirmation. */
function needsConfirmation(edit: LspWorkspaceEdit): boolean {
    const annotations = Object.values(edit.changeAnnotations ?? {});
    return annotations.length === 0 || annotations.some((annotation) => annotation.needsConfirmation !== false);
}

function openDocument(uri: vscode.Uri): vscode.TextDocument | undefined {
    return vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString() && !d.isClosed);
}

async function exists(uri: vscode.Uri): Promise<boolean> {
    try {
        await vscode.workspace.fs.stat(uri);
        return true;
    } catch {
        return false;
    }
}

/** The file's text as the editor has it (unsaved changes included), else on disk, else undefined. */
async function currentText(uri: vscode.Uri): Promise<string | undefined> {
    const open = openDocument(uri);
    if (open) {
        return open.getText();
    }
    try {
        return Buffer.from(await vscode.workspace.fs.readFile(uri)).toString('utf8');
    } catch {
        return undefined;
    }
}

function toRange(edit: TextEdit): vscode.Range {
    return new vscode.Range(
        edit.range.start.line,
        edit.range.start.character,
        edit.range.end.line,
        edit.range.end.character,
    );
}

async function setReviewing(files: number | undefined): Promise<void> {
    await vscode.commands.executeCommand('setContext', REVIEWING, files !== undefined);
    await vscode.commands.executeCommand('setContext', REVIEW_FILES, files ?? 0);
}
